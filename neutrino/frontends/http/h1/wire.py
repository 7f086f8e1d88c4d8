"""HTTP/1.1 framing for the lean server (h1.py): response heads, the ``Date`` and
``Alt-Svc`` lines, whole error answers, body chunks, and a relayed request's head.

Pure byte formatting, no I/O.
"""

from __future__ import annotations

import email.utils
import http
import time

import orjson

from neutrino.errors import NeutrinoError
from neutrino.frontends.common import SSE_HEADERS
from neutrino.frontends.http.headers import error_headers
from neutrino.frontends.http.openai.render import SSE_OPEN
from neutrino.frontends.http.to_aiohttp import chunk

_SERVER = b"Server: neutrino\r\n"
_REASONS = {s.value: s.phrase.encode() for s in http.HTTPStatus}


class _Date:
    """The ``Date`` header line, formatted once a second."""

    __slots__ = ("_line", "_second")

    def __init__(self) -> None:
        self._second = -1
        self._line = b""

    def line(self) -> bytes:
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second = second
            self._line = b"Date: %s\r\n" % email.utils.formatdate(now, usegmt=True).encode()
        return self._line


_DATE = _Date()

# The Alt-Svc header that advertises HTTP/3 on every response ("": HTTP/3 is off).
_alt_svc = ""
_alt_svc_line = b""


def advertise_h3(value: str) -> None:
    """Set the Alt-Svc value of every HTTP/1.1 response (the QUIC listener, once bound)."""
    global _alt_svc, _alt_svc_line
    _alt_svc = value
    _alt_svc_line = b"Alt-Svc: %b\r\n" % value.encode() if value else b""


def alt_svc() -> str:
    """The Alt-Svc value advertised ("" when none)."""
    return _alt_svc


def response_head(status: int, headers: bytes, close: bool) -> bytes:
    """Status line and headers (``headers``: pre-rendered lines) up to the blank line."""
    return b"HTTP/1.1 %d %b\r\n%b%b%b%b%b\r\n" % (
        status,
        _REASONS.get(status, b"Unknown"),
        headers,
        _DATE.line(),
        _SERVER,
        _alt_svc_line,
        b"Connection: close\r\n" if close else b"",
    )


def json_head(status: int, length: int, close: bool, extra: bytes = b"") -> bytes:
    return response_head(
        status,
        b"Content-Type: application/json\r\nContent-Length: %d\r\n%b" % (length, extra),
        close,
    )


def error_reply(
    err: NeutrinoError, close: bool, extra: bytes = b"", body: bytes | None = None
) -> bytes:
    """A whole error response: ``body`` (default: OpenAI's JSON error) and the error's
    headers (headers.py)."""
    if body is None:
        body = orjson.dumps(err.openai_body())
    extra += b"".join(b"%s: %s\r\n" % (n.encode(), v.encode()) for n, v in error_headers(err))
    return json_head(err.http_status, len(body), close, extra) + body


# The header lines of an SSE answer (a chunked body).
SSE_HEAD = b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in SSE_HEADERS.items())
SSE_HEAD += b"Transfer-Encoding: chunked\r\n"
# A large non-streamed answer, written in pieces as it is rendered.
JSON_CHUNKED_HEAD = b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"


SSE_OPEN_CHUNK = chunk(SSE_OPEN)
