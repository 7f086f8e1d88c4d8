"""The one way into the aiohttp application, for both transports that relay to it.

Every route but the generation routes is aiohttp's. The lean HTTP/1.1 server hands a
connection's later requests to an aiohttp request handler on the real transport; the
HTTP/3 server gives each relayed request a handler on an in-memory transport
(``quic/relay.py``). Either way the handler comes from the same factory (the aiohttp
runner's ``web.Server``) and is fed the request as HTTP/1.1 bytes rebuilt here: its head
from the fields the transport parsed, its body re-chunked where it has no length.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

# aiohttp's request handler, made per relayed connection (HTTP/1.1) or stream (HTTP/3).
HandlerFactory = Callable[[], asyncio.Protocol]


def request_head(
    method: bytes,
    target: bytes,
    fields: Sequence[tuple[bytes, bytes]],
    *,
    version: bytes = b"1.1",
    extra: Sequence[bytes] = (),
) -> bytes:
    """A request's HTTP/1.1 head: its request line, ``fields`` as parsed, then the lines
    of ``extra`` (each ending in CRLF) that the relaying transport adds."""
    head = [b"%b %b HTTP/%b\r\n" % (method, target, version)]
    head += [b"%b: %b\r\n" % (n, v) for n, v in fields]
    head += extra
    head.append(b"\r\n")
    return b"".join(head)


def chunk(data: bytes) -> bytes:
    """``data`` as one chunk of a chunked body (the one place chunks are framed)."""
    return b"%x\r\n%b\r\n" % (len(data), data)
