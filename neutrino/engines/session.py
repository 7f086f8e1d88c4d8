"""Sans-IO: the engine side of the engine protocol, for one client connection.

Every engine process (the mock, the embedder, a llama.cpp or vLLM bridge) is its
model code plus an :class:`EngineHandler`: a few callbacks that start and cancel
queries. An :class:`EngineSession` holds the protocol's rules once: hello first and
in our protocol version, request id 0 reserved, an id active at most once, cancels
of finished or unknown ids ignored, pings answered, frames of a finished request
dropped, malformed input answered with a protocol error and the connection closed.
One step's plain token results for many requests leave as one ``tokenBatch`` frame
when the client's hello accepts them, as a continuous-batching engine sends them.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from typing import Protocol

from neutrino.engine.messages import (
    MODAL_QUERIES,
    Cancel,
    EngineError,
    ErrorCode,
    FinishReason,
    Hello,
    HelloAck,
    LoadModel,
    Message,
    Ping,
    Pong,
    Query,
    TextQuery,
    TextResult,
    TokenBatch,
    UnloadModel,
    is_final,
)
from neutrino.engine.wire.codec import DecodeError, decode, encode
from neutrino.engine.wire.framing import FrameDecoder, FrameTooLarge, FramingError
from neutrino.engine.wire.schema import MAX_FRAME_BYTES, PROTOCOL_VERSION

log = logging.getLogger("neutrino.engines")


class Outlet(Protocol):
    """What an engine's handler writes its frames through: a socket connection
    (``neutrino.engines.serve``) or the in-process line (``neutrino.engines.inprocess``)."""

    paused: bool  # the client is not taking frames: wait for ``writable``

    def send(self, rid: int, msg: Message) -> None:
        """Queue a frame; what is queued in one loop iteration leaves together."""
        ...

    def flush(self) -> None:
        """Send what is queued now."""
        ...

    def abort(self) -> None:
        """Break the connection."""
        ...

    async def writable(self) -> None: ...


def not_served(query: Query) -> EngineError:
    """The answer to a query of a kind this engine does not serve."""
    return EngineError(
        ErrorCode.UNSUPPORTED, f"{type(query).__name__} is not served by this engine"
    )


def text_query(
    query: Query, check: Callable[[TextQuery], EngineError | None]
) -> TextQuery | EngineError:
    """``query`` when it is a text query that ``check`` (an engine's) lets through; else
    the error that answers it."""
    if not isinstance(query, TextQuery):
        return not_served(query)
    refused = check(query)
    return query if refused is None else refused


class EngineHandler:
    """An engine's callbacks; subclass and implement ``hello_ack`` and ``start``."""

    def received(self, rid: int, msg: Message) -> None:
        """Every frame from the client, before the session acts on it (for logs)."""

    def hello_ack(self, hello: Hello) -> HelloAck:
        """The engine's answer to a client's (version-checked) hello."""
        raise NotImplementedError

    def start(self, rid: int, query: Query) -> EngineError | None:
        """Begin ``query``; its frames go out through the connection's ``send``, the
        last one final. An error returned here is the request's answer."""
        raise NotImplementedError

    def cancel(self, rid: int, reason: str) -> None:
        """Stop request ``rid`` (it is active); it may still send a final frame now."""

    def control(self, rid: int, msg: LoadModel | UnloadModel) -> EngineError | None:
        """Load or unload a model; answer with ``ModelsChanged`` under ``rid`` once done
        (an engine that loads models on demand). An error returned is the answer."""
        return EngineError(ErrorCode.UNSUPPORTED, "this engine does not load or unload models")

    def ping(self, rid: int, nonce: int) -> Pong | None:
        """The pong to send now (None: the handler sends one itself, later)."""
        return Pong(nonce)

    def protocol_error(self, message: str) -> None:
        """The client broke the protocol; the connection is being closed."""
        log.warning("engine protocol error: %s", message)

    def lost(self) -> None:
        """The connection is gone: stop every request of it."""


class EngineSession:
    """One client connection's protocol state on the engine's side; no I/O."""

    def __init__(
        self,
        handler: EngineHandler,
        *,
        batch_tokens: bool = True,
        max_frame_bytes: int = MAX_FRAME_BYTES,
    ) -> None:
        self.handler = handler
        self.batch_tokens = batch_tokens  # whether this engine merges a step's tokens
        self.token_batches = False  # ... and the client's hello accepts them
        self.greeted = False
        # The secret a client's hello must carry (an engine listening on TCP); "" on a
        # UNIX socket, whose file mode says who may connect.
        self.token = ""
        self.active: set[int] = set()
        self.closing: str | None = None  # why the connection must close, once flushed
        self.batches = 0  # tokenBatch frames written so far
        self._decoder = FrameDecoder(max_frame_bytes)
        self._out: list[tuple[int, Message]] = []

    # ------------------------------------------------------------------ output

    def send(self, rid: int, msg: Message) -> None:
        """Queue a frame of request ``rid`` (0: of the connection); a frame of a request
        that already ended (cancelled, rejected, finished) is dropped."""
        if self.closing is not None:
            return
        if rid:
            active = self.active
            if rid not in active:
                return
            if type(msg) is TextResult:  # the per-token path: no call for the common case
                if msg.finish_reason is not FinishReason.NONE:
                    active.discard(rid)
            elif is_final(msg):
                active.discard(rid)
        self._out.append((rid, msg))

    @property
    def wants_to_send(self) -> bool:
        return bool(self._out)

    def messages_to_send(self) -> list[tuple[int, Message]]:
        """The queued frames as they are (a client in this process takes them unencoded)."""
        out, self._out = self._out, []
        return out

    def data_to_send(self) -> bytes:
        """The queued frames, one step's plain token results merged per batch."""
        out, self._out = self._out, []
        if not self.token_batches:
            return b"".join([encode(rid, msg) for rid, msg in out])
        frames: list[bytes] = []
        step = _Step()
        ids, counts, tokens = step.ids, step.counts, step.tokens
        for rid, msg in out:
            if type(msg) is TextResult and msg.plain:
                ids.append(rid)
                counts.append(len(msg.tokens))
                tokens += msg.tokens
                continue
            if ids:  # a request's tokens stay ahead of its end
                self.batches += step.seal(frames)
                ids, counts, tokens = step.ids, step.counts, step.tokens
            frames.append(encode(rid, msg))
        self.batches += step.seal(frames)
        return b"".join(frames)

    # ------------------------------------------------------------------ input

    def receive_data(self, data: bytes) -> None:
        """Bytes from the client; act on every whole frame."""
        if self.closing is not None:
            return
        try:
            frames = self._decoder.feed(data)
        except (FrameTooLarge, FramingError) as exc:
            self._protocol_error(str(exc))
            return
        for frame in frames:
            try:
                rid, msg = decode(frame)
            except DecodeError as exc:
                self._protocol_error(str(exc))
                return
            self.receive(rid, msg)
            if self.closing is not None:
                return

    def receive(self, rid: int, msg: Message) -> None:
        """One decoded frame from the client."""
        self.handler.received(rid, msg)
        if isinstance(msg, (TextQuery, *MODAL_QUERIES, LoadModel, UnloadModel)):
            self._on_query(rid, msg)
        elif isinstance(msg, Cancel):
            if rid in self.active:
                self.handler.cancel(rid, msg.reason)
                self.active.discard(rid)
        elif isinstance(msg, Ping):
            pong = self.handler.ping(rid, msg.nonce)
            if pong is not None:
                self._out.append((rid, pong))
        elif isinstance(msg, Hello):
            self._on_hello(msg)
        elif not isinstance(msg, Pong):
            self._protocol_error(f"unexpected {type(msg).__name__} from client")

    def _on_hello(self, hello: Hello) -> None:
        if hello.protocol_version != PROTOCOL_VERSION:
            self._protocol_error(
                f"protocol version {hello.protocol_version} not supported "
                f"(engine speaks {PROTOCOL_VERSION})"
            )
            return
        if self.token and not hmac.compare_digest(hello.token.encode(), self.token.encode()):
            self._protocol_error("unauthorized: the hello carries no token or a wrong one")
            return
        self.greeted = True
        self.token_batches = hello.token_batches and self.batch_tokens
        self._out.append((0, self.handler.hello_ack(hello)))

    def _on_query(self, rid: int, query: Query | LoadModel | UnloadModel) -> None:
        if not self.greeted:
            self._protocol_error(f"{type(query).__name__} before hello")
            return
        if rid == 0:
            self._out.append(
                (0, EngineError(ErrorCode.INVALID_REQUEST, "request id 0 is reserved"))
            )
            return
        if rid in self.active:
            # The id is now ambiguous: the running request ends too, with this error.
            self.handler.cancel(rid, "request id reused")
            self.active.discard(rid)
            self._out.append(
                (rid, EngineError(ErrorCode.INVALID_REQUEST, f"request id {rid} already active"))
            )
            return
        self.active.add(rid)
        if isinstance(query, LoadModel | UnloadModel):
            refused = self.handler.control(rid, query)
        else:
            refused = self.handler.start(rid, query)
        if refused is not None:
            self.send(rid, refused)

    def _protocol_error(self, message: str) -> None:
        self._out.append((0, EngineError(ErrorCode.PROTOCOL, message)))
        self.closing = message
        self.handler.protocol_error(message)

    def connection_lost(self) -> None:
        """The transport is gone: the handler stops everything; nothing more is sent."""
        self.closing = self.closing or "connection lost"
        self.active.clear()
        self._out = []
        self.handler.lost()


class _Step:
    """Plain token results of one engine step, gathered into one frame."""

    __slots__ = ("counts", "ids", "tokens")

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.counts: list[int] = []
        self.tokens: list[int] = []

    def seal(self, frames: list[bytes]) -> int:
        """Append the gathered frame, if any; 1 if it was a tokenBatch."""
        ids = self.ids
        if not ids:
            return 0
        batch = len(ids) > 1
        if batch:
            frames.append(encode(0, TokenBatch(ids, self.counts, self.tokens)))
        else:  # one request: its plain result, as a client without batches gets it
            frames.append(encode(ids[0], TextResult(self.tokens)))
        self.ids, self.counts, self.tokens = [], [], []
        return int(batch)
