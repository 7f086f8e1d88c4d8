"""A lean HTTP/1.1 server for the generation routes, with aiohttp behind it.

Chat and text completions are where a front server spends its time, and aiohttp's
web layer (request and response objects, header multidicts, its stream writer)
costs more than the rest of a request's work. This protocol parses with
``httptools`` (llhttp) and serves ``POST /v1/chat/completions`` and
``POST /v1/completions`` itself, through the same route code as aiohttp
(:class:`~neutrino.frontends.http.openai.routes.Exchange` is the seam).

Every other request goes to the aiohttp application: the connection gets an
aiohttp request handler that writes to the real transport, and this protocol
relays it the request bytes, rebuilt from what the parser saw. Once a connection
has carried such a request it stays relayed, so responses keep their order.

Like aiohttp with ``handler_cancellation``, a client that goes away cancels the
task serving its request, which sends the engine its single cancel frame.
Requests on one connection are answered in order; pipelined ones wait in a small
bounded queue (reading pauses when it is full).

This module is the connection (parsing, ordering, timeouts, the relay); a request as
the routes see it is :class:`~neutrino.frontends.http.h1.exchange.H1Exchange`, and
response heads, chunks and whole error answers are framed by h1_wire.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
from collections import deque
from collections.abc import Awaitable, Callable
from typing import cast

import httptools

from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.http.h1.clock import ConnectionClock, Phase, Timeouts
from neutrino.frontends.http.h1.exchange import H1Exchange
from neutrino.frontends.http.reset import reset
from neutrino.frontends.http.to_aiohttp import HandlerFactory, chunk, request_head
from neutrino.observability.counters import Counters

log = logging.getLogger("neutrino.http")

MAX_LINE = 8190  # request line and each header field, as aiohttp allows
MAX_HEADERS = 128
MAX_QUEUED = 8  # pipelined requests held per connection before reading pauses
_DEFAULT_TIMEOUTS = Timeouts()

Route = Callable[[H1Exchange], Awaitable[None]]
AdmitHead = Callable[[dict[bytes, bytes]], NeutrinoError | None]


class H1Protocol(asyncio.Protocol):
    """One client connection (see the module docstring)."""

    def __init__(
        self,
        routes: dict[bytes, Route],
        relay_factory: HandlerFactory,
        max_body_bytes: int,
        timeouts: Timeouts,
        connections: set[H1Protocol],
        counters: Counters | None = None,
        admit_head: AdmitHead | None = None,
    ) -> None:
        self._routes = routes
        self._admit_head = admit_head
        self._relay_factory = relay_factory
        self._max_body = max_body_bytes
        self._timeouts = timeouts
        self._connections = connections
        self._counters = counters
        self.transport: asyncio.Transport | None = None
        # Dropped when the connection is lost: it refers back to this protocol, and the
        # cycle would keep the last request's buffers until the collector's next pass.
        self._parser: httptools.HttpRequestParser | None = httptools.HttpRequestParser(self)
        # The message being parsed.
        self._url = b""
        self._headers: dict[bytes, bytes] = {}
        self._raw_headers: list[tuple[bytes, bytes]] = []  # as sent: a relay forwards them
        self._body: list[bytes] = []
        self._body_len = 0
        self._route: Route | None = None
        self._chunked = False  # the relayed request's body is chunked: re-chunk it
        self._stopped = False  # answered early (bad or too large): read nothing more
        # Requests parsed but not yet answered, and the task answering the first.
        self._queue: deque[tuple[Route, H1Exchange]] = deque()
        self._task: asyncio.Task[None] | None = None
        self._paused = False
        self._closing = False
        # aiohttp's handler once the connection is relayed, and bytes held for it.
        self._relay: asyncio.Protocol | None = None
        self._held: list[bytes] = []
        # When the client has waited too long (clock.py), and the timer that looks.
        self._clock = ConnectionClock(timeouts, 0.0)
        self._timer: asyncio.TimerHandle | None = None
        # Writes wait on the client (pause_writing), and the timer that gives up on it.
        self._write_paused = False
        self._stall: asyncio.TimerHandle | None = None
        # Kept from connection_made: Python 3.11's get_running_loop() costs a getpid().
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------ transport side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)
        self._connections.add(self)  # SO_KEEPALIVE: inherited from the listener (serve)
        self._loop = loop = asyncio.get_running_loop()
        self._clock = ConnectionClock(self._timeouts, loop.time())
        self._timer = loop.call_later(self._timeouts.head_s, self._on_timer)

    def data_received(self, data: bytes) -> None:
        p = self._parser
        if self._stopped or p is None:
            return
        try:
            p.feed_data(data)
        except httptools.HttpParserUpgrade as exc:
            self._upgrade(data[exc.args[0] :] if exc.args else b"")
        except httptools.HttpParserError as exc:
            self._bad_request(exc)
        if self._clock.waiting:  # a request is still arriving: its deadline runs
            self._clock.read_ended(self._now())
            self._arm()

    def eof_received(self) -> bool | None:
        if self._relay is not None:
            return self._relay.eof_received()
        return None  # the transport closes; connection_lost cancels what is running

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._parser = None
        self._body = []
        self._held = []
        self._connections.discard(self)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        self._queue.clear()
        if self._task is not None:
            self._task.cancel()  # the client left: the route cancels its engine request
        if self._relay is not None:
            self._relay.connection_lost(exc)
        self.transport = None

    def pause_writing(self) -> None:
        """The client is not reading what we send: no next answer starts until it does,
        and if it reads nothing for ``send_s`` the connection is reset. While a handler
        is writing (a stream, aiohttp's), its own limits come first and know why: this
        is then the backstop, at twice the time."""
        self._write_paused = True
        if self._stall is None and self._loop is not None:
            idle = self._task is None and self._relay is None
            delay = self._timeouts.send_s * (1 if idle else 2)
            self._stall = self._loop.call_later(delay, self._write_stalled)
        if self._relay is not None:
            self._relay.pause_writing()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        if self._relay is not None:
            self._relay.resume_writing()
        if self._task is None and self._queue:
            self._next()

    def _write_stalled(self) -> None:
        self._stall = None
        t = self.transport
        if t is not None and self._write_paused:
            if self._counters is not None:
                self._counters.slow_readers_dropped += 1
            self._closing = True
            reset(t)

    def write(self, data: bytes) -> None:
        t = self.transport
        if t is not None and not t.is_closing():
            t.write(data)

    def close(self) -> None:
        """Close at once (shutdown; only idle or relayed connections are left then)."""
        self._closing = True
        if self.transport is not None:
            self.transport.close()

    @property
    def busy(self) -> bool:
        """A request of this connection is being answered (or waits to be)."""
        return self._task is not None or bool(self._queue)

    @property
    def idle(self) -> bool:
        return self._task is None and not self._queue and self._relay is None

    # ------------------------------------------------------------ parser callbacks

    def on_message_begin(self) -> None:
        self._clock.begin()
        self._url = b""
        self._headers = {}
        self._raw_headers = []
        self._body = []
        self._body_len = 0
        self._route = None

    def on_url(self, url: bytes) -> None:
        self._url += url
        if len(self._url) > MAX_LINE:
            raise _TooLong("the request line is too long")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._raw_headers.append((name, value))
        if len(self._raw_headers) > MAX_HEADERS:
            raise _TooLong("too many request headers")
        if len(name) + len(value) > MAX_LINE:
            raise _TooLong("a request header is too long")
        self._headers[name.lower()] = value

    def on_headers_complete(self) -> None:
        self._clock.head_done()
        if self._stopped:
            return
        p = self._parser
        assert p is not None
        route = None
        # Upgrade offers (h2c, websocket) go to aiohttp: llhttp would not parse their body.
        if (
            self._relay is None
            and p.get_http_version() == "1.1"
            and p.get_method() == b"POST"
            and b"upgrade" not in self._headers
        ):
            path = self._url.partition(b"?")[0]
            route = self._routes.get(path)
        if route is None:
            self._start_relay()
            return
        self._route = route
        refused = self._admit_head(self._headers) if self._admit_head is not None else None
        if refused is not None:  # no key, no body: answered before a byte of it is read
            self._answer_early(refused, route)
            return
        length = self._headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self._max_body:
            self._answer_early(self._too_large(), route)
            return
        if self._headers.get(b"expect", b"").lower() == b"100-continue":
            self.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _too_large(self) -> NeutrinoError:
        return NeutrinoError(
            ErrorKind.PAYLOAD_TOO_LARGE, f"the request body exceeds {self._max_body} bytes"
        )

    def on_body(self, body: bytes) -> None:
        self._clock.body_bytes += len(body)
        if self._relay is not None:
            self._forward(chunk(body) if self._chunked else body)
            return
        if self._stopped:
            return
        self._body_len += len(body)
        if self._body_len > self._max_body:
            self._answer_early(self._too_large(), self._route)
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._clock.message_done()
        if self._relay is not None:
            if self._chunked:
                self._forward(b"0\r\n\r\n")
            return
        if self._stopped or self._route is None:
            return
        p = self._parser
        assert p is not None
        ex = H1Exchange(self, self._headers, not p.should_keep_alive())
        ex.body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        self._body = []  # the exchange holds the body now, and only until it is read
        self._queue.append((self._route, ex))
        if self._task is None:
            self._next()
        if len(self._queue) >= MAX_QUEUED and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    # ------------------------------------------------------------ serving

    def _next(self) -> None:
        """Start answering the oldest queued request, if nothing is being answered."""
        if not self._queue or self.transport is None:
            self._task = None
            if self._held and self._relay is not None:
                self._flush_held()
            return
        if self._write_paused:
            return  # the client has not read the last answer: resume_writing goes on
        route, ex = self._queue.popleft()
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        loop = self._loop or asyncio.get_running_loop()
        self._task = task = loop.create_task(self._serve(route, ex))
        task.add_done_callback(self._served)

    async def _serve(self, route: Route, ex: H1Exchange) -> None:
        try:
            await route(ex)
        except (asyncio.CancelledError, ConnectionError):
            raise
        except Exception:
            path = self._url.partition(b"?")[0]  # never a query string (it may hold a key)
            log.exception("unhandled error on POST %s", path.decode("latin-1"))
            if not ex.streaming:
                err = NeutrinoError(ErrorKind.INTERNAL, "internal server error")
                ex.fail(err)
            else:
                ex.close = True
        if ex.streaming and not ex.ended:
            ex.close = True  # the body never ended (a client too slow): nothing can follow
        if ex.close and self.transport is not None:
            self._closing = True
            self.transport.close()

    def _served(self, task: asyncio.Task[None]) -> None:
        if self._task is task:
            self._task = None
            self._next()
            if self.idle and self.transport is not None and not self._clock.waiting:
                self._clock.served(self._now())  # the keep-alive wait starts
                if self._timer is None:
                    self._arm()

    # ------------------------------------------------------------ timeouts

    def _now(self) -> float:
        return (self._loop or asyncio.get_running_loop()).time()

    def _arm(self) -> None:
        """Make the timer fire by the clock's deadline (it re-arms itself when early)."""
        deadline = self._clock.deadline
        timer = self._timer
        if deadline == math.inf or (timer is not None and timer.when() <= deadline):
            return
        if timer is not None:
            timer.cancel()
        loop = self._loop or asyncio.get_running_loop()
        self._timer = loop.call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self.transport is None or self._closing:
            return
        clock = self._clock
        if not clock.expired(self._now()):
            self._arm()
            return
        if clock.waiting:
            self._timed_out()
        elif self.idle:
            self.close()  # the keep-alive wait ran out (or a new connection never spoke)

    def _timed_out(self) -> None:
        """A request's head or body did not arrive in time: 408 and close (a connection
        relayed to aiohttp is closed: its handler may be answering an earlier request)."""
        if self._counters is not None:
            self._counters.request_timeouts += 1
        if self._relay is not None or not self._clock.heard:
            self.close()
            return
        waited = "head" if self._clock.phase is Phase.HEAD else "body"
        self._answer_early(
            NeutrinoError(
                ErrorKind.REQUEST_TIMEOUT, f"the request's {waited} did not arrive in time"
            )
        )

    def _answer_early(self, err: NeutrinoError, route: Route | None = None) -> None:
        """Answer (in order) without reading further, then close the connection (in the
        error form of ``route``, the fast route the request is for, when known)."""
        self._stopped = True
        self._clock.message_done()  # nothing more is awaited from the client
        if self.transport is not None:
            self.transport.pause_reading()
        self._queue.append((_fixed(err, route), H1Exchange(self, {}, True)))
        if self._task is None:
            self._next()

    def _bad_request(self, exc: Exception) -> None:
        cause = exc.__context__
        reason = str(cause) if isinstance(cause, _TooLong) else "malformed HTTP request"
        if self._relay is not None:
            # aiohttp's handler has answered what reached it; a broken stream just ends.
            self._stopped = True
            if self.transport is not None:
                self.transport.close()
            return
        self._answer_early(NeutrinoError(ErrorKind.BAD_REQUEST, reason))

    # ------------------------------------------------------------ relay to aiohttp

    def _start_relay(self) -> None:
        """Hand this request, and every later one, to aiohttp's handler."""
        if self._relay is None:
            assert self.transport is not None
            self._relay = relay = self._relay_factory()
            relay.connection_made(self.transport)
        p = self._parser
        assert p is not None
        self._chunked = b"chunked" in self._headers.get(b"transfer-encoding", b"").lower()
        self._forward(
            request_head(
                p.get_method(), self._url, self._raw_headers, version=p.get_http_version().encode()
            )
        )

    def _forward(self, data: bytes) -> None:
        if self._task is not None or self._queue:
            self._held.append(data)  # fast answers still due: keep the order
            return
        assert self._relay is not None
        self._relay.data_received(data)

    def _flush_held(self) -> None:
        held, self._held = self._held, []
        assert self._relay is not None
        for data in held:
            self._relay.data_received(data)

    def _upgrade(self, tail: bytes) -> None:
        """An Upgrade request went to aiohttp: what follows its head goes through as-is."""
        if self._relay is None:
            self._stopped = True
            if self.transport is not None:
                self.transport.close()
            return
        if tail:
            self._forward(tail)
        # Later bytes are not HTTP/1.1 any more: pass them straight to aiohttp.
        relay = self._relay
        assert relay is not None and self.transport is not None
        self.transport.set_protocol(relay)


class _TooLong(Exception):
    pass


def _fixed(err: NeutrinoError, route: Route | None = None) -> Route:
    # A route of an API whose errors have their own shape (Anthropic's) renders them: its
    # ``error_body`` (default: OpenAI's JSON error).
    render: Callable[[NeutrinoError], bytes] | None = getattr(route, "error_body", None)
    body = render(err) if render is not None else None

    async def answer(ex: H1Exchange) -> None:
        ex.fail(err, body)

    return answer


async def serve(
    host: str,
    port: int,
    routes: dict[bytes, Route],
    relay_factory: HandlerFactory,
    max_body_bytes: int,
    timeouts: Timeouts = _DEFAULT_TIMEOUTS,
    counters: Counters | None = None,
    admit_head: AdmitHead | None = None,
    reuse_port: bool = False,
    backlog: int = 511,
) -> tuple[asyncio.Server, set[H1Protocol]]:
    """Listen on ``host:port``; returns the server and its live connections.

    ``admit_head`` sees each fast route's request head first: an error it returns is the
    answer, before the body is read (an API key check). ``reuse_port``: the port is shared
    with the other workers of ``--workers`` (SO_REUSEPORT); ``backlog``: connections the
    kernel holds before they are accepted (capped by net.core.somaxconn)."""
    connections: set[H1Protocol] = set()

    def factory() -> H1Protocol:
        return H1Protocol(
            routes, relay_factory, max_body_bytes, timeouts, connections, counters, admit_head
        )

    server = await asyncio.get_running_loop().create_server(
        factory, host, port, reuse_address=True, reuse_port=reuse_port, backlog=backlog
    )
    # Accepted connections inherit the listener's keepalive (Linux): set once here, not
    # per connection (asking a uvloop transport for its socket costs ~25 µs, and a burst
    # of 2,048 accepts runs in one turn of the event loop).
    for sock in server.sockets:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    return server, connections


def close_idle(connections: set[H1Protocol]) -> None:
    for conn in list(connections):
        if conn.idle:
            conn.close()


def abort_all(connections: set[H1Protocol]) -> None:
    for conn in list(connections):
        conn.close()
