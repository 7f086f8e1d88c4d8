"""Third baseline for `make bench`: the least a two-hop Python relay can cost.

A raw uvloop protocol takes each HTTP/1.1 request (framing only: the header's end
and Content-Length; no JSON), sends its body as one length-prefixed frame over a
UNIX socket to a backend process, and answers with the backend's canned reply.
Like Neutrino it has an engine in another process, so the server sleeps and wakes
twice per request when requests come one at a time; unlike Neutrino it parses,
templates and tokenizes nothing. Its CPU per request is therefore the system's
share of a relay (socket calls, wake-ups) on this machine.

Run as ``python -m bench.floor PORT SOCKET`` (the relay) and
``python -m bench.floor backend SOCKET`` (its backend). Non-streamed chat only.
"""

from __future__ import annotations

import asyncio
import struct
import sys
from collections import deque
from typing import cast

import uvloop

LEN = struct.Struct("<I")
REPLY = (
    b'{"id":"chatcmpl-x","object":"chat.completion","created":0,"model":"m",'
    b'"choices":[{"index":0,"message":{"role":"assistant","content":" lorem"},'
    b'"finish_reason":"length"}],'
    b'"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}'
)
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"


class Framed(asyncio.Protocol):
    """A UNIX-socket side: length-prefixed frames in, each handed to ``on_frame``."""

    def __init__(self) -> None:
        self.buf = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data
        while len(buf) >= 4:
            (n,) = LEN.unpack_from(buf)
            if len(buf) < 4 + n:
                break
            self.on_frame(buf[4 : 4 + n])
            buf = buf[4 + n :]
        self.buf = buf

    def on_frame(self, body: bytes) -> None:
        raise NotImplementedError


class Engine(Framed):
    """The relay's side of the UNIX socket: replies come back in request order."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting: deque[asyncio.Transport] = deque()

    def on_frame(self, body: bytes) -> None:
        client = self.waiting.popleft()
        if not client.is_closing():
            client.write(HEAD % len(body) + body)


class Front(asyncio.Protocol):
    """One client connection: HTTP/1.1 keep-alive requests, one at a time."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.buf = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            length = 0
            for line in buf[:end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(buf) < end + 4 + length:
                break
            body = buf[end + 4 : end + 4 + length]
            self.engine.waiting.append(self.transport)
            self.engine.transport.write(LEN.pack(len(body)) + body)
            buf = buf[end + 4 + length :]
        self.buf = buf


class Backend(Framed):
    """The engine stand-in: answers every frame with the canned completion."""

    def on_frame(self, body: bytes) -> None:
        self.transport.write(LEN.pack(len(REPLY)) + REPLY)


async def relay(port: int, path: str) -> None:
    loop = asyncio.get_running_loop()
    _, engine = await loop.create_unix_connection(Engine, path)
    server = await loop.create_server(lambda: Front(engine), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


async def backend(path: str) -> None:
    server = await asyncio.get_running_loop().create_unix_server(Backend, path)
    async with server:
        await server.serve_forever()


def main() -> None:
    if sys.argv[1] == "backend":
        uvloop.run(backend(sys.argv[2]))
    else:
        uvloop.run(relay(int(sys.argv[1]), sys.argv[2]))


if __name__ == "__main__":
    main()
