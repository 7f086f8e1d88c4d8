"""The generation routes' :class:`~neutrino.frontends.http.exchange.Exchange` on an
HTTP/3 request stream, and its streamed body (SSE events as DATA frames)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

import orjson

from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.common import SSE_HEADERS
from neutrino.frontends.http.headers import error_headers, rate_headers
from neutrino.frontends.http.openai.render import SSE_OPEN
from neutrino.frontends.quic.head import Fields, RequestHead, response_fields
from neutrino.pipeline.quota import Rates
from neutrino.running import running_loop

_JSON = ("content-type", "application/json")
_SSE = list(SSE_HEADERS.items())


class Stream(Protocol):
    """One request stream of the connection, as its exchange writes to it."""

    def send_head(self, fields: Fields, end: bool = False) -> None: ...

    def send_data(self, data: bytes, end: bool = False) -> bool:
        """False when the client can take nothing more (it reset or stopped the stream)."""
        ...

    def pending(self) -> int:
        """Bytes written that the client has not taken (unsent, unacknowledged)."""
        ...

    def reset(self) -> None: ...


class H3Exchange:
    """One HTTP/3 request served by a generation route."""

    __slots__ = (
        "_body", "_error", "_stream", "answered", "head", "rate_style", "rates", "request_id",
        "route", "streaming",
    )  # fmt: skip
    protocol = "quic"

    def __init__(self, stream: Stream, head: RequestHead) -> None:
        self._stream = stream
        self.head = head
        self.request_id = ""
        self.route = ""
        self.rates: Rates | None = None
        self.rate_style = "openai"
        self._body: asyncio.Future[bytes] = running_loop().create_future()
        self._error: NeutrinoError | None = None
        self.answered = False  # a response head went out
        self.streaming = False

    # -- fed by the connection

    def body_done(self, body: bytes) -> None:
        if not self._body.done():
            self._body.set_result(body)

    def body_failed(self, err: NeutrinoError) -> None:
        """The body cannot be read (over the limit, too slow): ``read`` raises ``err``."""
        self._error = err
        if not self._body.done():
            self._body.set_result(b"")

    # -- the Exchange seam

    def header(self, name: str) -> str:
        return self.head.headers.get(name.lower(), "")

    async def read(self, max_bytes: int) -> bytes:
        length = self.head.content_length()
        if length is not None and length > max_bytes:
            raise _too_large(max_bytes)
        body = await self._body
        if self._error is not None:
            raise self._error
        if len(body) > max_bytes:
            raise _too_large(max_bytes)
        return body

    def _fields(self, status: int, extra: list[tuple[str, str]]) -> Fields:
        if self.request_id:
            extra.append(("x-request-id", self.request_id))
        if self.route:
            extra.append(("x-neutrino-route", self.route))
        if self.rates is not None:
            extra += rate_headers(self.rates.state, self.rate_style)
        return response_fields(status, extra)

    def reply(self, status: int, body: bytes) -> None:
        self.answered = True
        self._stream.send_head(self._fields(status, [_JSON, ("content-length", str(len(body)))]))
        self._stream.send_data(body, end=True)

    def fail(self, err: NeutrinoError, body: bytes | None = None) -> None:
        if body is None:
            body = orjson.dumps(err.openai_body())
        extra = [_JSON, ("content-length", str(len(body))), *error_headers(err)]
        self.answered = True
        self._stream.send_head(self._fields(err.http_status, extra))
        self._stream.send_data(body, end=True)

    async def open_stream(self, json: bool = False) -> H3Body:
        self.answered = self.streaming = True
        self._stream.send_head(self._fields(200, [_JSON] if json else list(_SSE)))
        body = H3Body(self._stream)
        if not json:
            body.write(SSE_OPEN)
        return body


def _too_large(limit: int) -> NeutrinoError:
    return NeutrinoError(ErrorKind.PAYLOAD_TOO_LARGE, f"the request body exceeds {limit} bytes")


class H3Body:
    """A streamed body: each piece one DATA frame, handed to QUIC at once (the
    connection transmits once per loop iteration). ``write`` returns the stream's bytes
    the client has not taken (QUIC's send buffer: unsent, blocked by flow control, or
    unacknowledged), which SSEStream holds to its per-stream limit."""

    __slots__ = ("_stream", "ended", "gone", "on_lost")

    def __init__(self, stream: Stream) -> None:
        self._stream = stream
        self.on_lost: Callable[[str], None] | None = None
        self.ended = False
        self.gone = False

    def write(self, data: bytes) -> int:
        if self.gone or self.ended:
            return -1
        if not self._stream.send_data(data):
            self.gone = True
            return -1
        return self._stream.pending()

    def pending(self) -> int:
        return self._stream.pending()

    def reset(self) -> None:
        self.gone = True
        self._stream.reset()

    async def end(self) -> None:
        if not self.ended and not self.gone:
            self.ended = True
            self._stream.send_data(b"", end=True)

    def close(self) -> None:
        pass  # nothing runs beside the connection's own transmissions
