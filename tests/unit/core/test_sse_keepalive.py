"""Push-mode SSE keepalives: one timer per response, over a real socket."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.http.sse import SSEStream


class TransportBody:
    """A body written straight to a socket's transport, as H1Body writes (unframed)."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.on_lost: Callable[[str], None] | None = None

    def write(self, data: bytes) -> int:
        if self.transport.is_closing():
            return -1
        self.transport.write(data)
        return self.transport.get_write_buffer_size()

    def pending(self) -> int:
        return self.transport.get_write_buffer_size()

    def reset(self) -> None:
        self.transport.abort()

    async def end(self) -> None:
        pass

    def close(self) -> None:
        pass


async def _stream_pair(
    choices: int,
) -> tuple[SSEStream, asyncio.StreamReader, asyncio.StreamWriter]:
    ours, theirs = socket.socketpair()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
    reader, writer = await asyncio.open_connection(sock=theirs)  # kept: dropping it closes
    assert isinstance(transport, asyncio.Transport)
    return SSEStream(TransportBody(transport), choices, 1 << 20), reader, writer


async def _received(reader: asyncio.StreamReader, quiet: float = 0.05) -> bytes:
    """What arrives until the socket has been quiet for ``quiet`` seconds."""
    got = b""
    while True:
        try:
            data = await asyncio.wait_for(reader.read(1 << 16), quiet)
        except TimeoutError:
            return got
        if not data:
            return got
        got += data


async def test_keepalives_only_in_quiet_intervals_until_the_stream_ends() -> None:
    stream, reader, writer = await _stream_pair(choices=2)
    stream.keep_alive(0.3)
    for _ in range(20):  # output more often than the interval: no comment
        stream.write(b"data: x\n\n")
        await asyncio.sleep(0.02)
    assert b"keepalive" not in await _received(reader, quiet=0.01)
    await asyncio.sleep(0.8)  # quiet, whichever choice is still running
    quiet = await _received(reader)
    assert quiet.count(b": keepalive") >= 2
    stream.fail(NeutrinoError(ErrorKind.TIMEOUT, "too slow"))
    ended = await _received(reader)
    assert b"data: [DONE]" in ended
    await asyncio.sleep(0.8)
    assert await _received(reader) == b""  # the timer stopped with the stream
    assert stream.done.done()
    writer.close()
