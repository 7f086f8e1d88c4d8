"""An OpenAI-compatible HTTP server as an engine: the asyncio adapter.

The router sees it as it sees a pool of socket connections (``hello``, ``connected``,
``pick`` ...), and what it picks takes queries as a connection does (``submit``,
``cancel``, ``forget``): each query is one streamed HTTP request on a pooled keep-alive
connection, whose events the dialect (``llamacpp``) turns into results for the query's
sink. Cancelling a query closes its HTTP request, which the server sees and stops
generating. A task reads the server's health and models every ``refresh_s`` (and at
once after a request failed to reach it); while it does not answer, the pool is not
connected and the router sends its models' requests elsewhere.

In passthrough mode (any OpenAI-compatible server) it takes no queries: ``relay`` posts
the client's own body (its model renamed where ``upstream_names`` says so) and hands the
answer back as it comes (``relayed.RelayedAnswer``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse
from collections.abc import Callable
from typing import Any

import orjson

from neutrino.backoff import Backoff
from neutrino.config import EngineConfig, EngineLinkConfig
from neutrino.engine.client import (
    RequestOwner,
    StreamSink,
    classify_engine_error,
    lost_connection,
    sink_failure,
)
from neutrino.engine.messages import (
    EngineError,
    HelloAck,
    LoadModel,
    ModelInfo,
    ModelState,
    Query,
    TextQuery,
    UnloadModel,
)
from neutrino.engine.stats import EngineStats
from neutrino.engine.upstream import listing, llamacpp, vllm
from neutrino.engine.upstream.errors import MAX_ERROR_BYTES, upstream_error
from neutrino.engine.upstream.http1 import HTTP1Pool, Response
from neutrino.engine.upstream.relayed import RelayedAnswer
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.sse_decoder import SSEDecoder, SSEError

log = logging.getLogger("neutrino.engine")

DEFAULT_CONTEXT = 4096
MAX_EVENT_BYTES = 4 * 1024 * 1024
MAX_PROBE_BYTES = 4 * 1024 * 1024


class UpstreamDown(Exception):
    """The upstream did not answer its health or model probe as expected."""


class _Request:
    __slots__ = ("sink", "task")

    def __init__(self, sink: StreamSink) -> None:
        self.sink = sink
        self.task: asyncio.Task[None] | None = None


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


class UpstreamPool:
    """One HTTP upstream (``[[engines]] url``), kept probed; it is its own connection."""

    write_paused = False  # never: a request is one write, queued by its transport

    def __init__(
        self,
        cfg: EngineConfig,
        link: EngineLinkConfig,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.name = cfg.name or cfg.url
        self._link = link
        self._on_change = on_change
        self._root = llamacpp.root_of(cfg.url)
        # Token mode's dialect, as the probe found the server (llama.cpp's, or vLLM's).
        self._dialect: Any = llamacpp
        self._base = cfg.url.rstrip("/")
        self._headers = {"Content-Type": "application/json"}
        if cfg.api_key:
            self._headers["Authorization"] = f"Bearer {cfg.api_key}"
        parts = urllib.parse.urlsplit(self._root)
        self._origin = f"{parts.scheme}://{parts.netloc}"  # every URL here starts with it
        self._http = HTTP1Pool(
            self._origin,
            limit=cfg.capacity,
            connect_timeout=link.connect_timeout_s,
            headers=self._headers,
        )
        self._requests: dict[int, _Request] = {}
        self._next_rid = 0
        self._relays = 0  # relayed requests not yet closed (passthrough)
        self._loads_models = False  # a server that loads its models on demand (control)
        self._contexts: dict[str, int] = {}  # such a server's models' contexts, once loaded
        self._up = False
        self.problem = "not probed yet"  # why it is down, for the status page
        self.hello: HelloAck | None = None
        self.stats = EngineStats()
        self._connected_once = asyncio.Event()
        self._probe_now = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ pool side

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._maintain(), name=f"upstream-{self.name}"
        )

    async def wait_connected(self, timeout: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._connected_once.wait()
        return self.connected

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for rid in list(self._requests):
            self.cancel(rid, "shutdown")
        await self._http.close()

    @property
    def connected(self) -> bool:
        return self._up

    @property
    def connections(self) -> list[UpstreamPool]:
        return [self] if self._up else []

    @property
    def capacity(self) -> int:
        """Requests it takes at once, as its handshake said (1 before it)."""
        return self.hello.capacity if self.hello is not None else 1

    reported = 0  # an HTTP server says nothing of its load here

    @property
    def inflight(self) -> int:
        return len(self._requests) + self._relays

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
        return {
            "name": self.name,
            "url": self.cfg.url,
            "mode": self.cfg.mode,
            "connected": self._up,
            "problem": None if self._up else self.problem,
            "inflight": self.inflight,
            "stats": self.stats.snapshot(),
            "engine": hello.engine if hello else None,
            "capacity": hello.capacity if hello else 0,
            "models": [_model_entry(m, self._loads_models) for m in hello.models] if hello else [],
            "loads_models": self._loads_models,
            "models_max": hello.memory_budget if hello and self._loads_models else 0,
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
        self._next_rid += 1
        rid = self._next_rid
        req = self._requests[rid] = _Request(sink)
        req.task = asyncio.get_running_loop().create_task(self._run(rid, query, req))
        return rid

    def in_flight(self) -> list[tuple[RequestOwner, int, StreamSink]]:
        return [(self, rid, req.sink) for rid, req in self._requests.items()]

    def cancel(self, rid: int, reason: str) -> bool:
        req = self._requests.pop(rid, None)
        if req is None:
            return False
        if req.task is not None:
            req.task.cancel()  # closes the HTTP request: the server stops generating
        self.stats.cancels_sent += 1
        return True

    def forget(self, rid: int) -> None:
        req = self._requests.pop(rid, None)
        if req is not None and req.task is not None:
            req.task.cancel()

    async def control(self, msg: LoadModel | UnloadModel) -> None:
        """Have a server that loads on demand load or unload a model, and return once
        its listing says it did (the hello says so too by then)."""
        if not self._loads_models:
            raise NeutrinoError(
                ErrorKind.UNSUPPORTED, f"the upstream {self.name!r} loads no models"
            )
        load = isinstance(msg, LoadModel)
        try:
            await self._await_state(self._upstream_name(msg.name), load, msg.name)
            self._set_up(await self._probe())
        except (OSError, UpstreamDown) as exc:
            self._probe_now.set()
            raise NeutrinoError(
                ErrorKind.NO_ENGINE,
                f"the upstream {self.name!r} did not answer while it"
                f" {'loaded' if load else 'unloaded'} {msg.name!r}: {exc or type(exc).__name__}",
            ) from None

    async def _await_state(self, model: str, load: bool, name: str) -> None:
        path = listing.LOAD_PATH if load else listing.UNLOAD_PATH
        status, body = await self._post(self._root + path, {"model": model})
        want = ModelState.LOADED if load else ModelState.UNLOADED
        delay = 0.05
        while True:
            entry = (await self._models()).get(model)
            if entry is None:
                raise NeutrinoError(
                    ErrorKind.MODEL_NOT_FOUND, f"the upstream {self.name!r} does not list {name!r}"
                )
            if entry.state is want:
                return
            if status != 200 and entry.state is not ModelState.LOADING:
                raise classify_engine_error(upstream_error(status, body), self.name)
            if load and entry.failed:
                raise NeutrinoError(
                    ErrorKind.ENGINE_ERROR,
                    f"the upstream {self.name!r} could not load {name!r}: {entry.failed}",
                )
            await asyncio.sleep(delay)
            delay = min(0.5, delay * 2)

    def _request(self, method: str, url: str, body: bytes = b"", traceparent: str = "") -> Any:
        """An HTTP request to ``url`` (under the upstream's origin): its Response."""
        return self._http.request(method, url[len(self._origin) :] or "/", body, traceparent)

    async def _post(self, url: str, doc: dict[str, Any]) -> tuple[int, bytes]:
        async with asyncio.timeout(self._link.connect_timeout_s * 2):
            resp: Response = await self._request("POST", url, orjson.dumps(doc))
            try:
                return resp.status, (await resp.read(MAX_ERROR_BYTES))[:MAX_ERROR_BYTES]
            finally:
                resp.close()

    def _fail(self, rid: int, error: NeutrinoError) -> None:
        req = self._requests.pop(rid, None)
        if req is not None:
            req.sink.on_error(error)

    async def _run(self, rid: int, query: TextQuery, req: _Request) -> None:
        dialect = self._dialect
        data = dialect.body(query, self._upstream_name(query.model))
        if not isinstance(data, bytes):
            self._fail(rid, classify_engine_error(data, self.name))
            return
        try:
            resp: Response = await self._request(
                "POST", self._generate_url(), data, query.traceparent
            )
            try:
                if resp.status != 200:
                    err = upstream_error(resp.status, await resp.read(MAX_ERROR_BYTES))
                    self._fail(rid, classify_engine_error(err, self.name))
                    return
                answer = dialect.Answer(query)
                await self._relay(rid, req, resp, answer)
                if answer.done and not answer.cut and not resp.complete:
                    await _drain(resp)  # the end of the body: the connection is kept
            finally:
                resp.close()  # before the server's last event (a stop id): it stops
        except (OSError, SSEError) as exc:
            log.warning("upstream %s: request failed: %s", self.name, exc)
            self._fail(rid, lost_connection())
            self._probe_now.set()

    def _generate_url(self) -> str:
        if self._dialect is vllm:
            return self._base + vllm.PATH  # under /v1
        return self._root + llamacpp.PATH  # the server's native endpoint

    async def _relay(
        self,
        rid: int,
        req: _Request,
        resp: Response,
        answer: llamacpp.Answer | vllm.Answer,
    ) -> bool:
        """Pass the answer's results to the sink, a flush per read; False if it ended
        before the server finished (a stop id, a failing sink)."""
        decoder = SSEDecoder(MAX_EVENT_BYTES)
        sink = req.sink
        async for chunk in resp.chunks():
            flush = False
            for _kind, data in decoder.feed(chunk):
                out = answer.event(data)
                if out is None:
                    continue
                if isinstance(out, EngineError):
                    self._fail(rid, classify_engine_error(out, self.name))
                    return True
                if answer.done:
                    self._requests.pop(rid, None)
                try:
                    flush = sink.on_result(out) or flush
                except Exception as exc:  # the sink refused: the request ends with why
                    self._requests.pop(rid, None)
                    sink.on_error(sink_failure(exc))
                    return False
                if answer.done:
                    break
            if flush:
                sink.flush()
            if answer.done:
                return True
        self._fail(rid, lost_connection())
        return True

    async def relay(
        self, path: str, doc: dict[str, Any], raw: bytes, traceparent: str
    ) -> RelayedAnswer:
        """POST the client's body to ``path`` (under the base URL): ``raw`` as sent, or
        ``doc`` re-encoded with the upstream's name of its model; the answer when its
        status is 200, else the client's error for what the upstream answered."""
        model = doc.get("model")
        if isinstance(model, str) and model in self.cfg.upstream_names:
            raw = orjson.dumps({**doc, "model": self.cfg.upstream_names[model]})
        self._relays += 1
        try:
            resp: Response = await self._request("POST", self._base + path, raw, traceparent)
        except OSError as exc:
            self._relays -= 1
            log.warning("upstream %s: request failed: %s", self.name, exc)
            self._probe_now.set()
            raise lost_connection() from None
        except BaseException:
            self._relays -= 1
            raise
        if resp.status == 200:
            cfg = self.cfg
            return RelayedAnswer(
                resp, self._relay_closed, cfg.idle_timeout_s or None,
                cfg.first_byte_timeout_s or None,
            )  # fmt: skip
        self._relays -= 1
        try:
            body = (await resp.read(MAX_ERROR_BYTES))[:MAX_ERROR_BYTES]
        except OSError:
            body = b""
        finally:
            resp.close()
        raise classify_engine_error(upstream_error(resp.status, body), self.name)

    def _relay_closed(self) -> None:
        self._relays -= 1

    def _upstream_name(self, model: str) -> str:
        return self.cfg.upstream_names.get(model, model)

    # ------------------------------------------------------------------ probing

    async def _maintain(self) -> None:
        link = self._link
        backoff = Backoff(
            link.backoff_initial_s, max(link.backoff_initial_s, self.cfg.refresh_s), jitter=False
        )
        while True:
            try:
                hello = await self._probe()
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

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()

    async def _get(self, url: str) -> Any:
        async with asyncio.timeout(self._link.connect_timeout_s * 2):
            resp: Response = await self._request("GET", url)
            try:
                body = await resp.read(MAX_PROBE_BYTES)
            finally:
                resp.close()
        if resp.status != 200:
            raise UpstreamDown(f"GET {url}: HTTP status {resp.status}")
        if len(body) > MAX_PROBE_BYTES:
            raise UpstreamDown(f"GET {url}: longer than {MAX_PROBE_BYTES} bytes")
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            raise UpstreamDown(f"GET {url}: not JSON") from None

    async def _probe(self) -> HelloAck:
        """What the upstream serves now (UpstreamDown if it cannot serve in this mode)."""
        cfg = self.cfg
        if self.passthrough:
            listed = await self._models()
            if listing.loads_on_demand(listed):
                return await self._on_demand(listed, None, f"passthrough to {cfg.url}")
            models = [
                ModelInfo(
                    name, cfg.context_length or (listed[name].context if name in listed else 0)
                )
                for name in cfg.models or listed
            ]
            return HelloAck(f"passthrough to {cfg.url}", 0, models, cfg.capacity)
        props_doc = await self._get_or_none(self._root + "/props")
        most = listing.router_max(props_doc)
        if most is not None:
            self._dialect = llamacpp
            engine = f"{llamacpp.DIALECT} router at {self._root}"
            return await self._on_demand(await self._models(), most, engine)
        props = llamacpp.props_of(props_doc)
        if props is not None:
            self._dialect = llamacpp
            n_ctx, slots = props
            names = cfg.models or tuple(await self._models())
            context = cfg.context_length or n_ctx or DEFAULT_CONTEXT
            models = [ModelInfo(name, context) for name in names]
            capacity = min(cfg.capacity, slots) if slots > 0 else cfg.capacity
            return HelloAck(f"{llamacpp.DIALECT} at {self._root}", 0, models, capacity)
        version = vllm.version_of(await self._get_or_none(self._root + "/version"))
        if version is None:
            raise UpstreamDown(
                f"{self._root} is neither llama.cpp's server (GET /props) nor vLLM's (GET"
                " /version): token mode needs one of them; for another OpenAI-compatible"
                ' server use mode = "passthrough"'
            )
        self._dialect = vllm
        listed = await self._models()
        models = [
            ModelInfo(
                name,
                cfg.context_length or (listed[name].context if name in listed else 0)
                or DEFAULT_CONTEXT,
            )
            for name in cfg.models or listed
        ]  # fmt: skip
        return HelloAck(f"{vllm.DIALECT} {version} at {self._root}", 0, models, cfg.capacity)

    async def _on_demand(
        self, listed: dict[str, listing.Listed], most: int | None, engine: str
    ) -> HelloAck:
        """The hello of a server that loads its models on demand (llama.cpp's router):
        each model with its state, weighing one against a budget of ``most`` models."""
        if most is None:
            most = listing.router_max(await self._get_or_none(self._root + "/props")) or 0
        cfg = self.cfg
        models: list[ModelInfo] = []
        for name in cfg.models or listed:
            entry = listed.get(self._upstream_name(name))
            if entry is None:
                continue  # configured, but the server cannot load it
            state = entry.state if entry.state is not None else ModelState.LOADED
            if state is ModelState.LOADED and name not in self._contexts and not cfg.context_length:
                self._contexts[name] = await self._context_of(name)
            context = cfg.context_length or self._contexts.get(name) or entry.context
            models.append(ModelInfo(name, context or DEFAULT_CONTEXT, state=state, size_bytes=1))
        if not models:
            raise UpstreamDown(f"{cfg.url}/models lists none of the models {list(cfg.models)}")
        self._loads_models = True
        return HelloAck(engine, 0, models, cfg.capacity, memory_budget=most or len(models))

    async def _context_of(self, name: str) -> int:
        """A loaded model's context per slot, from its own ``/props`` (0: not said)."""
        query = urllib.parse.urlencode({"model": self._upstream_name(name)})
        props = llamacpp.props_of(await self._get_or_none(f"{self._root}/props?{query}"))
        return props[0] if props is not None else 0

    async def _get_or_none(self, url: str) -> Any:
        """``_get``, None when the server answers with an error status or not JSON."""
        try:
            return await self._get(url)
        except UpstreamDown:
            return None

    async def _models(self) -> dict[str, listing.Listed]:
        """The upstream's ``/models`` (UpstreamDown when it lists none)."""
        models = listing.models_of(await self._get(self.cfg.url.rstrip("/") + "/models"))
        if not models:
            raise UpstreamDown(f"{self.cfg.url}/models lists no model")
        return models
