"""asyncio adapter: serves a ``MockEngine`` on a UNIX socket with the engine protocol.

One ``EngineConnection`` (an ``asyncio.Protocol``) per client connection; each text
query runs as a task that pulls frames from its ``MockGeneration`` and writes them,
pacing them with the configured time to first token and inter-token latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
from typing import Any, cast

from mocks.mock_ie.core import Fault, MockEngine, MockGeneration
from mocks.mock_ie.events import EventLog
from mocks.mock_ie.modalities import modal_answer
from mocks.mock_ie.stepwriter import StepWriter
from neutrino.engine.codec import DecodeError, decode
from neutrino.engine.framing import FrameDecoder, FrameTooLarge, FramingError
from neutrino.engine.messages import (
    AudioQuery,
    Cancel,
    DetectQuery,
    EmbedQuery,
    EngineError,
    ErrorCode,
    FinishReason,
    Hello,
    Message,
    Ping,
    Pong,
    RerankQuery,
    SpeechQuery,
    TextQuery,
)
from neutrino.engine.schema import PROTOCOL_VERSION

log = logging.getLogger("mock_ie")

_BACKLOG = 1024


class _Request:
    __slots__ = ("gen", "rid", "task")

    def __init__(self, rid: int, gen: MockGeneration) -> None:
        self.rid = rid
        self.gen = gen
        self.task: asyncio.Task[None] | None = None


class EngineConnection(asyncio.Protocol):
    """One client connection: framing, dispatch, and the streaming tasks of its requests."""

    def __init__(self, server: MockServer, conn_id: int) -> None:
        self._server = server
        self.conn_id = conn_id
        self._decoder = FrameDecoder()
        self._transport: asyncio.Transport | None = None
        self._requests: dict[int, _Request] = {}
        self._hello = False
        self._closing = False
        self._paused = False
        self._drain: asyncio.Future[None] | None = None
        self._out = StepWriter()
        self._modal: dict[int, asyncio.Task[None]] = {}

    @property
    def token_batches_sent(self) -> int:
        """tokenBatch frames written to this client so far."""
        return self._out.batches

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        self._out.transport = self._transport
        self._server.connections.add(self)
        self._emit("connect")

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        try:
            frames = self._decoder.feed(data)
        except (FrameTooLarge, FramingError) as exc:
            self._protocol_error(str(exc))
            return
        for frame in frames:
            if self._closing:
                return
            try:
                rid, msg = decode(frame)
            except DecodeError as exc:
                self._protocol_error(str(exc))
                return
            self._dispatch(rid, msg)

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        for task in list(self._modal.values()):
            task.cancel()
        for req in list(self._requests.values()):
            if req.task is not None:
                req.task.cancel()
            self._end(req, "disconnected")
        self._wake_writers()
        self._server.connections.discard(self)
        self._emit("disconnect", error=str(exc) if exc is not None else None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_writers()

    # ------------------------------------------------------------------ dispatch

    def _dispatch(self, rid: int, msg: Message) -> None:
        if isinstance(msg, TextQuery):
            if not self._hello:
                self._protocol_error("textQuery before hello")
                return
            self._on_query(rid, msg)
        elif isinstance(msg, EmbedQuery | RerankQuery | AudioQuery | SpeechQuery | DetectQuery):
            if not self._hello:
                self._protocol_error(f"{type(msg).__name__} before hello")
                return
            self._on_modal(rid, msg)
        elif isinstance(msg, Cancel):
            self._on_cancel(rid, msg)
        elif isinstance(msg, Ping):
            self._emit("ping", request_id=rid, nonce=msg.nonce)
            delay = self._server.pong_delay_s
            if delay > 0:
                asyncio.get_running_loop().call_later(delay, self._write, rid, Pong(msg.nonce))
            else:
                self._write(rid, Pong(msg.nonce))
        elif isinstance(msg, Hello):
            self._emit(
                "hello",
                client=msg.client,
                protocol_version=msg.protocol_version,
                token_batches=msg.token_batches,
            )
            if msg.protocol_version != PROTOCOL_VERSION:
                self._protocol_error(
                    f"protocol version {msg.protocol_version} not supported "
                    f"(engine speaks {PROTOCOL_VERSION})"
                )
                return
            self._hello = True
            self._out.token_batches = msg.token_batches and self._server.token_batches
            self._write(0, self._server.engine.hello_ack())
        elif isinstance(msg, Pong):
            pass
        else:
            self._protocol_error(f"unexpected {type(msg).__name__} from client")

    def _on_query(self, rid: int, q: TextQuery) -> None:
        s = q.sampling
        self._emit(
            "query",
            request_id=rid,
            model=q.model,
            prompt_tokens=len(q.prompt_tokens),
            prompt_ids=q.prompt_tokens,
            images=len(q.images),
            max_tokens=s.max_tokens,
            seed=s.seed,
            logprobs=s.logprobs,
            top_logprobs=s.top_logprobs,
            stop_token_ids=s.stop_token_ids,
        )
        if rid == 0:
            self._reject(rid, EngineError(ErrorCode.INVALID_REQUEST, "request id 0 is reserved"))
            return
        existing = self._requests.get(rid)
        if existing is not None:
            # The id is now ambiguous: end the running request too, with this error.
            if existing.task is not None:
                existing.task.cancel()
            self._release(existing)
            self._reject(
                rid, EngineError(ErrorCode.INVALID_REQUEST, f"request id {rid} already active")
            )
            return
        server = self._server
        if server.active >= server.engine.capacity:
            self._reject(
                rid,
                EngineError(
                    ErrorCode.OVERLOADED,
                    f"engine at capacity ({server.engine.capacity} concurrent requests)",
                ),
            )
            return
        started = server.engine.start(q)
        if isinstance(started, EngineError):
            self._reject(rid, started)
            return
        req = _Request(rid, started)
        self._requests[rid] = req
        server.active += 1
        req.task = asyncio.get_running_loop().create_task(self._stream(req))

    def _on_modal(
        self, rid: int, q: EmbedQuery | RerankQuery | AudioQuery | SpeechQuery | DetectQuery
    ) -> None:
        """Answer a modality query: one result (speech: a stream of chunks) or an error."""
        self._emit("query", request_id=rid, kind=type(q).__name__, model=q.model)
        server = self._server
        if rid == 0 or rid in self._requests or rid in self._modal:
            self._reject(rid, EngineError(ErrorCode.INVALID_REQUEST, f"bad request id {rid}"))
            return
        if server.active >= server.engine.capacity:
            self._reject(rid, EngineError(ErrorCode.OVERLOADED, "engine at capacity"))
            return
        answer = modal_answer(server.engine, q)
        if isinstance(answer, EngineError):
            self._reject(rid, answer)
            return
        server.active += 1
        self._modal[rid] = asyncio.get_running_loop().create_task(self._send_modal(rid, answer))

    async def _send_modal(self, rid: int, frames: list[Message]) -> None:
        server = self._server
        try:
            if server.ttft_s > 0:
                await asyncio.sleep(server.ttft_s)
            for i, frame in enumerate(frames):
                if i:
                    await asyncio.sleep(server.itl_s)
                if self._paused:
                    await self._writable()
                self._write(rid, frame)
            self._emit("finish", request_id=rid, finish_reason="stop", frames=len(frames))
        finally:
            if self._modal.pop(rid, None) is not None:
                server.active -= 1

    def _on_cancel(self, rid: int, msg: Cancel) -> None:
        task = self._modal.get(rid)
        if task is not None:
            self._emit("cancel", request_id=rid, reason=msg.reason, active=True)
            task.cancel()
            self._emit("finish", request_id=rid, finish_reason="cancelled")
            return
        req = self._requests.get(rid)
        self._emit("cancel", request_id=rid, reason=msg.reason, active=req is not None)
        if req is None or req.gen.done:
            return
        if req.task is not None:
            req.task.cancel()
        final = req.gen.cancel()
        self._write(rid, final)
        self._end(req, "cancelled", completion_tokens=final.completion_tokens)

    # ------------------------------------------------------------------ streaming

    async def _stream(self, req: _Request) -> None:
        server = self._server
        gen = req.gen
        try:
            if server.ttft_s > 0:
                await asyncio.sleep(server.ttft_s)
            first = True
            while True:
                if not first:
                    await asyncio.sleep(server.itl_s)  # 0: just yield so streams interleave
                first = False
                if self._paused:
                    await self._writable()
                item = gen.next()
                if isinstance(item, Fault):
                    if await self._fault(req, item):
                        return
                    continue  # pragma: no cover - a stall only ends by cancellation
                self._write(req.rid, item)
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
                self._write(req.rid, EngineError(ErrorCode.INTERNAL, f"mock engine bug: {exc}"))
                self._end(req, "error", code="internal")

    async def _fault(self, req: _Request, fault: Fault) -> bool:
        """Act out ``fault``; True when the request is over."""
        if fault.kind == "error":
            self._write(req.rid, EngineError(fault.code, fault.message))
            self._end(req, "error", code=fault.code.name.lower(), fault="error")
            return True
        if fault.kind == "drop":
            self._end(req, "dropped", fault="drop")
            self._flush()  # what was produced before the drop is on the wire
            self._closing = True
            if self._transport is not None:
                self._transport.abort()
            return True
        log.debug("request %d on connection %d stalls", req.rid, self.conn_id)
        self._emit("stall", request_id=req.rid)
        await asyncio.get_running_loop().create_future()  # until cancel or disconnect
        return True  # pragma: no cover

    # ------------------------------------------------------------------ helpers

    def _write(self, rid: int, msg: Message) -> None:
        """Queue a frame; everything queued in one loop iteration leaves in one write.

        With many streams in flight this is what a continuous-batching engine does:
        each decoding step's results for all requests go out together (their plain
        token results as one tokenBatch frame when the client accepts it).
        """
        if not self._closing:
            self._out.send(rid, msg)

    def _flush(self) -> None:
        if not self._closing:
            self._out.flush()

    async def _writable(self) -> None:
        while self._paused and not self._closing:
            if self._drain is None or self._drain.done():
                self._drain = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._drain)

    def _wake_writers(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)
        self._drain = None

    def _reject(self, rid: int, err: EngineError) -> None:
        self._write(rid, err)
        self._emit(
            "finish",
            request_id=rid,
            finish_reason="error",
            code=err.code.name.lower(),
            message=err.message,
        )

    def _release(self, req: _Request) -> bool:
        if self._requests.get(req.rid) is not req:
            return False
        del self._requests[req.rid]
        self._server.active -= 1
        return True

    def _end(self, req: _Request, reason: str, **fields: Any) -> None:
        if self._release(req):
            self._emit("finish", request_id=req.rid, finish_reason=reason, **fields)

    def _protocol_error(self, message: str) -> None:
        log.warning("connection %d: protocol error: %s", self.conn_id, message)
        self._write(0, EngineError(ErrorCode.PROTOCOL, message))
        self._emit("protocol_error", message=message)
        self._flush()
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    def _emit(self, event: str, **fields: Any) -> None:
        self._server.events.emit(event, self.conn_id, **fields)

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()


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
    ) -> None:
        if ttft_s < 0 or itl_s < 0 or pong_delay_s < 0:
            raise ValueError("delays must be non-negative")
        self.pong_delay_s = pong_delay_s
        self.socket_mode = socket_mode  # who may connect: the owner only, by default
        self.engine = engine
        self.ttft_s = ttft_s
        self.itl_s = itl_s
        self.events = events if events is not None else EventLog(None)
        # Merge one step's plain results into tokenBatch frames for clients that accept them.
        self.token_batches = token_batches
        self.active = 0  # requests streaming, across all connections
        self.connections: set[EngineConnection] = set()
        self._conn_seq = 0
        self._server: asyncio.AbstractServer | None = None
        self._path: str | None = None
        self._inode: int | None = None

    def _protocol(self) -> EngineConnection:
        self._conn_seq += 1
        return EngineConnection(self, self._conn_seq)

    async def start(self, path: str | os.PathLike[str]) -> None:
        """Bind ``path`` (replacing a stale socket) and start accepting connections.

        The socket is bound and listening under a temporary name and then renamed, so
        ``path`` appears only once connections to it succeed.
        """
        path = os.fspath(path)
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                raise FileExistsError(f"{path} exists and is not a socket")
            os.unlink(path)
        folder = os.path.dirname(path) or "."
        tmp = os.path.join(folder, f".mock_ie.{os.getpid()}.{id(self)}.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                sock.bind(tmp)
            except OSError:  # e.g. the temporary name is too long: bind in place
                tmp = path
                sock.bind(path)
            os.chmod(tmp, self.socket_mode)  # before anyone can connect
            sock.listen(_BACKLOG)
            sock.setblocking(False)
            loop = asyncio.get_running_loop()
            self._server = await loop.create_unix_server(
                self._protocol, sock=sock, backlog=_BACKLOG
            )
        except BaseException:
            sock.close()
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        if tmp != path:
            os.replace(tmp, path)
        self._path = path
        self._inode = os.lstat(path).st_ino

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
        if self._path is None:
            return
        with contextlib.suppress(OSError):
            if os.lstat(self._path).st_ino == self._inode:
                os.unlink(self._path)
        self._path = None
