"""Sans-IO: the client side of the engine protocol, for one engine connection.

An :class:`EngineLink` takes what the engine sent (bytes from a socket, or decoded
messages from an engine in the same process) and hands each request's results to
its sink, synchronously; what the link must send (hello, queries, cancels, pongs,
pings) collects in an outbox the transport adapter empties. Every rule of the
protocol lives here once: the handshake, request ids, late frames dropped, final
frames ending a request, a failing sink cancelled once, engine errors classified,
heartbeat bookkeeping, a lost connection failing every request once.

The link's own states, like a request's (``pipeline/state.py``), change only
along :data:`TRANSITIONS`::

    HANDSHAKE --ack--> READY --lost/broken/close--> CLOSED
        \\-----refused/lost/broken---------------------^
"""

from __future__ import annotations

import enum
import itertools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from neutrino import __version__
from neutrino.engine.client import StreamSink, classify_engine_error, lost_connection, sink_failure
from neutrino.engine.liveness import Liveness
from neutrino.engine.messages import (
    MODAL_RESULTS,
    Cancel,
    EngineError,
    FinishReason,
    Hello,
    HelloAck,
    LoadModel,
    Message,
    ModalResult,
    ModelInfo,
    ModelsChanged,
    Ping,
    Pong,
    Query,
    TextResult,
    TokenBatch,
    UnloadModel,
    is_final,
)
from neutrino.engine.stats import CLIENT_GONE, EngineStats
from neutrino.engine.wire.codec import DecodeError, decode, encode
from neutrino.engine.wire.framing import FrameDecoder, FrameTooLarge, FramingError
from neutrino.engine.wire.reader import decode_token_batch, decode_tokens
from neutrino.engine.wire.schema import MAX_FRAME_BYTES, PROTOCOL_VERSION
from neutrino.errors import ErrorKind, NeutrinoError

log = logging.getLogger("neutrino.engine")


class LinkState(enum.Enum):
    HANDSHAKE = "handshake"
    READY = "ready"
    CLOSED = "closed"


TRANSITIONS: dict[LinkState, frozenset[LinkState]] = {
    LinkState.HANDSHAKE: frozenset({LinkState.READY, LinkState.CLOSED}),
    LinkState.READY: frozenset({LinkState.CLOSED}),
    LinkState.CLOSED: frozenset(),
}


class IllegalLinkTransition(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Handshaken:
    """The engine accepted our hello."""

    ack: HelloAck


@dataclass(frozen=True, slots=True)
class Refused:
    """The engine refused the hello (or speaks another protocol version)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Broken:
    """The engine broke the protocol: the transport must be aborted."""

    reason: str


@dataclass(frozen=True, slots=True)
class ModelsUpdated:
    """The engine's models changed (it loaded or unloaded one): every one, with its state."""

    models: list[ModelInfo]


LinkEvent = Handshaken | Refused | Broken | ModelsUpdated

Outgoing = Query | Cancel | Hello | Ping | Pong | LoadModel | UnloadModel
# Told how a load or unload ended: None when the engine did it, else why not.
ControlDone = Callable[[NeutrinoError | None], None]

# Cancelled requests whose late frames are still counted (the oldest are forgotten).
_CANCELLED_KEPT = 1024
# Frame bytes handled at once: a read holds up to 256 KiB (thousands of frames, each with
# its logprobs); past this much the rest waits for the adapter's next turn of the event
# loop (``pending``, ``receive_pending``), so one read never holds the loop for long.
SLICE_BYTES = 8 * 1024


class EngineLink:
    """One engine connection's protocol state; no I/O."""

    def __init__(
        self,
        name: str,
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        stats: EngineStats | None = None,
        slice_bytes: int = SLICE_BYTES,
        token: str = "",
    ) -> None:
        self.name = name
        self._slice_bytes = slice_bytes
        self._pending: list[bytes] = []  # frames read and not yet handled, in order
        self.state = LinkState.HANDSHAKE
        self.hello: HelloAck | None = None
        self.cancels_sent = 0
        self.stats = stats if stats is not None else EngineStats()
        self.streams: dict[int, StreamSink] = {}
        self.controls: dict[int, ControlDone] = {}  # loads and unloads awaiting their answer
        # Requests cancelled while the engine was on them: whether their client was gone.
        self._cancelled: dict[int, bool] = {}
        self._decoder = FrameDecoder(max_frame_bytes)
        self._out: list[tuple[int, Outgoing]] = []
        self._ids = itertools.count(1)
        self._nonces = itertools.count(1)
        self._reads = 0  # reads from the engine so far: each is a sign of life
        self.reported: Pong | None = None  # the engine's own load, from its last pong
        self.ours_at_report = 0  # our streams on this link when that pong came
        self._alive: Liveness | None = None
        hello = Hello(f"neutrino/{__version__}", PROTOCOL_VERSION, token_batches=True, token=token)
        self._send(0, hello)

    # ------------------------------------------------------------------ state

    def _advance(self, target: LinkState) -> None:
        if target not in TRANSITIONS[self.state]:
            raise IllegalLinkTransition(f"engine link {self.state.value} -> {target.value}")
        self.state = target

    @property
    def ready(self) -> bool:
        return self.state is LinkState.READY

    # ------------------------------------------------------------------ outbox

    def _send(self, rid: int, msg: Outgoing) -> None:
        if self.state is not LinkState.CLOSED:
            self._out.append((rid, msg))

    @property
    def wants_to_send(self) -> bool:
        return bool(self._out)

    def messages_to_send(self) -> list[tuple[int, Outgoing]]:
        """What to send the engine, in order (an in-process engine takes these)."""
        out, self._out = self._out, []
        return out

    def data_to_send(self) -> bytes:
        """What to send the engine, as frames on the wire."""
        out, self._out = self._out, []
        if len(out) == 1:
            return encode(*out[0])
        return b"".join([encode(rid, msg) for rid, msg in out])

    # ------------------------------------------------------------------ requests

    def submit(self, query: Query, sink: StreamSink) -> int:
        """Queue ``query``; its results go to ``sink``. Returns the request id."""
        if self.state is not LinkState.READY:
            raise NeutrinoError(ErrorKind.NO_ENGINE, "no engine connection is available")
        rid = next(self._ids)
        self.streams[rid] = sink
        self._send(rid, query)
        return rid

    def control(self, msg: LoadModel | UnloadModel, done: ControlDone) -> int:
        """Queue a load or unload; ``done`` is told how it ended (once)."""
        if self.state is not LinkState.READY:
            raise NeutrinoError(ErrorKind.NO_ENGINE, "no engine connection is available")
        rid = next(self._ids)
        self.controls[rid] = done
        self._send(rid, msg)
        return rid

    def cancel(self, rid: int, reason: str) -> bool:
        """Queue one cancel if the request is still in flight, and forget it."""
        if self.streams.pop(rid, None) is None:
            return False
        if self.state is LinkState.READY:
            self._send(rid, Cancel(reason=reason))
            self.cancels_sent += 1
            self.stats.cancels_sent += 1
            cancelled = self._cancelled
            cancelled[rid] = reason in CLIENT_GONE
            if len(cancelled) > _CANCELLED_KEPT:
                del cancelled[next(iter(cancelled))]
        return True

    def _late(self, rid: int, tokens: int, final: bool = False) -> None:
        """Frames for a request no longer in flight: tokens of a cancelled one are
        counted (the engine made them after the cancel), the rest only dropped."""
        gone = self._cancelled.pop(rid, None) if final else self._cancelled.get(rid)
        if gone is None or not tokens:
            return
        if gone:
            self.stats.tokens_after_disconnect += tokens
        else:
            self.stats.tokens_after_cancel += tokens

    def forget(self, rid: int) -> None:
        """Drop a request's sink without telling the engine (it already ended)."""
        self.streams.pop(rid, None)

    # ------------------------------------------------------------------ liveness

    def watch(self, now: float, window_s: float) -> None:
        """Start heartbeat bookkeeping: the engine must show life every ``window_s``."""
        self._alive = Liveness(window_s, now)

    def heartbeat(self, now: float, pending_write: int) -> bool:
        """Called every heartbeat interval: False once the engine showed no sign of life
        (a read from it, or its reading of ours) for the window; else queue a ping."""
        alive = self._alive
        if alive is None:
            raise RuntimeError("heartbeat() before watch()")
        if not alive.check(now, self._reads, pending_write):
            return False
        self._send(0, Ping(nonce=next(self._nonces)))
        return True

    @property
    def silent_since(self) -> float:
        return self._alive.last if self._alive is not None else 0.0

    # ------------------------------------------------------------------ endings

    def connection_lost(self) -> None:
        """The transport is gone: the frames it brought are handled, then every request
        still in flight fails, once."""
        while self._pending and self.state is not LinkState.CLOSED:
            self.receive_pending()
        self._pending = []
        if self.state is not LinkState.CLOSED:
            self._advance(LinkState.CLOSED)
        self._out = []
        streams, self.streams = self.streams, {}
        if streams:
            log.warning(
                "engine %s connection lost with %d requests in flight", self.name, len(streams)
            )
        for sink in streams.values():
            sink.on_error(lost_connection())
        controls, self.controls = self.controls, {}
        for done in controls.values():
            done(lost_connection())

    def _broken(self, reason: str) -> Broken:
        """The engine broke the protocol: nothing more is sent or submitted; the
        adapter aborts the transport and its loss fails the requests in flight."""
        log.error("engine %s broke the protocol: %s", self.name, reason)
        if self.state is not LinkState.CLOSED:
            self._advance(LinkState.CLOSED)
        self._out = []
        self._pending = []
        return Broken(reason)

    # ------------------------------------------------------------------ input

    def receive_data(self, data: bytes) -> LinkEvent | None:
        """Bytes read from the engine's socket."""
        self._reads += 1
        try:
            frames = self._decoder.feed(data)
        except (FrameTooLarge, FramingError) as exc:
            return self._broken(f"invalid stream: {exc}")
        if self._pending:  # the adapter reads on before the rest is handled: keep order
            self._pending += frames
            return None
        if len(frames) == 1:  # one engine step per read: the usual pace
            return self._receive_one(frames[0])
        return self._receive_slice(frames)

    @property
    def pending(self) -> bool:
        """Frames already read wait for :meth:`receive_pending` (the adapter stops
        reading until none do)."""
        return bool(self._pending)

    def receive_pending(self) -> LinkEvent | None:
        """Handle the next slice of the frames read earlier."""
        frames, self._pending = self._pending, []
        return self._receive_slice(frames) if frames else None

    def _receive_slice(self, frames: list[bytes]) -> LinkEvent | None:
        """Handle ``frames`` up to about ``slice_bytes`` of them; the rest is pending."""
        size, budget = 0, self._slice_bytes
        for i, frame in enumerate(frames):
            size += len(frame)
            if size > budget and i + 1 < len(frames):
                self._pending = frames[i + 1 :]
                return self._receive_frames(frames[: i + 1])
        return self._receive_frames(frames)

    def receive_messages(self, messages: Iterable[tuple[int, Message]]) -> LinkEvent | None:
        """Decoded messages from an engine in the same process (one 'read')."""
        self._reads += 1
        read = _Read()
        for rid, msg in messages:
            self._take(rid, msg, read)
        return self._end_read(read)

    def _receive_frames(self, frames: list[bytes]) -> LinkEvent | None:
        read = _Read()
        for frame in frames:
            fast = decode_tokens(frame)  # the per-token path, without building a message
            if fast is not None:
                _gather(read.tokens_of, fast[0], fast[1])
                continue
            try:
                rid, msg = _decode(frame)
            except DecodeError as exc:
                return self._broken(f"malformed frame: {exc}")
            self._take(rid, msg, read)
        return self._end_read(read)

    def _take(self, rid: int, msg: Message, read: _Read) -> None:
        """One message of a read. Token ids (plain results, token batches) are gathered
        per request and handed over in one call per stream (a continuous-batching
        engine sends one id per stream per step), before any other frame, so each
        stream still sees its frames in order."""
        if type(msg) is TokenBatch:
            _gather_batch(read.tokens_of, msg)
        elif type(msg) is TextResult and msg.plain:
            _gather(read.tokens_of, rid, msg.tokens)
        else:
            if read.tokens_of:
                self._hand_over(read.tokens_of.items(), read.dirty)
                read.tokens_of = {}
            read.event = self._on_message(rid, msg, read.dirty) or read.event

    def _end_read(self, read: _Read) -> LinkEvent | None:
        if read.tokens_of:
            self._hand_over(read.tokens_of.items(), read.dirty)
        self._flush(read.dirty)
        return read.event

    def _receive_one(self, frame: bytes) -> LinkEvent | None:
        fast = decode_tokens(frame)
        if fast is not None:  # one stream's ids: the per-token path, flushed at once
            rid, ids = fast
            sink = self.streams.get(rid)
            if sink is None:  # cancelled or unknown: a late frame
                self._late(rid, len(ids))
                return None
            try:
                if sink.on_tokens(ids):
                    sink.flush()
            except Exception as exc:
                self._sink_failed(rid, sink, exc)
            return None
        dirty: dict[StreamSink, None] = {}
        event: LinkEvent | None = None
        try:
            batch = decode_token_batch(frame)
            rid, msg = (0, batch) if batch is not None else decode(frame)
        except DecodeError as exc:
            return self._broken(f"malformed frame: {exc}")
        if type(msg) is TextResult:  # a stream's end, or a result with logprobs
            if msg.plain:
                self._hand_over(((rid, msg.tokens),), dirty)
            else:
                self._on_text(rid, msg, dirty)
        elif type(msg) is TokenBatch:
            self._on_batch(msg, dirty)
        else:
            event = self._on_message(rid, msg, dirty)
        self._flush(dirty)
        return event

    def _on_batch(self, msg: TokenBatch, dirty: dict[StreamSink, None]) -> None:
        """One engine step for many streams (a busy engine's per-token path)."""
        streams = self.streams
        tokens = msg.tokens
        pos = 0
        for rid, n in zip(msg.request_ids, msg.token_counts, strict=True):
            sink = streams.get(rid)
            if sink is not None:
                try:
                    if sink.on_tokens(tokens[pos : pos + n]):
                        dirty[sink] = None
                except Exception as exc:
                    self._sink_failed(rid, sink, exc)
            else:
                self._late(rid, n)
            pos += n

    def _hand_over(
        self, entries: Iterable[tuple[int, list[int]]], dirty: dict[StreamSink, None]
    ) -> None:
        """Give each request's sink its token ids; note the sinks that want a flush."""
        streams = self.streams
        for rid, ids in entries:
            sink = streams.get(rid)
            if sink is None:  # cancelled or unknown: a late frame
                self._late(rid, len(ids))
                continue
            try:
                if sink.on_tokens(ids):
                    dirty[sink] = None
            except Exception as exc:
                self._sink_failed(rid, sink, exc)

    def _on_message(
        self, rid: int, msg: Message, dirty: dict[StreamSink, None]
    ) -> LinkEvent | None:
        if type(msg) is TextResult:
            self._on_text(rid, msg, dirty)
        elif isinstance(msg, MODAL_RESULTS):
            self._on_modal(rid, msg)
        elif isinstance(msg, EngineError):
            return self._on_engine_error(rid, msg)
        elif isinstance(msg, Pong):
            self.reported = msg  # the engine's own load (a pong's read counted as life)
            self.ours_at_report = len(self.streams)
        elif isinstance(msg, Ping):
            self._send(0, Pong(nonce=msg.nonce))
        elif isinstance(msg, HelloAck):
            return self._on_ack(msg)
        elif isinstance(msg, ModelsChanged):
            return self._on_models(rid, msg)
        else:
            log.warning("engine %s sent unexpected %s", self.name, type(msg).__name__)
        return None

    def _on_text(self, rid: int, msg: TextResult, dirty: dict[StreamSink, None]) -> None:
        sink = self.streams.get(rid)
        if sink is None:  # cancelled or unknown: a late frame
            self._late(rid, len(msg.tokens), msg.finish_reason is not FinishReason.NONE)
            return
        if msg.finish_reason is not FinishReason.NONE:
            del self.streams[rid]
        try:
            if sink.on_result(msg):
                dirty[sink] = None
        except Exception as exc:
            self._sink_failed(rid, sink, exc)

    def _on_modal(self, rid: int, msg: ModalResult) -> None:
        sink = self.streams.get(rid)
        if sink is None:
            return
        if is_final(msg):
            del self.streams[rid]
        try:
            sink.on_modal(msg)
        except Exception as exc:
            self._sink_failed(rid, sink, exc)

    def _on_ack(self, ack: HelloAck) -> LinkEvent | None:
        if self.state is not LinkState.HANDSHAKE:
            log.warning("engine %s sent a second hello ack", self.name)
            return None
        if ack.protocol_version != PROTOCOL_VERSION:
            self._advance(LinkState.CLOSED)
            return Refused(
                f"engine speaks protocol {ack.protocol_version}, expected {PROTOCOL_VERSION}"
            )
        self._advance(LinkState.READY)
        self.hello = ack
        return Handshaken(ack)

    def _on_models(self, rid: int, msg: ModelsChanged) -> LinkEvent | None:
        if self.hello is None:
            return None
        self.hello.models = msg.models
        done = self.controls.pop(rid, None) if rid else None
        if done is not None:
            done(None)
        return ModelsUpdated(msg.models)

    def _on_engine_error(self, rid: int, err: EngineError) -> LinkEvent | None:
        done = self.controls.pop(rid, None) if rid else None
        if done is not None:
            done(classify_engine_error(err, self.name))
            return None
        if rid == 0:
            log.error("engine %s reported: %s (%s)", self.name, err.message, err.code.name)
            if self.state is LinkState.HANDSHAKE:
                self._advance(LinkState.CLOSED)
                return Refused(f"engine refused hello: {err.message}")
            return None
        sink = self.streams.pop(rid, None)
        if sink is not None:
            sink.on_error(classify_engine_error(err, self.name))
        return None

    def _sink_failed(self, rid: int, sink: StreamSink, exc: Exception) -> None:
        """``sink`` refused engine output: cancel its request (if the engine is still on
        it) and end it with the error; the other requests on the connection go on."""
        self.cancel(rid, "output rejected")
        sink.on_error(sink_failure(exc))

    def _flush(self, dirty: dict[StreamSink, None]) -> None:
        for sink in dirty:
            try:
                sink.flush()
            except Exception as exc:
                rid = next((r for r, s in self.streams.items() if s is sink), 0)
                self._sink_failed(rid, sink, exc)


class _Read:
    """What one read from the engine gathers before handing it over."""

    __slots__ = ("dirty", "event", "tokens_of")

    def __init__(self) -> None:
        # Sinks to flush once the read is handled, each once (streams interleave).
        self.dirty: dict[StreamSink, None] = {}
        self.tokens_of: dict[int, list[int]] = {}
        self.event: LinkEvent | None = None


def _decode(frame: bytes) -> tuple[int, Message]:
    batch = decode_token_batch(frame)
    if batch is not None:
        return 0, batch
    return decode(frame)


def _gather(tokens_of: dict[int, list[int]], rid: int, ids: list[int]) -> None:
    got = tokens_of.get(rid)
    if got is None:
        tokens_of[rid] = ids
    else:
        got += ids


def _gather_batch(tokens_of: dict[int, list[int]], msg: TokenBatch) -> None:
    tokens = msg.tokens
    pos = 0
    for rid, n in zip(msg.request_ids, msg.token_counts, strict=True):
        _gather(tokens_of, rid, tokens[pos : pos + n])
        pos += n
