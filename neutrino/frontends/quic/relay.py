"""Every route but the generation routes: relayed to the aiohttp application.

Each relayed HTTP/3 request gets an aiohttp request handler (``web.Server``'s, as the
lean HTTP/1.1 server relays its own: ``frontends/http/to_aiohttp.py``) on an in-memory
transport: the request goes in as HTTP/1.1 bytes (``Connection: close``: one request per
handler), and what the handler
writes is parsed incrementally (httptools) into HTTP/3 HEADERS and DATA, so a streamed
response streams. The handler's writes pause while the stream holds more than
``HIGH_WATER`` bytes the client has not taken, and resume below ``LOW_WATER``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

import httptools

from neutrino.frontends.http.to_aiohttp import request_head
from neutrino.frontends.quic.head import RequestHead

HIGH_WATER = 256 * 1024
LOW_WATER = 64 * 1024

# Request fields that describe the HTTP/3 exchange, not the request: rewritten or dropped.
_DROPPED = frozenset({b"host", b"connection", b"transfer-encoding", b"expect", b"te"})


def request_bytes(head: RequestHead, chunked: bool) -> bytes:
    """The request's HTTP/1.1 head (its body follows: chunked when ``chunked``)."""
    host = head.authority.encode("latin-1") or b"localhost"
    fields = [(b"Host", host), *((n, v) for n, v in head.fields if n.lower() not in _DROPPED)]
    extra = [b"Transfer-Encoding: chunked\r\n"] if chunked else []
    extra.append(b"Connection: close\r\n")
    return request_head(head.method.encode(), head.path.encode("latin-1"), fields, extra=extra)


class Sink(Protocol):
    """Where a relayed response goes: the HTTP/3 stream."""

    def head(self, status: int, headers: list[tuple[str, str]]) -> None: ...

    def data(self, data: bytes) -> None: ...

    def end(self) -> None: ...


class ResponseReader:
    """An HTTP/1.1 response, parsed as it is written, told to a :class:`Sink`
    (informational 1xx responses are skipped; after a HEAD request, the head ends it)."""

    def __init__(self, sink: Sink, head_only: bool = False) -> None:
        self._sink = sink
        self._head_only = head_only
        self._parser: Any = httptools.HttpResponseParser(self)
        self._headers: list[tuple[str, str]] = []
        self._until_close = False  # the body has no length: the connection's close ends it
        self.started = False  # the head went out
        self.done = False

    def feed(self, data: bytes) -> None:
        if not self.done:
            self._parser.feed_data(data)

    def finish(self) -> bool:
        """The handler closed its connection: True if the response is whole (ended by
        its length or last chunk, or a body that only the close ends: ended now)."""
        if not self.done and self.started and self._until_close:
            self._end()
        return self.done

    # httptools callbacks

    def on_message_begin(self) -> None:
        self._headers = []

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:
            return
        self.started = True
        names = {name.lower() for name, _ in self._headers}
        bodiless = status in (204, 304)
        self._until_close = not ({"content-length", "transfer-encoding"} & names or bodiless)
        if self._head_only:  # no body follows (some clients hold a length to its word)
            self._sink.head(status, [h for h in self._headers if h[0].lower() != "content-length"])
            self._end()
        else:
            self._sink.head(status, self._headers)

    def on_body(self, body: bytes) -> None:
        if self.started and not self.done:
            self._sink.data(body)

    def on_message_complete(self) -> None:
        if self.started:
            self._end()

    def _end(self) -> None:
        if not self.done:
            self.done = True
            self._sink.end()


class RelayTransport(asyncio.Transport):
    """The in-memory transport between one aiohttp request handler and an HTTP/3 stream.

    When a write pauses the handler, ``on_pause`` tells the connection, which then calls
    :meth:`maybe_resume` as the client's acknowledgements and flow control free room."""

    def __init__(
        self,
        reader: ResponseReader,
        pending: Callable[[], int],
        on_close: Callable[[bool], None],
        peer: Any,
        on_pause: Callable[[RelayTransport], None],
    ) -> None:
        super().__init__()
        self._reader = reader
        self._pending = pending
        self._on_close = on_close
        self._on_pause = on_pause
        self._peer = peer
        self._closing = False
        self.handler: asyncio.Protocol | None = None
        self.writing_paused = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return self._peer
        return default

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        self._reader.feed(bytes(data))
        if not self.writing_paused and self._pending() > HIGH_WATER and self.handler:
            self.writing_paused = True
            self.handler.pause_writing()
            self._on_pause(self)

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def maybe_resume(self) -> None:
        """Called as the client takes data: let the handler write again below the mark."""
        if self.writing_paused and self._pending() < LOW_WATER and self.handler is not None:
            self.writing_paused = False
            self.handler.resume_writing()

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """The handler is done (or gives up): ``on_close`` hears whether the response is
        whole (the stream ends) or was cut short (the stream is reset); the handler is
        told."""
        if self._closing:
            return
        self._closing = True
        self._on_close(self._reader.finish())
        handler = self.handler
        if handler is not None:
            asyncio.get_running_loop().call_soon(handler.connection_lost, None)

    def abort(self) -> None:
        self.close()

    def lost(self) -> None:
        """The client went away: the handler is told at once (its task is cancelled)."""
        if self._closing:
            return
        self._closing = True
        handler = self.handler
        if handler is not None:
            handler.connection_lost(ConnectionResetError("the client reset the stream"))

    def can_write_eof(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return self._pending()

    def pause_reading(self) -> None:
        pass  # the body is bounded by the server's body limit; aiohttp buffers it

    def resume_reading(self) -> None:
        pass

    def is_reading(self) -> bool:
        return not self._closing
