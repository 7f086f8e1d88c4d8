"""Serves a ``MockEngine`` on a UNIX socket: the mock's engine handler.

The protocol's rules and the socket are the shared engine side's
(``neutrino/engines/``); what is the mock's own is here: each text query runs as a
task that pulls frames from its ``MockGeneration`` and sends them, paced by the
configured time to first token and inter-token latency, with faults acted out and
every frame received written to the event log.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
from typing import Any

from mocks.mock_ie.core import Fault, MockEngine, MockGeneration
from mocks.mock_ie.events import EventLog
from mocks.mock_ie.memory import MockMemory
from mocks.mock_ie.modalities import modal_answer
from neutrino.engine.messages import (
    AudioQuery,
    Cancel,
    DetectQuery,
    EmbedQuery,
    EngineError,
    ErrorCode,
    FinishReason,
    Hello,
    HelloAck,
    LoadModel,
    Message,
    ModalQuery,
    ModelsChanged,
    Ping,
    Pong,
    Query,
    RerankQuery,
    SpeechQuery,
    TextQuery,
    UnloadModel,
)
from neutrino.engines.inprocess import InProcessEngineClient
from neutrino.engines.serve import ServerConnection, listen_tcp, listen_unix, remove_socket
from neutrino.engines.session import EngineHandler, Outlet

log = logging.getLogger("mock_ie")


class _Request:
    __slots__ = ("gen", "model", "rid", "task")

    def __init__(self, rid: int, gen: MockGeneration, model: str) -> None:
        self.rid = rid
        self.gen = gen
        self.model = model
        self.task: asyncio.Task[None] | None = None


class MockHandler(EngineHandler):
    """One client connection's requests: a streaming task per text query, paced by the
    configured time to first token and inter-token latency; the protocol's rules are
    the engine session's (``neutrino/engines/session.py``)."""

    def __init__(self, server: MockServer, conn_id: int, conn: Outlet | None = None) -> None:
        self._server = server
        self.conn_id = conn_id
        self.conn = conn
        self._requests: dict[int, _Request] = {}
        self._modal: dict[int, asyncio.Task[None]] = {}

    # ------------------------------------------------------------------ callbacks

    def received(self, rid: int, msg: Message) -> None:
        """Every frame from the client, in the event log."""
        if isinstance(msg, TextQuery):
            self._log_query(rid, msg)
        elif isinstance(msg, EmbedQuery | RerankQuery | AudioQuery | SpeechQuery | DetectQuery):
            kind = type(msg).__name__
            extra: dict[str, object] = {}
            if isinstance(msg, AudioQuery):  # the audio as it came: its rate, its samples
                extra = {"sample_rate": msg.sample_rate, "pcm": base64.b64encode(msg.pcm).decode()}
            self._emit(
                "query", request_id=rid, kind=kind, model=msg.model, traceparent=msg.traceparent,
                **extra,
            )  # fmt: skip
        elif isinstance(msg, Cancel):
            active = rid in self._modal or rid in self._requests
            self._emit("cancel", request_id=rid, reason=msg.reason, active=active)
        elif isinstance(msg, Ping):
            self._emit("ping", request_id=rid, nonce=msg.nonce)
        elif isinstance(msg, Hello):
            self._emit(
                "hello",
                client=msg.client,
                protocol_version=msg.protocol_version,
                token_batches=msg.token_batches,
            )

    def _log_query(self, rid: int, q: TextQuery) -> None:
        s = q.sampling
        self._emit(
            "query",
            request_id=rid,
            model=q.model,
            prompt_tokens=len(q.prompt_tokens),
            prompt_ids=q.prompt_tokens,
            images=len(q.images),
            max_tokens=s.max_tokens,
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=s.top_k,
            seed=s.seed,
            logprobs=s.logprobs,
            top_logprobs=s.top_logprobs,
            stop_token_ids=s.stop_token_ids,
            traceparent=q.traceparent,
            forced_tokens=len(q.forced_tokens),
        )

    def hello_ack(self, hello: Hello) -> HelloAck:
        return self._server.engine.hello_ack()

    def start(self, rid: int, query: Query) -> EngineError | None:
        server = self._server
        if server.active >= server.engine.capacity:
            return self._refuse(
                rid,
                EngineError(
                    ErrorCode.OVERLOADED,
                    f"engine at capacity ({server.engine.capacity} concurrent requests)",
                ),
            )
        if not isinstance(query, TextQuery):
            return self._start_modal(rid, query)
        started = server.engine.start(query)
        if isinstance(started, EngineError):
            return self._refuse(rid, started)
        req = _Request(rid, started, query.model)
        self._requests[rid] = req
        server.active += 1
        if server.engine.memory is not None:
            server.engine.memory.began(query.model)
        req.task = asyncio.get_running_loop().create_task(self._stream(req))
        return None

    def control(self, rid: int, msg: LoadModel | UnloadModel) -> EngineError | None:
        memory = self._server.engine.memory
        if memory is None:
            return super().control(rid, msg)
        self._modal[rid] = asyncio.get_running_loop().create_task(self._control(rid, msg, memory))
        return None

    async def _control(self, rid: int, msg: LoadModel | UnloadModel, memory: MockMemory) -> None:
        """A load or unload, then its answer here and the new table on every connection."""
        kind = "load" if isinstance(msg, LoadModel) else "unload"
        try:
            self._emit(kind + "_start", model=msg.name)
            err = await (memory.load(msg.name) if kind == "load" else memory.unload(msg.name))
            if err is not None:
                self._send(rid, err)
                self._emit(kind, model=msg.name, error=err.message)
                return
            infos = self._server.engine.model_infos()
            self._send(rid, ModelsChanged(infos))
            for other in self._server.connections:
                if other.handler is not self:
                    other.handler._send(0, ModelsChanged(infos))
            self._emit(kind, model=msg.name, loaded=sorted(memory.loaded), peak=memory.peak)
        finally:
            self._modal.pop(rid, None)

    def _start_modal(self, rid: int, q: ModalQuery) -> EngineError | None:
        """A modality query: one result (speech: a stream of chunks) or an error."""
        answer = modal_answer(self._server.engine, q)
        if isinstance(answer, EngineError):
            return self._refuse(rid, answer)
        self._server.active += 1
        self._modal[rid] = asyncio.get_running_loop().create_task(self._send_modal(rid, answer))
        return None

    def cancel(self, rid: int, reason: str) -> None:
        task = self._modal.get(rid)
        if task is not None:
            task.cancel()
            self._emit("finish", request_id=rid, finish_reason="cancelled")
            return
        req = self._requests.get(rid)
        if req is None or req.gen.done:
            return
        if req.task is not None:
            req.task.cancel()
        if self._lag(req):
            return
        final = req.gen.cancel()
        self._send(rid, final)
        self._end(req, "cancelled", completion_tokens=final.completion_tokens)

    def _lag(self, req: _Request) -> bool:
        """Send the tokens a cancel does not stop (``cancel_lag_tokens``); True if the
        stream ended meanwhile."""
        lag = self._server.cancel_lag_tokens
        while lag > 0 and not req.gen.done:
            item = req.gen.next()
            if isinstance(item, Fault):
                return False
            self._send(req.rid, item)
            lag -= len(item.tokens)
            if item.finish_reason != FinishReason.NONE:
                self._end(req, item.finish_reason.name.lower())
                return True
        return False

    def ping(self, rid: int, nonce: int) -> Pong | None:
        pong = Pong(nonce, running=self._server.active)  # its load, from every client
        delay = self._server.pong_delay_s
        if delay <= 0:
            return pong
        asyncio.get_running_loop().call_later(delay, self._send, rid, pong)
        return None

    def protocol_error(self, message: str) -> None:
        log.warning("connection %d: protocol error: %s", self.conn_id, message)
        self._emit("protocol_error", message=message)

    def lost(self) -> None:
        for task in list(self._modal.values()):
            task.cancel()
        for req in list(self._requests.values()):
            if req.task is not None:
                req.task.cancel()
            self._end(req, "disconnected")

    # ------------------------------------------------------------------ streaming

    async def _send_modal(self, rid: int, frames: list[Message]) -> None:
        server = self._server
        try:
            if server.ttft_s > 0:
                await asyncio.sleep(server.ttft_s)
            for i, frame in enumerate(frames):
                if i:
                    await asyncio.sleep(server.itl_s)
                await self._writable()
                self._send(rid, frame)
            self._emit("finish", request_id=rid, finish_reason="stop", frames=len(frames))
        finally:
            if self._modal.pop(rid, None) is not None:
                server.active -= 1

    async def _stream(self, req: _Request) -> None:
        server = self._server
        gen = req.gen
        conn = self.conn
        assert conn is not None
        try:
            if server.ttft_s > 0:
                await asyncio.sleep(server.ttft_s)
            first = True
            while True:
                if not first:
                    await asyncio.sleep(server.itl_s)  # 0: just yield so streams interleave
                first = False
                stall = gen.pause_due()
                if stall:
                    await asyncio.sleep(stall)
                if conn.paused:
                    await conn.writable()
                item = gen.next()
                if isinstance(item, Fault):
                    if await self._fault(req, item):
                        return
                    continue  # pragma: no cover - a stall only ends by cancellation
                conn.send(req.rid, item)
                if item.finish_reason != FinishReason.NONE:
                    self._end(
                        req,
                        item.finish_reason.name.lower(),
                        completion_tokens=item.completion_tokens,
                        stop_token_id=item.stop_token_id,
                    )
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("request %d on connection %d failed", req.rid, self.conn_id)
            if self._requests.get(req.rid) is req:
                self._send(req.rid, EngineError(ErrorCode.INTERNAL, f"mock engine bug: {exc}"))
                self._end(req, "error", code="internal")

    async def _fault(self, req: _Request, fault: Fault) -> bool:
        """Act out ``fault``; True when the request is over."""
        if fault.kind == "error":
            self._send(req.rid, EngineError(fault.code, fault.message))
            self._end(req, "error", code=fault.code.name.lower(), fault="error")
            return True
        if fault.kind == "drop":
            self._end(req, "dropped", fault="drop")
            if self.conn is not None:
                self.conn.flush()  # what was produced before the drop is on the wire
                self.conn.abort()
            return True
        log.debug("request %d on connection %d stalls", req.rid, self.conn_id)
        self._emit("stall", request_id=req.rid)
        await asyncio.get_running_loop().create_future()  # until cancel or disconnect
        return True  # pragma: no cover

    # ------------------------------------------------------------------ helpers

    def _send(self, rid: int, msg: Message) -> None:
        if self.conn is not None:
            self.conn.send(rid, msg)

    async def _writable(self) -> None:
        if self.conn is not None and self.conn.paused:
            await self.conn.writable()

    def _refuse(self, rid: int, err: EngineError) -> EngineError:
        self._emit(
            "finish",
            request_id=rid,
            finish_reason="error",
            code=err.code.name.lower(),
            message=err.message,
        )
        return err

    def _end(self, req: _Request, reason: str, **fields: Any) -> None:
        if self._requests.get(req.rid) is not req:
            return
        del self._requests[req.rid]
        self._server.active -= 1
        if self._server.engine.memory is not None:
            self._server.engine.memory.ended(req.model)
        self._emit("finish", request_id=req.rid, finish_reason=reason, **fields)

    def _emit(self, event: str, **fields: Any) -> None:
        self._server.events.emit(event, self.conn_id, **fields)


class MockConnection(ServerConnection):
    """The engine session of one client on the socket, registered with its server."""

    def __init__(self, server: MockServer, handler: MockHandler) -> None:
        super().__init__(handler, batch_tokens=server.token_batches)
        self._server = server
        self.handler = handler
        handler.conn = self

    @property
    def token_batches_sent(self) -> int:
        """tokenBatch frames written to this client so far."""
        return self.session.batches

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._server.connections.add(self)
        self.handler._emit("connect")

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._server.connections.discard(self)
        self.handler._emit("disconnect", error=str(exc) if exc is not None else None)


class MockServer:
    """Listens on a UNIX socket and serves ``engine`` to every client that connects."""

    def __init__(
        self,
        engine: MockEngine,
        *,
        ttft_s: float = 0.0,
        itl_s: float = 0.0,
        events: EventLog | None = None,
        token_batches: bool = True,
        pong_delay_s: float = 0.0,
        socket_mode: int = 0o600,
        cancel_lag_tokens: int = 0,
    ) -> None:
        if ttft_s < 0 or itl_s < 0 or pong_delay_s < 0:
            raise ValueError("delays must be non-negative")
        self.pong_delay_s = pong_delay_s
        # Tokens a cancelled stream still gets (what a real engine's step in progress makes).
        self.cancel_lag_tokens = cancel_lag_tokens
        self.socket_mode = socket_mode  # who may connect: the owner only, by default
        self.engine = engine
        self.ttft_s = ttft_s
        self.itl_s = itl_s
        self.events = events if events is not None else EventLog(None)
        # Merge one step's plain results into tokenBatch frames for clients that accept them.
        self.token_batches = token_batches
        self.active = 0  # requests streaming, across all connections
        self.connections: set[MockConnection] = set()
        self._conn_seq = 0
        self._server: asyncio.AbstractServer | None = None
        self._path: str | None = None
        self._inode: int | None = None

    def handler(self, conn: Outlet | None = None) -> MockHandler:
        """The handler of a new client connection (``conn``: what it writes through)."""
        self._conn_seq += 1
        return MockHandler(self, self._conn_seq, conn)

    def _protocol(self) -> MockConnection:
        return MockConnection(self, self.handler())

    def in_process(self) -> InProcessEngineClient:
        """A client of this engine in the same event loop, without a socket: the
        engine session and this handler on one side, the engine link on the other."""
        return InProcessEngineClient(self.handler)

    async def start(self, path: str | os.PathLike[str]) -> None:
        """Bind ``path`` (replacing a stale socket) and start accepting connections;
        ``path`` appears only once connections to it succeed."""
        path = os.fspath(path)
        self._server = await listen_unix(path, self._protocol, self.socket_mode)
        self._path = path
        self._inode = os.lstat(path).st_ino

    async def start_tcp(self, host: str, port: int, token: str) -> None:
        """Listen on TCP; every client's hello must carry ``token``."""
        self._server = await listen_tcp(host, port, token, self._protocol)

    async def close(self) -> None:
        """Stop listening, drop every connection (cancelling its requests), remove the socket."""
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.abort()
        for _ in range(3):  # let connection_lost callbacks and task cancellations run
            await asyncio.sleep(0)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            self._server = None
        self._remove_socket()

    def _remove_socket(self) -> None:
        if self._path is not None and self._inode is not None:
            remove_socket(self._path, self._inode)
        self._path = None
