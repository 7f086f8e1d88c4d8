"""One QUIC connection speaking HTTP/3: aioquic's sans-IO ``H3Connection`` driven by
aioquic's asyncio ``QuicConnectionProtocol``.

Each request stream is a :class:`RequestStream`: a generation route's task (through an
:class:`~neutrino.frontends.quic.exchange.H3Exchange`) or a request relayed to the
aiohttp application (relay.py). A client that resets its stream, stops it, or closes
the connection cancels that task (the route then sends the engine its single cancel
frame) or tells the relayed handler its connection is lost (aiohttp cancels it).

Bounds: the request's HEADERS frame (``MAX_HEAD_BYTES``), its body (``[limits]
max_body_bytes``: 413 in the route's own error shape), concurrent streams
(``MAX_STREAMS``, QUIC's MAX_STREAMS), the time a head or a body may take (``[http]
header_timeout_s``, ``body_timeout_s``), and the connection's idle timeout (``[http]
keepalive_timeout_s``; the server pings while requests are open so that a long answer
does not look idle).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import ErrorCode, H3Connection
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.connection import NetworkAddress
from aioquic.quic.events import (
    ConnectionTerminated,
    QuicEvent,
    StopSendingReceived,
    StreamDataReceived,
    StreamReset,
)

from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.http.headers import error_headers
from neutrino.frontends.http.to_aiohttp import HandlerFactory, chunk
from neutrino.frontends.quic.exchange import H3Exchange
from neutrino.frontends.quic.head import (
    MAX_HEAD_BYTES,
    MAX_STREAMS,
    BodyLimit,
    Fields,
    RequestHead,
    parse_head,
    response_fields,
)
from neutrino.frontends.quic.relay import RelayTransport, ResponseReader, request_bytes

log = logging.getLogger("neutrino.http")

Route = Callable[[H3Exchange], Awaitable[None]]


@dataclass(slots=True)
class Settings:
    """What every connection of the listener shares."""

    routes: dict[bytes, Route]
    relay_factory: HandlerFactory
    max_body_bytes: int
    header_timeout_s: float
    body_timeout_s: float
    idle_timeout_s: float
    connections: set[H3Protocol] = field(default_factory=set)


class RequestStream:
    """One request stream: the connection's side of what a route or the relay writes."""

    __slots__ = (
        "_conn",
        "answered",
        "client_done",
        "ended",
        "exchange",
        "head",
        "limit",
        "parts",
        "relay",
        "sid",
        "task",
        "timer",
    )

    def __init__(self, conn: H3Protocol, sid: int, head: RequestHead, limit: int) -> None:
        self._conn = conn
        self.sid = sid
        self.head = head
        self.limit = BodyLimit(limit)
        self.parts: list[bytes] = []
        self.client_done = False  # the client ended its side (FIN or reset)
        self.answered = False  # a response head went out
        self.ended = False  # our side ended (FIN or reset)
        self.exchange: H3Exchange | None = None
        self.task: asyncio.Task[None] | None = None
        self.relay: RelayTransport | None = None
        self.timer: asyncio.TimerHandle | None = None

    # -- the Stream seam (exchange.py) and the relay's Sink

    def send_head(self, fields: Fields, end: bool = False) -> None:
        if self.ended:
            return
        self.answered = True
        try:
            self._conn.h3.send_headers(self.sid, fields, end_stream=end)
        except Exception:  # the client stopped the stream: nothing can be sent
            self.ended = True
            return
        self.ended = end
        self._conn.transmit_soon()

    def send_data(self, data: bytes, end: bool = False) -> bool:
        if self.ended:
            return False
        try:
            self._conn.h3.send_data(self.sid, data, end_stream=end)
        except Exception:
            self.ended = True
            return False
        self.ended = end
        self._conn.transmit_soon()
        return True

    def pending(self) -> int:
        return self._conn.unsent(self.sid)

    def reset(self) -> None:
        self._conn.abort_stream(self, ErrorCode.H3_REQUEST_CANCELLED)


class _Sink:
    """The relay's view of a stream (head, data, end)."""

    __slots__ = ("_stream",)

    def __init__(self, stream: RequestStream) -> None:
        self._stream = stream

    def head(self, status: int, headers: list[tuple[str, str]]) -> None:
        self._stream.send_head(response_fields(status, headers))

    def data(self, data: bytes) -> None:
        self._stream.send_data(data)

    def end(self) -> None:
        self._stream.send_data(b"", end=True)


class H3Protocol(QuicConnectionProtocol):
    """One client connection (see the module docstring)."""

    def __init__(self, *args: Any, settings: Settings, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # aioquic's own default is 128 and has no setting: this bound is ours.
        self._quic._local_max_streams_bidi.value = MAX_STREAMS
        self.h3 = H3Connection(self._quic)
        self.settings = settings
        self.requests: dict[int, RequestStream] = {}
        # Streams whose HEADERS have not arrived yet: bytes received, and their deadline.
        self._heads: dict[int, tuple[int, asyncio.TimerHandle]] = {}
        self._paused: set[RelayTransport] = set()
        self._pinger: asyncio.TimerHandle | None = None
        self._peer: NetworkAddress | None = None
        settings.connections.add(self)

    # ------------------------------------------------------------ QUIC side

    def datagram_received(self, data: bytes | str, addr: NetworkAddress) -> None:
        self._peer = addr
        super().datagram_received(data, addr)
        # Acknowledgements and the client's flow control credit may have freed room for
        # the relayed handlers whose writes paused (each registered itself as it paused).
        for relay in list(self._paused):
            relay.maybe_resume()
            if not relay.writing_paused:
                self._paused.discard(relay)

    def transmit_soon(self) -> None:
        self._transmit_soon()

    def unsent(self, sid: int) -> int:
        stream = self._quic._streams.get(sid)
        return len(stream.sender._buffer) if stream is not None else 0

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, StreamDataReceived) and event.stream_id not in self.requests:
            if not self._head_bytes(event):
                return
        elif isinstance(event, StreamReset | StopSendingReceived):
            self._client_left(event.stream_id, isinstance(event, StreamReset))
        elif isinstance(event, ConnectionTerminated):
            self._terminated()
        for h3_event in self.h3.handle_event(event):
            self._h3_event(h3_event)

    def _h3_event(self, event: H3Event) -> None:
        if isinstance(event, HeadersReceived):
            if event.stream_id not in self.requests:
                self._on_head(event.stream_id, event.headers, event.stream_ended)
            elif event.stream_ended:  # trailers end the body
                self._on_body(event.stream_id, b"", True)
        elif isinstance(event, DataReceived):
            self._on_body(event.stream_id, event.data, event.stream_ended)

    def _head_bytes(self, event: StreamDataReceived) -> bool:
        """Count a request stream's bytes before its HEADERS: False (and the stream
        refused) past MAX_HEAD_BYTES; the first byte starts the head's deadline."""
        sid = event.stream_id
        if sid % 4 != 0:  # unidirectional (control, QPACK) streams: aioquic's own
            return True
        quic_stream = self._quic._streams.get(sid)
        if quic_stream is not None and quic_stream.receiver._stop_error_code is not None:
            return False  # refused, or answered and no longer read
        seen = self._heads.get(sid)
        if seen is None:
            timer = self._loop.call_later(self.settings.header_timeout_s, self._head_timed_out, sid)
            seen = (0, timer)
        size = seen[0] + len(event.data)
        self._heads[sid] = (size, seen[1])
        if size > MAX_HEAD_BYTES:
            self._refuse(sid, ErrorCode.H3_EXCESSIVE_LOAD)
            return False
        return True

    def _head_timed_out(self, sid: int) -> None:
        if sid in self._heads:
            self._refuse(sid, ErrorCode.H3_REQUEST_REJECTED)

    def _refuse(self, sid: int, code: int) -> None:
        """Refuse a stream whose head never came whole (too large, too slow)."""
        seen = self._heads.pop(sid, None)
        if seen is not None:
            seen[1].cancel()
        with contextlib.suppress(Exception):
            self._quic.stop_stream(sid, code)
        with contextlib.suppress(Exception):
            self._quic.reset_stream(sid, code)
        self.transmit_soon()

    # ------------------------------------------------------------ requests

    def _on_head(self, sid: int, raw: Fields, ended: bool) -> None:
        seen = self._heads.pop(sid, None)
        if seen is not None:
            seen[1].cancel()
        try:
            head = parse_head(raw)
        except NeutrinoError as err:
            stream = RequestStream(self, sid, _NO_HEAD, 0)
            stream.client_done = ended
            self.requests[sid] = stream
            _answer_error(stream, err)
            self._finished(stream)
            return
        stream = RequestStream(self, sid, head, self.settings.max_body_bytes)
        self.requests[sid] = stream
        self._keep_alive()
        route = self.settings.routes.get(head.route_path) if head.method == "POST" else None
        if route is not None:
            self._start_route(stream, route)
        else:
            self._start_relay(stream)
        if ended:
            self._on_body(sid, b"", True)
        elif not stream.client_done:
            self._arm_body_timer(stream)

    def _start_route(self, stream: RequestStream, route: Route) -> None:
        ex = stream.exchange = H3Exchange(stream, stream.head)
        if stream.limit.declared_over(stream.head):
            ex.body_failed(stream.limit.error())
        stream.task = task = self._loop.create_task(self._serve(stream, route, ex))
        task.add_done_callback(lambda _: self._finished(stream))

    async def _serve(self, stream: RequestStream, route: Route, ex: H3Exchange) -> None:
        try:
            await route(ex)
        except (asyncio.CancelledError, ConnectionError):
            raise
        except Exception:
            log.exception("unhandled error on HTTP/3 POST %s", stream.head.route_path.decode())
            if not ex.answered:
                ex.fail(NeutrinoError(ErrorKind.INTERNAL, "internal server error"))

    def _on_body(self, sid: int, data: bytes, ended: bool) -> None:
        stream = self.requests.get(sid)
        if stream is None or stream.client_done:
            return
        over = stream.limit.add(len(data))
        relay = stream.relay
        if relay is not None:
            self._relay_body(stream, relay, data, ended, over)
        elif stream.exchange is not None:
            if over:
                stream.parts = []
                stream.exchange.body_failed(stream.limit.error())
            elif data:
                stream.parts.append(data)
            if ended:
                body, stream.parts = b"".join(stream.parts), []
                stream.exchange.body_done(body)
        if ended:
            stream.client_done = True
            self._cancel_timer(stream)
        elif data:
            self._arm_body_timer(stream)

    # ------------------------------------------------------------ relay

    def _start_relay(self, stream: RequestStream) -> None:
        head = stream.head
        if stream.limit.declared_over(head):
            _answer_error(stream, stream.limit.error())
            self._finished(stream)
            return
        reader = ResponseReader(_Sink(stream), head_only=head.method == "HEAD")
        relay = stream.relay = RelayTransport(
            reader,
            stream.pending,
            lambda whole: self._relay_closed(stream, whole),
            self._peer,
            self._paused.add,
        )
        handler = relay.handler = self.settings.relay_factory()
        handler.connection_made(relay)
        handler.data_received(request_bytes(head, chunked=head.content_length() is None))

    def _relay_body(
        self, stream: RequestStream, relay: RelayTransport, data: bytes, ended: bool, over: bool
    ) -> None:
        if over:
            relay.lost()
            if not stream.answered:
                _answer_error(stream, stream.limit.error())
            self._finished(stream)
            return
        handler = relay.handler
        if handler is None or relay.is_closing():
            return
        chunked = stream.head.content_length() is None
        if data:
            handler.data_received(chunk(data) if chunked else data)
        if ended and chunked:
            handler.data_received(b"0\r\n\r\n")

    def _relay_closed(self, stream: RequestStream, whole: bool) -> None:
        """aiohttp closed its connection: a whole response has ended its stream; one cut
        short (or never begun) is reset, so that the client sees it failed."""
        if not whole and not stream.ended:
            self.abort_stream(stream, ErrorCode.H3_INTERNAL_ERROR)
        self._finished(stream)

    # ------------------------------------------------------------ endings

    def _finished(self, stream: RequestStream) -> None:
        """The request is answered (or abandoned): what the client still sends is not
        read (STOP_SENDING, H3_NO_ERROR), and a response left open is reset."""
        if self.requests.get(stream.sid) is not stream:
            return
        del self.requests[stream.sid]
        self._cancel_timer(stream)
        if stream.relay is not None:
            self._paused.discard(stream.relay)
        if not stream.ended:
            self.abort_stream(stream, ErrorCode.H3_REQUEST_CANCELLED)
        elif not stream.client_done:
            stream.client_done = True
            with contextlib.suppress(Exception):
                self._quic.stop_stream(stream.sid, ErrorCode.H3_NO_ERROR)
            self.transmit_soon()

    def abort_stream(self, stream: RequestStream, code: int) -> None:
        """Reset our side and stop the client's (a slow reader dropped, a failure)."""
        stream.ended = True
        with contextlib.suppress(Exception):
            self._quic.reset_stream(stream.sid, code)
        if not stream.client_done:
            stream.client_done = True
            with contextlib.suppress(Exception):
                self._quic.stop_stream(stream.sid, code)
        self.transmit_soon()

    def _client_left(self, sid: int, reset: bool) -> None:
        """The client reset its side (``reset``) or stopped ours: its request is abandoned.
        Both halves must end for QUIC to discard the stream and give the client its
        credit back: aioquic resets our side itself only on STOP_SENDING, so after a
        RESET_STREAM alone ours is reset here (H3_REQUEST_CANCELLED); after a
        STOP_SENDING alone the client's side is stopped (``_finished``)."""
        stream = self.requests.get(sid)
        if stream is None:
            if sid in self._heads:
                self._refuse(sid, ErrorCode.H3_REQUEST_CANCELLED)
            elif reset:
                self._reset_unanswered(sid)
            return
        if reset:
            stream.client_done = True
        self._abandon(stream)
        self._finished(stream)  # resets our side unless it ended (a FIN: it stays whole)

    def _reset_unanswered(self, sid: int) -> None:
        """A stream reset before anything of it was read (its head lost, or never sent):
        reset our side too, unless we ended it (a request answered and finished)."""
        quic_stream = self._quic._streams.get(sid) if sid % 4 == 0 else None
        if quic_stream is not None and quic_stream.sender._buffer_fin is None:
            with contextlib.suppress(Exception):
                self._quic.reset_stream(sid, ErrorCode.H3_REQUEST_CANCELLED)
            self.transmit_soon()

    def _abandon(self, stream: RequestStream) -> None:
        if stream.task is not None and not stream.task.done():
            stream.task.cancel()  # the route closes its generations: one cancel each
        if stream.relay is not None:
            stream.relay.lost()

    def _terminated(self) -> None:
        for sid in list(self._heads):
            self._heads.pop(sid)[1].cancel()
        for stream in list(self.requests.values()):
            stream.client_done = stream.ended = True
            self._abandon(stream)
            self._finished(stream)
        if self._pinger is not None:
            self._pinger.cancel()
            self._pinger = None
        self.settings.connections.discard(self)

    # ------------------------------------------------------------ timers

    def _arm_body_timer(self, stream: RequestStream) -> None:
        self._cancel_timer(stream)
        stream.timer = self._loop.call_later(
            self.settings.body_timeout_s, self._body_timed_out, stream
        )

    @staticmethod
    def _cancel_timer(stream: RequestStream) -> None:
        if stream.timer is not None:
            stream.timer.cancel()
            stream.timer = None

    def _body_timed_out(self, stream: RequestStream) -> None:
        """The body paused past ``body_timeout_s``: a route answers 408 in its shape;
        a relayed request is answered 408 (if nothing was) and its handler let go."""
        stream.timer = None
        err = NeutrinoError(ErrorKind.REQUEST_TIMEOUT, "the request's body did not arrive in time")
        if stream.exchange is not None:
            stream.parts = []
            stream.exchange.body_failed(err)
            return
        if stream.relay is not None:
            stream.relay.lost()
        if not stream.answered:
            _answer_error(stream, err)
        self._finished(stream)

    def _keep_alive(self) -> None:
        """While requests are open, ping the client every third of the idle timeout: its
        acknowledgements keep a long answer's quiet connection from timing out."""
        if self._pinger is None:
            every = self.settings.idle_timeout_s / 3
            self._pinger = self._loop.call_later(every, self._ping)

    def _ping(self) -> None:
        self._pinger = None
        if self.requests:
            self._quic.send_ping(0)
            self.transmit()
            self._keep_alive()

    # ------------------------------------------------------------ shutdown

    def stopped(self) -> None:
        """The server stops: what is still open is abandoned, no timer is left."""
        self._terminated()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    @property
    def busy(self) -> bool:
        return any(s.task is not None or s.relay is not None for s in self.requests.values())


_NO_HEAD = RequestHead("", "/", "", {}, [])


def _answer_error(stream: RequestStream, err: NeutrinoError) -> None:
    """An OpenAI JSON error as the whole response (a request no route got to see)."""
    body = orjson.dumps(err.openai_body())
    extra = [("content-type", "application/json"), ("content-length", str(len(body)))]
    stream.send_head(response_fields(err.http_status, extra + error_headers(err)))
    stream.send_data(body, end=True)
