"""One request of the lean HTTP/1.1 server (h1.py), as the generation routes see it.

:class:`H1Exchange` is the server's adapter of the routes'
:class:`~neutrino.frontends.http.exchange.Exchange` seam; :class:`H1Body` is a streamed
answer's body, written straight to the connection's transport.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.http.h1.wire import (
    JSON_CHUNKED_HEAD,
    SSE_HEAD,
    SSE_OPEN_CHUNK,
    error_reply,
    json_head,
    response_head,
)
from neutrino.frontends.http.headers import rate_headers
from neutrino.frontends.http.reset import reset
from neutrino.frontends.http.to_aiohttp import chunk
from neutrino.pipeline.quota import Rates


class Connection(Protocol):
    """What an exchange needs of its connection (h1.H1Protocol is one): to write bytes in
    order, and its transport while it is open."""

    transport: asyncio.Transport | None

    def write(self, data: bytes) -> None: ...


class H1Exchange:
    """One request served by :class:`~neutrino.frontends.http.h1.server.H1Protocol` (an
    ``Exchange`` of the routes)."""

    __slots__ = (
        "_conn", "body", "close", "ended", "headers", "rate_style", "rates", "request_id",
        "route", "streaming",
    )  # fmt: skip
    protocol = "http"

    def __init__(self, conn: Connection, headers: dict[bytes, bytes], close: bool) -> None:
        self._conn = conn
        self.headers = headers
        self.body = b""
        self.close = close  # the connection ends after this response
        self.streaming = False
        self.ended = False
        self.request_id = ""
        self.route = ""  # how a manifest route answered it (X-Neutrino-Route)
        self.rates: Rates | None = None
        self.rate_style = "openai"

    def _tag(self) -> bytes:
        rid = self.request_id
        tag = b"X-Request-Id: %b\r\n" % rid.encode() if rid else b""
        if self.route:
            tag += b"X-Neutrino-Route: %b\r\n" % self.route.encode("latin-1", "replace")
        if self.rates is not None:
            for name, value in rate_headers(self.rates.state, self.rate_style):
                tag += b"%b: %b\r\n" % (name.encode(), value.encode())
        return tag

    def header(self, name: str) -> str:
        value = self.headers.get(name.lower().encode())
        return "" if value is None else value.decode("latin-1")

    async def read(self, max_bytes: int) -> bytes:
        """The body, handed over: the exchange keeps no reference to it."""
        body, self.body = self.body, b""
        if len(body) > max_bytes:
            raise NeutrinoError(
                ErrorKind.PAYLOAD_TOO_LARGE, f"the request body exceeds {max_bytes} bytes"
            )
        return body

    def reply(self, status: int, body: bytes) -> None:
        self._conn.write(json_head(status, len(body), self.close, self._tag()) + body)

    def fail(self, err: NeutrinoError, body: bytes | None = None) -> None:
        self._conn.write(error_reply(err, self.close, self._tag(), body))

    async def open_stream(self, json: bool = False) -> H1Body:
        self.streaming = True
        if json:
            self._conn.write(response_head(200, JSON_CHUNKED_HEAD + self._tag(), self.close))
        else:
            head = response_head(200, SSE_HEAD + self._tag(), self.close)
            self._conn.write(head + SSE_OPEN_CHUNK)
        return H1Body(self)

    def end_body(self) -> None:
        if not self.ended:
            self.ended = True
            self._conn.write(b"0\r\n\r\n")

    @property
    def transport(self) -> asyncio.Transport | None:
        return self._conn.transport


class H1Body:
    """A streamed body in chunked encoding, written straight to the connection's
    transport (the per-token path: one write per batch of engine frames)."""

    __slots__ = ("_ex", "_transport", "on_lost")

    def __init__(self, ex: H1Exchange) -> None:
        self._ex = ex
        self._transport = ex.transport
        self.on_lost: Callable[[str], None] | None = None

    def write(self, data: bytes) -> int:
        t = self._transport
        if t is None or t.is_closing():
            return -1
        if data and not self._ex.ended:  # nothing may follow the body's last chunk
            t.write(chunk(data))
        return t.get_write_buffer_size()

    def pending(self) -> int:
        t = self._transport
        return t.get_write_buffer_size() if t is not None else 0

    def reset(self) -> None:
        if self._transport is not None:
            reset(self._transport)

    async def end(self) -> None:
        self._ex.end_body()

    def close(self) -> None:
        pass  # nothing runs beside the connection's own writes
