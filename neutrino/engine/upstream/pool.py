"""An OpenAI-compatible HTTP server as an engine: the asyncio adapter.

The router sees it as it sees a pool of socket connections (``hello``, ``connected``,
``pick`` ...), and what it picks takes queries as a connection does (``submit``,
``cancel``, ``forget``). As on the socket side, the adapter does the I/O and sans-IO
parts hold the rules: each query is one streamed HTTP request on a pooled keep-alive
connection (``http1.py``), whose bytes the upstream link (``link.py``) turns into results
for the query's sink through the dialect (``llamacpp``, ``vllm``). Cancelling a query
closes its HTTP request, which the server sees and stops generating. A task runs the
prober (``prober.py``: health, models, on-demand loading) every ``refresh_s``, and at
once after a request failed to reach the server; while it does not answer, the pool is
not connected and the router sends its models' requests elsewhere.

In passthrough mode it takes no queries: the relayer (``relayer.py``) posts the client's
own body and hands the answer back as it comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse
from collections.abc import Callable
from typing import Any

from neutrino.backoff import Backoff
from neutrino.config import EngineConfig, EngineLinkConfig
from neutrino.engine.client import RequestOwner, StreamSink, classify_engine_error, lost_connection
from neutrino.engine.messages import HelloAck, LoadModel, ModelInfo, Query, TextQuery, UnloadModel
from neutrino.engine.pool_base import PoolBase
from neutrino.engine.upstream import llamacpp
from neutrino.engine.upstream.errors import MAX_ERROR_BYTES, upstream_error
from neutrino.engine.upstream.http1 import HTTP1Pool, Response
from neutrino.engine.upstream.link import Stream, UpstreamLink
from neutrino.engine.upstream.prober import Prober, UpstreamDown
from neutrino.engine.upstream.relayed import RelayedAnswer
from neutrino.engine.upstream.relayer import Relayer
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.sse_decoder import SSEError

log = logging.getLogger("neutrino.engine")


def _model_entry(m: ModelInfo, states: bool) -> dict[str, object]:
    entry: dict[str, object] = {"name": m.name, "context_length": m.context_length}
    if states:
        entry["state"] = m.state.name.lower()
    return entry


async def _drain(resp: Response) -> None:
    """Read what is left of an answer the server has ended (its last chunk's framing)."""
    with contextlib.suppress(TimeoutError, OSError):
        async with asyncio.timeout(1.0):
            async for _ in resp.chunks():
                pass


class UpstreamPool(PoolBase):
    """One HTTP upstream (``[[engines]] url``), kept probed; it is its own connection."""

    write_paused = False  # never: a request is one write, queued by its transport
    reported = 0  # an HTTP server says nothing of its load here

    def __init__(
        self,
        cfg: EngineConfig,
        link: EngineLinkConfig,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(cfg, cfg.name or cfg.url, link, on_change)
        headers = {"Content-Type": "application/json"}
        if cfg.api_key:
            headers["Authorization"] = f"Bearer {cfg.api_key}"
        parts = urllib.parse.urlsplit(llamacpp.root_of(cfg.url))
        self._origin = f"{parts.scheme}://{parts.netloc}"  # every URL here starts with it
        self._http = HTTP1Pool(
            self._origin,
            limit=cfg.capacity,
            connect_timeout=link.connect_timeout_s,
            headers=headers,
        )
        self._streams = UpstreamLink(self.name)
        self._prober = Prober(cfg, link, self.name, self._request)
        self._relayer = Relayer(cfg, self.name, self._request, self._probe_soon)
        self._up = False
        self.problem = "not probed yet"  # why it is down, for the status page
        self._probe_now = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ pool side

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._maintain(), name=f"upstream-{self.name}"
        )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for rid in list(self._streams.streams):
            self.cancel(rid, "shutdown")
        await self._http.close()

    @property
    def connected(self) -> bool:
        return self._up

    @property
    def connections(self) -> list[UpstreamPool]:
        return [self] if self._up else []

    @property
    def inflight(self) -> int:
        return len(self._streams.streams) + self._relayer.open

    @property
    def passthrough(self) -> bool:
        return self.cfg.mode == "passthrough"

    @property
    def is_open(self) -> bool:
        return self._up

    def pick(self) -> UpstreamPool | None:
        return self if self._up else None

    def snapshot(self) -> dict[str, object]:
        hello = self.hello
        loads = self._prober.loads_models
        return {
            **self._described(),
            "url": self.cfg.url,
            "mode": self.cfg.mode,
            "problem": None if self._up else self.problem,
            "inflight": self.inflight,
            "models": [_model_entry(m, loads) for m in hello.models] if hello else [],
            "loads_models": loads,
            "models_max": hello.memory_budget if hello and loads else 0,
        }

    # ------------------------------------------------------------------ queries

    def submit(self, query: Query, sink: StreamSink) -> int:
        if self.passthrough:
            raise NeutrinoError(
                ErrorKind.UNSUPPORTED,
                f"the model {query.model!r} is served by a passthrough upstream: only the"
                " routes it relays reach it (/v1/chat/completions, /v1/completions,"
                " /v1/messages)",
            )
        if type(query) is not TextQuery:
            raise NeutrinoError(
                ErrorKind.UNSUPPORTED, f"the upstream {self.name!r} serves text generation only"
            )
        rid, stream = self._streams.open(sink)
        stream.task = asyncio.get_running_loop().create_task(self._run(rid, query, stream))
        return rid

    def in_flight(self) -> list[tuple[RequestOwner, int, StreamSink]]:
        return self._streams.in_flight(self)

    def cancel(self, rid: int, reason: str) -> bool:
        stream = self._streams.close(rid)
        if stream is None:
            return False
        if stream.task is not None:
            stream.task.cancel()  # closes the HTTP request: the server stops generating
        self.stats.cancels_sent += 1
        return True

    def forget(self, rid: int) -> None:
        stream = self._streams.close(rid)
        if stream is not None and stream.task is not None:
            stream.task.cancel()

    async def control(self, msg: LoadModel | UnloadModel) -> None:
        """Have a server that loads on demand load or unload a model, and return once
        its listing says it did (the hello says so too by then)."""
        prober = self._prober
        if not prober.loads_models:
            raise NeutrinoError(
                ErrorKind.UNSUPPORTED, f"the upstream {self.name!r} loads no models"
            )
        load = isinstance(msg, LoadModel)
        try:
            await prober.await_state(prober.upstream_name(msg.name), load, msg.name)
            self._set_up(await prober.probe())
        except (OSError, UpstreamDown) as exc:
            self._probe_now.set()
            raise NeutrinoError(
                ErrorKind.NO_ENGINE,
                f"the upstream {self.name!r} did not answer while it"
                f" {'loaded' if load else 'unloaded'} {msg.name!r}: {exc or type(exc).__name__}",
            ) from None

    def _request(self, method: str, url: str, body: bytes = b"", traceparent: str = "") -> Any:
        """An HTTP request to ``url`` (under the upstream's origin): its Response."""
        return self._http.request(method, url[len(self._origin) :] or "/", body, traceparent)

    async def _run(self, rid: int, query: TextQuery, stream: Stream) -> None:
        prober = self._prober
        dialect = prober.dialect
        data = dialect.body(query, prober.upstream_name(query.model))
        if not isinstance(data, bytes):
            self._streams.fail(rid, classify_engine_error(data, self.name))
            return
        try:
            resp: Response = await self._request(
                "POST", prober.generate_url(), data, query.traceparent
            )
            try:
                if resp.status != 200:
                    err = upstream_error(resp.status, await resp.read(MAX_ERROR_BYTES))
                    self._streams.fail(rid, classify_engine_error(err, self.name))
                    return
                answer = stream.answer = dialect.Answer(query)
                await self._read(rid, stream, resp)
                if answer.done and not answer.cut and not resp.complete:
                    await _drain(resp)  # the end of the body: the connection is kept
            finally:
                resp.close()  # before the server's last event (a stop id): it stops
        except (OSError, SSEError) as exc:
            log.warning("upstream %s: request failed: %s", self.name, exc)
            self._streams.fail(rid, lost_connection())
            self._probe_now.set()

    async def _read(self, rid: int, stream: Stream, resp: Response) -> None:
        """The answer's reads through the link, until it is over; lost if it ends first."""
        feed = self._streams.feed
        async for chunk in resp.chunks():
            if feed(rid, stream, chunk):
                return
        self._streams.fail(rid, lost_connection())

    async def relay(
        self, path: str, doc: dict[str, object], raw: bytes, traceparent: str
    ) -> RelayedAnswer:
        """Passthrough: the client's body to ``path``, the upstream's answer back."""
        return await self._relayer.relay(path, doc, raw, traceparent)

    def _probe_soon(self) -> None:
        self._probe_now.set()

    # ------------------------------------------------------------------ probing

    async def _maintain(self) -> None:
        link = self._link
        backoff = Backoff(
            link.backoff_initial_s, max(link.backoff_initial_s, self.cfg.refresh_s), jitter=False
        )
        while True:
            try:
                hello = await self._prober.probe()
            except (OSError, UpstreamDown) as exc:
                self._set_down(str(exc) or type(exc).__name__)
                await self._wait(backoff.next())
                continue
            backoff.reset()
            self._set_up(hello)
            await self._wait(self.cfg.refresh_s)

    async def _wait(self, seconds: float) -> None:
        self._probe_now.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._probe_now.wait()

    def _set_down(self, problem: str) -> None:
        self.problem = problem
        if self._up:
            log.warning("upstream %s is down: %s", self.name, problem)
            self._up = False
            self.stats.reconnects += 1
            self._changed()

    def _set_up(self, hello: HelloAck) -> None:
        if not self._up:
            self.stats.connects += 1
        changed = not self._up or self.hello != hello
        if not self._up:
            log.info("upstream %s is up (%s)", self.name, hello.engine)
        self._up, self.hello, self.problem = True, hello, ""
        self._connected_once.set()
        if changed:
            self._changed()
