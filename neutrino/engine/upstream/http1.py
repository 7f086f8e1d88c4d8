"""A lean HTTP/1.1 client for HTTP upstreams: pooled keep-alive connections on asyncio
protocols, responses parsed by ``httptools`` (llhttp).

An upstream request is one write (head and body) on a pooled connection and a response
read as it comes: its head, then its body's bytes (de-chunked) handed to one reader, with
reading paused while more than ``HIGH_WATER`` bytes wait to be read. aiohttp's client did
the same with a request object, a response object, a header multidict, a stream reader and
timers per request, which cost more than the rest of a relayed request's work; what is
left here is what a relay needs:

- at most ``limit`` connections, idle ones reused most recent first and closed after
  ``keepalive_s``; a request that finds every connection busy waits for one;
- a response read to its end with keep-alive returns its connection to the pool; one
  closed before (a client that left, a cancelled request) closes it, which the server
  sees and stops generating;
- a request on a reused connection that the server had closed (nothing came back) is
  sent once more on a new one: a server's idle timeout, not a failure;
- a broken connection or a malformed answer is ``UpstreamHTTPError`` (an ``OSError``);
  a connection not made within ``connect_timeout`` is ``TimeoutError``; ``https`` URLs
  use the system's certificate authorities.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import urllib.parse
from collections import deque
from collections.abc import AsyncIterator, Callable

import httptools

HIGH_WATER = 256 * 1024  # body bytes waiting to be read before reading pauses
MAX_HEADERS = 128
MAX_HEADER_BYTES = 64 * 1024


class UpstreamHTTPError(ConnectionError):
    """The connection broke, or the upstream's answer was not HTTP/1.1."""


class Response:
    """One response: ``status`` and ``headers`` (lower-case names) at once, the body read
    once (``chunks`` or ``read``); ``close`` releases it (and must be called)."""

    __slots__ = (
        "_buf", "_conn", "_eof", "_error", "_paused", "_size", "_waiter", "_whole", "headers",
        "status",
    )  # fmt: skip

    def __init__(self, conn: _Conn, status: int, headers: dict[str, str]) -> None:
        self._conn: _Conn | None = conn
        self.status = status
        self.headers = headers
        self._buf: list[bytes] = []
        self._size = 0
        self._eof = False
        self._error: UpstreamHTTPError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._whole = False

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "application/json")

    @property
    def complete(self) -> bool:
        """The whole body has arrived."""
        return self._eof

    async def chunks(
        self,
        broken: Callable[[], Exception] | None = None,
        idle_s: float | None = None,
        first_s: float | None = None,
    ) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (what arrived together, joined);
        UpstreamHTTPError (or what ``broken`` makes) when the connection breaks before
        its end; TimeoutError when its first bytes take longer than ``first_s``, or
        nothing more arrives for ``idle_s``."""
        wait = first_s
        while True:
            buf = self._buf
            if buf:
                data = buf[0] if len(buf) == 1 else b"".join(buf)
                buf.clear()
                self._taken()
                wait = idle_s
                yield data
            elif self._eof:
                return
            elif self._error is not None:
                if broken is not None:
                    raise broken() from None
                raise self._error
            else:
                await self._wait(wait)

    async def read(self, limit: int, idle_s: float | None = None) -> bytes:
        """The body, whole, or its first bytes past ``limit`` (the caller checks);
        TimeoutError when nothing arrives for ``idle_s``."""
        self._whole = True  # read whole: reading does not pause
        self._resume()
        while not self._eof and self._size <= limit:
            if self._error is not None:
                raise self._error
            await self._wait(idle_s)
        data = b"".join(self._buf)
        self._buf.clear()
        self._taken()
        return data

    def close(self) -> None:
        """Release it; a reader still waiting for its body is woken with an error."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.done(self._eof and self._error is None)
        if not self._eof and self._error is None:
            self._end(UpstreamHTTPError("the response was closed"))

    async def _wait(self, timeout: float | None = None) -> None:
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            if timeout is None:
                await waiter
            else:
                async with asyncio.timeout(timeout):
                    await waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _arrived(self) -> None:
        """Bytes were added to the buffer (by one read): wake the reader, and pause
        reading while it is behind."""
        if self._size > HIGH_WATER and not self._paused and not self._whole and self._conn:
            self._paused = True
            self._conn.pause()
        self._wake()

    def _taken(self) -> None:
        self._size = 0
        self._resume()

    def _resume(self) -> None:
        if self._paused:
            self._paused = False
            if self._conn is not None:
                self._conn.resume()

    def _end(self, error: UpstreamHTTPError | None) -> None:
        if error is None:
            self._eof = True
        elif not self._eof:
            self._error = error
        self._wake()


class _Conn(asyncio.Protocol):
    """One keep-alive connection; it carries one request at a time."""

    def __init__(self, pool: HTTP1Pool) -> None:
        self._pool = pool
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.alive = True
        self.counted = True  # counts against the pool's limit until dropped
        self.idle_since = 0.0
        self.keep_alive = False
        self.received = False  # a byte of the current response has arrived
        self._head: asyncio.Future[Response] | None = None
        self._resp: Response | None = None
        self._headers: dict[str, str] = {}
        self._header_bytes = 0
        self._delimited = False  # the body has a length or chunks (not: until close)

    # asyncio side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._broken(UpstreamHTTPError(f"the upstream's answer is not HTTP/1.1: {exc}"))
            if self.transport is not None:
                self.transport.close()
            return
        if self._resp is not None:
            self._resp._arrived()

    def connection_lost(self, exc: Exception | None) -> None:
        self.alive = False
        resp = self._resp
        if resp is not None and exc is None and not self._delimited:
            resp._end(None)  # a body that ends where the connection does
            return
        self._broken(UpstreamHTTPError("the upstream closed the connection"))

    def _broken(self, error: UpstreamHTTPError) -> None:
        self.alive = False
        head = self._head
        if head is not None and not head.done():
            head.set_exception(error)
        if self._resp is not None:
            self._resp._end(error)

    def pause(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.transport is not None and self.alive:
            self.transport.resume_reading()

    # httptools' callbacks

    def on_message_begin(self) -> None:
        self._headers = {}
        self._header_bytes = 0

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value)
        if len(self._headers) >= MAX_HEADERS or self._header_bytes > MAX_HEADER_BYTES:
            raise httptools.HttpParserError("too many or too long headers")
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        headers = self._headers
        self._delimited = "content-length" in headers or "chunked" in headers.get(
            "transfer-encoding", ""
        )
        resp = self._resp = Response(self, self._parser.get_status_code(), headers)
        head = self._head
        if head is not None and not head.done():
            head.set_result(resp)

    def on_body(self, body: bytes) -> None:
        resp = self._resp
        if resp is not None:  # (one call per chunk of a chunked body: kept short)
            resp._buf.append(body)
            resp._size += len(body)

    def on_message_complete(self) -> None:
        self.keep_alive = self._parser.should_keep_alive()
        if self._resp is not None:
            self._resp._end(None)

    # the pool's side

    async def send(self, data: bytes) -> Response:
        """Write a request; its response once its head has arrived."""
        assert self.transport is not None
        self.received = False
        self._resp = None
        head: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._head = head
        self.transport.write(data)
        try:
            return await head
        finally:
            self._head = None

    def done(self, reusable: bool) -> None:
        """The response was closed: keep the connection if it may carry another."""
        self._resp = None
        if reusable and self.keep_alive and self.alive:
            self._pool.release(self)
        else:
            self._pool.drop(self)


class HTTP1Pool:
    """Pooled HTTP/1.1 connections to one ``scheme://host:port``."""

    def __init__(
        self,
        url: str,
        *,
        limit: int,
        connect_timeout: float,
        headers: dict[str, str],
        keepalive_s: float = 30.0,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self.limit = max(1, limit)
        self.connect_timeout = connect_timeout
        self.keepalive_s = keepalive_s
        host = parts.netloc.rsplit("@", 1)[-1]
        fixed = {"Host": host, **headers}
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in fixed.items()).encode("latin-1")
        self._idle: list[_Conn] = []
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed = False

    @property
    def open_connections(self) -> int:
        return self._open

    async def request(
        self, method: str, target: str, body: bytes = b"", traceparent: str = ""
    ) -> Response:
        """Send a request (``target``: the path and query); its response, head read."""
        head = f"{method} {target} HTTP/1.1\r\n".encode("latin-1") + self._fixed
        if traceparent and traceparent.isprintable():
            head += b"traceparent: " + traceparent.encode("latin-1") + b"\r\n"
        data = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
        conn, reused = await self._acquire()
        try:
            return await conn.send(data)
        except UpstreamHTTPError:
            self.drop(conn)
            if not reused or conn.received:
                raise
        except BaseException:
            self.drop(conn)
            raise
        for idle in self._idle:  # the server closed its idle connections: try none of them
            self.drop(idle)
        self._idle.clear()
        conn, _ = await self._acquire()
        try:
            return await conn.send(data)
        except BaseException:
            self.drop(conn)
            raise

    async def close(self) -> None:
        self._closed = True
        for conn in self._idle:
            self.drop(conn)
        self._idle.clear()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(UpstreamHTTPError("the client is closed"))

    async def _acquire(self) -> tuple[_Conn, bool]:
        while True:
            if self._closed:
                raise UpstreamHTTPError("the client is closed")
            idle = self._idle
            now = time.monotonic()
            while idle:
                conn = idle.pop()
                if conn.alive and now - conn.idle_since < self.keepalive_s:
                    return conn, True
                self.drop(conn)
            if self._open < self.limit:
                self._open += 1
                return await self._connect(), False
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        conn = _Conn(self)
        try:
            async with asyncio.timeout(self.connect_timeout):
                await loop.create_connection(
                    lambda: conn,
                    self.host,
                    self.port,
                    ssl=self._ssl,
                    server_hostname=self.host if self._ssl is not None else None,
                )
        except BaseException:
            self._open -= 1
            conn.counted = False
            self._wake_one()
            raise
        return conn

    def release(self, conn: _Conn) -> None:
        if self._closed:
            self.drop(conn)
            return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)
        self._wake_one()

    def drop(self, conn: _Conn) -> None:
        conn.alive = False
        if conn.transport is not None:
            conn.transport.close()
        if conn.counted:
            conn.counted = False
            self._open -= 1
            self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
