"""Request and response heads of HTTP/3, and the bounds of a request (sans-IO).

aioquic has already decoded (QPACK) and validated the header section's form (pseudo
headers first, lower-case names); this reads what a route needs from it and bounds its
size as the HTTP/1.1 server bounds its own (``MAX_LINE`` per field, ``MAX_HEADERS``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from neutrino.errors import ErrorKind, NeutrinoError

MAX_FIELD = 8190  # name + value of one field, as HTTP/1.1's line limit
MAX_HEADERS = 128
MAX_HEAD_BYTES = 64 * 1024  # a request's HEADERS frame as received (QPACK-encoded)
MAX_STREAMS = 100  # concurrent requests per connection (QUIC MAX_STREAMS)

Fields = list[tuple[bytes, bytes]]

# Connection-specific fields: not allowed in HTTP/3 (RFC 9114 section 4.2).
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te"}
)


@dataclass(slots=True)
class RequestHead:
    method: str
    path: str  # with its query string
    authority: str
    headers: dict[str, str]  # lower-case names; repeated fields joined with ", "
    fields: Fields  # the regular fields, in order (for the relay)

    @property
    def route_path(self) -> bytes:
        """The path without its query string."""
        return self.path.partition("?")[0].encode("latin-1")

    def content_length(self) -> int | None:
        value = self.headers.get("content-length")
        return int(value) if value is not None and value.isdigit() else None


def _bad(reason: str) -> NeutrinoError:
    return NeutrinoError(ErrorKind.BAD_REQUEST, reason)


def parse_head(raw: Fields) -> RequestHead:
    """The request head of a HEADERS frame (NeutrinoError 400 when it cannot be served)."""
    if len(raw) > MAX_HEADERS + 4:
        raise _bad("too many request headers")
    pseudo: dict[bytes, bytes] = {}
    headers: dict[str, str] = {}
    fields: Fields = []
    for name, value in raw:
        if len(name) + len(value) > MAX_FIELD:
            raise _bad("a request header is too long")
        if name.startswith(b":"):
            pseudo[name] = value
            continue
        fields.append((name, value))
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        old = headers.get(key)
        headers[key] = text if old is None else f"{old}, {text}"
    method = pseudo.get(b":method", b"").decode("latin-1")
    path = pseudo.get(b":path", b"").decode("latin-1")
    if method == "CONNECT" or not method:
        raise NeutrinoError(ErrorKind.METHOD_NOT_ALLOWED, f"method {method or '?'} is not served")
    if not path.startswith("/"):
        raise _bad("the request's :path must be an absolute path")
    authority = pseudo.get(b":authority", b"").decode("latin-1") or headers.get("host", "")
    return RequestHead(method, path, authority, headers, fields)


def response_fields(status: int, headers: Iterable[tuple[str, str]]) -> Fields:
    """A response's HEADERS: ``:status`` and the fields (lower-case, without the
    connection-specific ones)."""
    out: Fields = [(b":status", str(status).encode())]
    for name, value in headers:
        key = name.lower()
        if key not in _HOP_BY_HOP:
            out.append((key.encode("latin-1"), value.encode("latin-1")))
    return out


def alt_svc(port: int) -> str:
    """The Alt-Svc value that advertises HTTP/3 on ``port`` (same host) for a day."""
    return f'h3=":{port}"; ma=86400'


class BodyLimit:
    """A request body's size against its limit (the declared length counts first)."""

    __slots__ = ("limit", "received")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.received = 0

    def declared_over(self, head: RequestHead) -> bool:
        length = head.content_length()
        return length is not None and length > self.limit

    def add(self, n: int) -> bool:
        """Count ``n`` more bytes; True once the body is over the limit."""
        self.received += n
        return self.received > self.limit

    def error(self) -> NeutrinoError:
        return NeutrinoError(
            ErrorKind.PAYLOAD_TOO_LARGE, f"the request body exceeds {self.limit} bytes"
        )
