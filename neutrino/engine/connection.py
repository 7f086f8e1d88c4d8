"""One UNIX-socket connection to an engine, multiplexing many requests.

This is the asyncio adapter around the sans-IO framing and codec: bytes in,
frames decoded and dispatched to per-request sinks synchronously (no task per
request), frames out through the transport. Heartbeats detect a silent peer;
a lost connection fails every request on it at once.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Iterable
from typing import Protocol, cast

from neutrino import __version__
from neutrino.engine.batching import WriteBatcher
from neutrino.engine.codec import DecodeError, decode, encode
from neutrino.engine.framing import FrameDecoder, FrameTooLarge, FramingError
from neutrino.engine.liveness import Liveness
from neutrino.engine.messages import (
    MODAL_RESULTS,
    Cancel,
    EngineError,
    ErrorCode,
    FinishReason,
    Hello,
    HelloAck,
    Message,
    ModalResult,
    Ping,
    Pong,
    Query,
    SpeechResult,
    TextResult,
    TokenBatch,
)
from neutrino.engine.reader import decode_token_batch, decode_tokens
from neutrino.engine.schema import PROTOCOL_VERSION
from neutrino.errors import ErrorKind, NeutrinoError

log = logging.getLogger("neutrino.engine")


class StreamSink(Protocol):
    """Receives one request's results; called synchronously from the event loop.

    A sink that cannot take what the engine sent raises from ``on_result``,
    ``on_tokens`` or ``on_modal`` (a :class:`NeutrinoError` says why). The engine
    client then cancels that request on the engine and ends the sink with the error
    (see :func:`sink_failure`); the connection and its other requests go on.
    """

    def on_result(self, result: TextResult) -> bool:
        """Take a result; True asks for ``flush()`` once the current batch is done."""
        ...

    def on_tokens(self, tokens: list[int]) -> bool:
        """Take a mid-stream result that carries only token ids (the hot path)."""
        ...

    def on_error(self, error: NeutrinoError) -> None: ...

    def on_modal(self, result: ModalResult) -> None:
        """Take a modality result (embeddings, scores, transcript, audio chunk, boxes)."""
        ...

    def flush(self) -> None:
        """Deliver what the batch produced (one write per stream per batch)."""
        ...


def sink_failure(exc: Exception) -> NeutrinoError:
    """The error a request ends with when its sink raised while taking engine output."""
    if isinstance(exc, NeutrinoError):
        return exc
    log.error("handling an engine result failed", exc_info=exc)
    return NeutrinoError(ErrorKind.INTERNAL, "internal error while handling the engine's output")


_ENGINE_ERRORS: dict[ErrorCode, ErrorKind] = {
    ErrorCode.INVALID_REQUEST: ErrorKind.BAD_REQUEST,
    ErrorCode.UNKNOWN_MODEL: ErrorKind.MODEL_NOT_FOUND,
    ErrorCode.OVERLOADED: ErrorKind.ENGINE_OVERLOADED,
    ErrorCode.CONTEXT_LENGTH: ErrorKind.CONTEXT_LENGTH,
    ErrorCode.UNSUPPORTED: ErrorKind.UNSUPPORTED,
}


def classify_engine_error(err: EngineError, engine: str = "") -> NeutrinoError:
    """The client-facing error for an engine's error frame.

    A code that blames the request (invalid, unknown model, context length, unsupported,
    overloaded) passes the engine's message on as one bounded line: it tells the client
    what to change. An internal or protocol failure is the engine's own business: its
    message, which may hold a trace or a path, is logged and the client gets a fixed text.
    """
    kind = _ENGINE_ERRORS.get(err.code)
    if kind is not None:
        return NeutrinoError(kind, f"engine error: {_one_line(err.message)}")
    log.warning("engine %s failed a request (%s): %s", engine, err.code.name, err.message[:4000])
    return NeutrinoError(ErrorKind.ENGINE_ERROR, "the engine failed to process the request")


def _one_line(message: str, limit: int = 300) -> str:
    line = message.strip().partition("\n")[0]
    line = "".join(c if c.isprintable() else " " for c in line[: limit + 1])
    return line if len(line) <= limit else line[: limit - 3] + "..."


class EngineConnection(asyncio.Protocol):
    """A connected, handshaken link to one engine."""

    def __init__(
        self,
        name: str,
        *,
        on_lost: Callable[[EngineConnection, Exception | None], None] | None = None,
        max_frame_bytes: int | None = None,
    ) -> None:
        self.name = name
        self._on_lost = on_lost
        self._decoder = FrameDecoder() if max_frame_bytes is None else FrameDecoder(max_frame_bytes)
        self._transport: asyncio.Transport | None = None
        self._streams: dict[int, StreamSink] = {}
        self._ids = itertools.count(1)
        self._nonces = itertools.count(1)
        self._ack: asyncio.Future[HelloAck] | None = None
        self._closed = False
        self._write_paused = False
        self._heartbeat: asyncio.Task[None] | None = None
        self._reads = 0  # reads from the engine so far: each is a sign of life
        self.hello: HelloAck | None = None
        self.cancels_sent = 0
        self._out = WriteBatcher()

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def open(
        cls,
        path: str,
        name: str,
        *,
        timeout: float,
        heartbeat_interval: float,
        heartbeat_timeout: float,
        on_lost: Callable[[EngineConnection, Exception | None], None] | None = None,
    ) -> EngineConnection:
        loop = asyncio.get_running_loop()
        conn = cls(name, on_lost=on_lost)
        conn._ack = loop.create_future()
        async with asyncio.timeout(timeout):
            await loop.create_unix_connection(lambda: conn, path)
            hello = Hello(
                client=f"neutrino/{__version__}",
                protocol_version=PROTOCOL_VERSION,
                token_batches=True,
            )
            conn._send(0, hello)
            try:
                ack = await conn._ack
            except BaseException:
                conn.close()
                raise
        if ack.protocol_version != PROTOCOL_VERSION:
            conn.close()
            raise ConnectionError(
                f"engine speaks protocol {ack.protocol_version}, expected {PROTOCOL_VERSION}"
            )
        conn.hello = ack
        if heartbeat_interval > 0:
            conn._heartbeat = loop.create_task(
                conn._heartbeat_loop(heartbeat_interval, heartbeat_timeout)
            )
        return conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        self._out.transport = self._transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._transport = None
        self._out.transport = None
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        if self._ack is not None and not self._ack.done():
            self._ack.set_exception(ConnectionError("engine closed the connection during hello"))
        streams, self._streams = self._streams, {}
        if streams:
            log.warning(
                "engine %s connection lost with %d requests in flight", self.name, len(streams)
            )
        for sink in streams.values():
            sink.on_error(
                NeutrinoError(ErrorKind.ENGINE_DISCONNECTED, "the engine connection was lost")
            )
        if self._on_lost is not None:
            self._on_lost(self, exc)

    def close(self) -> None:
        if self._transport is not None:
            self._out.flush()  # queued cancels still reach the engine
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    @property
    def is_open(self) -> bool:
        return not self._closed and self._transport is not None

    @property
    def inflight(self) -> int:
        return len(self._streams)

    # ------------------------------------------------------------------ requests

    def submit(self, query: Query, sink: StreamSink) -> int:
        """Send a query; results go to ``sink``. Returns the request id."""
        if not self.is_open:
            raise NeutrinoError(ErrorKind.NO_ENGINE, "no engine connection is available")
        rid = next(self._ids)
        self._streams[rid] = sink
        self._send(rid, query)
        return rid

    def cancel(self, rid: int, reason: str) -> bool:
        """Send one cancel frame if the request is still in flight; forget it."""
        if self._streams.pop(rid, None) is None:
            return False
        if self.is_open:
            self._send(rid, Cancel(reason=reason))
            self.cancels_sent += 1
        return True

    def forget(self, rid: int) -> None:
        self._streams.pop(rid, None)

    # ------------------------------------------------------------------ I/O

    def _send(self, rid: int, msg: Query | Cancel | Hello | Ping) -> None:
        """Queue a frame; frames queued in one loop iteration leave in one write."""
        if self._transport is not None:
            self._out.send(encode(rid, msg))

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False

    def data_received(self, data: bytes) -> None:
        self._reads += 1
        try:
            frames = self._decoder.feed(data)
        except (FrameTooLarge, FramingError) as exc:
            log.error("engine %s sent an invalid stream: %s", self.name, exc)
            self.abort()
            return
        streams = self._streams
        # Sinks to flush once the batch is read, each once (frames of many streams interleave).
        dirty: dict[StreamSink, None] = {}
        # Token ids per request, gathered over this read's token frames and handed over
        # in one call per stream (a continuous-batching engine sends one id per stream
        # per step): before any other frame, so each stream still sees its frames in order.
        tokens_of: dict[int, list[int]] = {}
        for frame in frames:
            fast = decode_tokens(frame)
            if fast is not None:
                if len(frames) == 1:  # a lone step of a lone stream: nothing to gather
                    self._hand_over((fast,), dirty)
                    continue
                got = tokens_of.get(fast[0])
                if got is None:
                    tokens_of[fast[0]] = fast[1]
                else:
                    got += fast[1]
                continue
            try:
                msg: Message | None = decode_token_batch(frame)
                rid = 0
                if msg is None:
                    rid, msg = decode(frame)
            except DecodeError as exc:
                log.error("engine %s sent a malformed frame: %s", self.name, exc)
                self.abort()
                return
            if type(msg) is TokenBatch:
                tokens = msg.tokens
                pos = 0
                if len(frames) == 1:  # one engine step per read (the usual pace)
                    # _hand_over inlined: this is the per-token path of a busy engine.
                    for rid, n in zip(msg.request_ids, msg.token_counts, strict=True):
                        sink = streams.get(rid)
                        if sink is not None:
                            try:
                                if sink.on_tokens(tokens[pos : pos + n]):
                                    dirty[sink] = None
                            except Exception as exc:
                                self._sink_failed(rid, sink, exc)
                        pos += n
                    continue
                for rid, n in zip(msg.request_ids, msg.token_counts, strict=True):
                    got = tokens_of.get(rid)
                    if got is None:
                        tokens_of[rid] = tokens[pos : pos + n]
                    else:
                        got += tokens[pos : pos + n]
                    pos += n
                continue
            if tokens_of:
                self._hand_over(tokens_of.items(), dirty)
                tokens_of = {}
            if type(msg) is TextResult:
                sink = streams.get(rid)
                if sink is None:
                    continue  # cancelled or unknown: ignore late results
                if msg.finish_reason is not FinishReason.NONE:
                    del streams[rid]
                try:
                    if sink.on_result(msg):
                        dirty[sink] = None
                except Exception as exc:
                    self._sink_failed(rid, sink, exc)
            elif isinstance(msg, MODAL_RESULTS):
                sink = streams.get(rid)
                if sink is None:
                    continue
                if not isinstance(msg, SpeechResult) or msg.final:
                    del streams[rid]
                try:
                    sink.on_modal(msg)
                except Exception as exc:
                    self._sink_failed(rid, sink, exc)
            elif isinstance(msg, EngineError):
                self._on_engine_error(rid, msg)
            elif isinstance(msg, Pong):
                pass  # its read already counted as a sign of life
            elif isinstance(msg, HelloAck):
                if self._ack is not None and not self._ack.done():
                    self._ack.set_result(msg)
            elif isinstance(msg, Ping):
                if self._transport is not None:
                    self._transport.write(encode(0, Pong(nonce=msg.nonce)))
            else:
                log.warning("engine %s sent unexpected %s", self.name, type(msg).__name__)
        if tokens_of:
            self._hand_over(tokens_of.items(), dirty)
        for sink in dirty:
            try:
                sink.flush()
            except Exception as exc:
                rid = next((r for r, s in streams.items() if s is sink), 0)
                self._sink_failed(rid, sink, exc)

    def _hand_over(
        self, entries: Iterable[tuple[int, list[int]]], dirty: dict[StreamSink, None]
    ) -> None:
        """Give each request's stream its token ids; note the streams that want a flush."""
        streams = self._streams
        for rid, ids in entries:
            sink = streams.get(rid)
            if sink is None:
                continue  # cancelled or unknown: ignore late results
            try:
                if sink.on_tokens(ids):
                    dirty[sink] = None
            except Exception as exc:
                self._sink_failed(rid, sink, exc)

    def _sink_failed(self, rid: int, sink: StreamSink, exc: Exception) -> None:
        """``sink`` refused engine output: cancel its request (if the engine is still on
        it) and end it with the error; the other requests on the connection go on."""
        self.cancel(rid, "output rejected")
        sink.on_error(sink_failure(exc))

    def _on_engine_error(self, rid: int, err: EngineError) -> None:
        if rid == 0:
            log.error("engine %s reported: %s (%s)", self.name, err.message, err.code.name)
            if self._ack is not None and not self._ack.done():
                self._ack.set_exception(ConnectionError(f"engine refused hello: {err.message}"))
            return
        sink = self._streams.pop(rid, None)
        if sink is not None:
            sink.on_error(classify_engine_error(err, self.name))

    async def _heartbeat_loop(self, interval: float, timeout: float) -> None:
        """Ping every ``interval``; close the connection once the engine has shown no
        sign of life (a read from it, or its reading of ours: liveness.py) for
        ``timeout + interval``."""
        loop = asyncio.get_running_loop()
        alive = Liveness(timeout + interval, loop.time())
        while self.is_open:
            await asyncio.sleep(interval)
            t = self._transport
            pending = t.get_write_buffer_size() if t is not None else 0
            if not alive.check(loop.time(), self._reads, pending):
                log.error(
                    "engine %s showed no sign of life for %.1f s (nothing received, %d bytes "
                    "for it unread); closing the connection",
                    self.name,
                    loop.time() - alive.last,
                    pending,
                )
                self.abort()
                return
            self._send(0, Ping(nonce=next(self._nonces)))
