"""A small asyncio HTTP/3 client over aioquic, for tests, the parity suite and test_client.

One :class:`H3Client` is one QUIC connection; requests on it run concurrently, each on
its own bidirectional stream::

    async with H3Client("127.0.0.1", 51056) as client:
        resp = await client.request("POST", "/v1/chat/completions", headers, body)
        async for chunk in resp.chunks():
            ...

``verify=False`` (the default) accepts any server certificate, as a local self-signed
one needs; ``verify=True`` checks it against the system's trust store.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, ErrorCode, H3Connection
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import NetworkAddress
from aioquic.quic.events import ConnectionTerminated, QuicEvent, StreamReset

__all__ = ["H3Client", "H3Error", "H3Response"]

_END = object()


class H3Error(ConnectionError):
    """The stream or connection ended before the response did."""


class H3Response:
    """One request's response: status and headers once they arrived, then the body."""

    def __init__(self, client: H3Client, stream_id: int) -> None:
        self._client = client
        self.stream_id = stream_id
        self.status = 0
        self.headers: dict[str, str] = {}
        self._head: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._chunks: asyncio.Queue[Any] = asyncio.Queue()
        self.ended = False  # the body ended (end of stream or reset)
        self.error: H3Error | None = None

    # -- fed by the client's protocol

    def _on_headers(self, headers: list[tuple[bytes, bytes]]) -> None:
        if self._head.done():
            return  # trailers: nothing uses them
        for name, value in headers:
            key = name.decode("latin-1").lower()
            if key == ":status":
                self.status = int(value)
            elif not key.startswith(":"):
                old = self.headers.get(key)
                text = value.decode("latin-1")
                self.headers[key] = text if old is None else f"{old}, {text}"
        self._head.set_result(None)

    def _on_data(self, data: bytes) -> None:
        if data:
            self._chunks.put_nowait(data)

    def _on_end(self, error: H3Error | None = None) -> None:
        if self.ended:
            return
        self.ended = True
        self.error = error
        if not self._head.done():
            self._head.set_exception(error or H3Error("the stream ended without a response"))
        self._chunks.put_nowait(_END)

    # -- the caller's side

    async def _wait_head(self) -> None:
        await self._head

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's DATA as it arrives; H3Error if the stream was reset first."""
        while True:
            item = await self._chunks.get()
            if item is _END:
                self._chunks.put_nowait(_END)  # a second reader also ends
                if self.error is not None:
                    raise self.error
                return
            yield item

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([c async for c in self.chunks()])

    def reset(self) -> None:
        """Abandon the request: reset our side of the stream and ask the server to stop
        sending (H3_REQUEST_CANCELLED both ways)."""
        self._client._reset(self.stream_id)
        self._on_end(H3Error("the request was cancelled"))


class _Protocol(QuicConnectionProtocol):
    """The QUIC connection: routes HTTP/3 events to their responses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.responses: dict[int, H3Response] = {}
        self.receiving = True

    async def wait_connected(self) -> None:
        """aioquic's, except that a wait given up (a connect timeout) leaves no future
        whose ConnectionError nobody retrieves once the connection closes."""
        try:
            await super().wait_connected()
        except asyncio.CancelledError:
            waiter = self._connected_waiter
            if waiter is not None:
                waiter.add_done_callback(_retrieve)
            raise

    def datagram_received(self, data: bytes | str, addr: NetworkAddress) -> None:
        if self.receiving:
            super().datagram_received(data, addr)

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, StreamReset):
            resp = self.responses.pop(event.stream_id, None)
            if resp is not None:
                resp._on_end(H3Error(f"the server reset the stream ({event.error_code:#x})"))
        elif isinstance(event, ConnectionTerminated):
            why = H3Error(f"the connection closed: {event.reason_phrase or event.error_code}")
            for resp in self.responses.values():
                resp._on_end(why)
            self.responses.clear()
        for h3_event in self.h3.handle_event(event):
            self._h3_event(h3_event)

    def _h3_event(self, event: H3Event) -> None:
        if not isinstance(event, HeadersReceived | DataReceived):
            return
        resp = self.responses.get(event.stream_id)
        if resp is None:
            return
        if isinstance(event, HeadersReceived):
            resp._on_headers(event.headers)
        else:
            resp._on_data(event.data)
        if event.stream_ended:
            self.responses.pop(event.stream_id, None)
            resp._on_end()


def _retrieve(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


class H3Client:
    """An HTTP/3 connection to ``host:port`` (see the module docstring)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        verify: bool = False,
        server_name: str | None = None,
        idle_timeout_s: float = 60.0,
    ) -> None:
        self.host = host
        self.port = port
        self._config = QuicConfiguration(
            is_client=True,
            alpn_protocols=list(H3_ALPN),
            verify_mode=ssl.CERT_REQUIRED if verify else ssl.CERT_NONE,
            server_name=server_name or host,
            idle_timeout=idle_timeout_s,
        )
        if verify:
            self._config.load_verify_locations(cafile=ssl.get_default_verify_paths().cafile)
        self._stack: contextlib.AsyncExitStack | None = None
        self._proto: _Protocol | None = None
        self.authority = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"

    async def __aenter__(self) -> H3Client:
        stack = contextlib.AsyncExitStack()
        try:
            proto = await stack.enter_async_context(
                connect(self.host, self.port, configuration=self._config, create_protocol=_Protocol)
            )
        except BaseException:
            await stack.aclose()
            raise
        assert isinstance(proto, _Protocol)
        self._stack, self._proto = stack, proto
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _protocol(self) -> _Protocol:
        if self._proto is None:
            raise H3Error("the client is not connected")
        return self._proto

    async def request(
        self,
        method: str,
        path: str,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> H3Response:
        """Send a request; returns once the response's headers arrived."""
        proto = self._protocol()
        if proto._closed.is_set():
            raise H3Error("the connection is closed")
        quic = proto._quic
        stream_id = quic.get_next_available_stream_id()
        fields = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", self.authority.encode()),
            (b":path", path.encode()),
        ]
        for name, value in (headers or {}).items():
            fields.append((name.lower().encode(), value.encode()))
        if body and not any(n == b"content-length" for n, _ in fields):
            fields.append((b"content-length", str(len(body)).encode()))
        resp = H3Response(self, stream_id)
        proto.responses[stream_id] = resp
        proto.h3.send_headers(stream_id, fields, end_stream=not body)
        if body:
            proto.h3.send_data(stream_id, body, end_stream=True)
        proto.transmit()
        try:
            await resp._wait_head()
        except BaseException:
            if not resp.ended:
                resp.reset()
            raise
        return resp

    def _reset(self, stream_id: int) -> None:
        proto = self._proto
        if proto is None or proto.responses.pop(stream_id, None) is None:
            return
        code = ErrorCode.H3_REQUEST_CANCELLED
        with contextlib.suppress(Exception):  # the stream may be gone already
            proto._quic.stop_stream(stream_id, code)
        with contextlib.suppress(Exception):
            proto._quic.reset_stream(stream_id, code)
        proto.transmit()

    def stop_receiving(self) -> None:
        """Drop every datagram from now on: a client that stopped reading (nothing it
        receives is acknowledged, so the server's unsent and unacknowledged data piles
        up). For tests of the server's per-stream buffer limit and its back-pressure."""
        self._protocol().receiving = False

    def resume_receiving(self) -> None:
        """Take datagrams again after :meth:`stop_receiving` (the server retransmits what
        was dropped)."""
        self._protocol().receiving = True

    def close(self) -> None:
        """Close the connection (every open request ends with H3Error)."""
        if self._proto is not None:
            self._proto.close()

    async def aclose(self) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            self.close()
            await stack.aclose()
        self._proto = None
