"""A misbehaving engine process for the reliability suite.

It speaks the engine protocol well enough to be connected to (unless its mode is
``no-handshake``), then, when a text query arrives, does what its mode says:

* ``huge-prefix``: a frame header declaring a 16 GB frame;
* ``garbage``: bytes that are not Cap'n Proto framing at all;
* ``bad-pointer``: a well-framed message whose root pointer points outside it;
* ``unknown-id``: results for a request id never issued, then a proper answer;
* ``late-frame``: a proper answer, then more results for the finished request;
* ``no-handshake``: never answers the hello.

Usage: ``python -m tests.support.rogue_engine --socket PATH --mode MODE``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import struct

from neutrino.engine.messages import (
    FinishReason,
    Hello,
    HelloAck,
    ModelInfo,
    Ping,
    Pong,
    TextQuery,
    TextResult,
)
from neutrino.engine.wire.codec import decode, encode
from neutrino.engine.wire.framing import FrameDecoder
from neutrino.engine.wire.schema import PROTOCOL_VERSION

MODES = ("huge-prefix", "garbage", "bad-pointer", "unknown-id", "late-frame", "no-handshake")
MODEL = "qwen2.5-mock"
ANSWER = [9707, 11, 1879, 0]  # "Hello, world!" in Qwen2's vocabulary, more or less


def _bad_pointer() -> bytes:
    """A valid frame whose root struct pointer's offset runs far past the segment."""
    frame = bytearray(encode(1, TextResult([1, 2, 3])))
    words = struct.unpack_from("<I", frame, 4)[0]
    assert words > 1
    struct.pack_into("<Q", frame, 8, (0x3FFF0000 << 2) | (1 << 32))  # offset, 1 data word
    return bytes(frame)


class Rogue(asyncio.Protocol):
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.decoder = FrameDecoder()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        for frame in self.decoder.feed(data):
            rid, msg = decode(frame)
            if isinstance(msg, Hello) and self.mode != "no-handshake":
                ack = HelloAck("rogue/1", PROTOCOL_VERSION, [ModelInfo(MODEL, 32768)], 64)
                self.send(encode(0, ack))
            elif isinstance(msg, Ping):
                self.send(encode(0, Pong(msg.nonce)))
            elif isinstance(msg, TextQuery):
                self.misbehave(rid)

    def send(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def answer(self, rid: int) -> bytes:
        return encode(rid, TextResult(ANSWER[:2])) + encode(
            rid, TextResult(ANSWER[2:], FinishReason.LENGTH, completion_tokens=4)
        )

    def misbehave(self, rid: int) -> None:
        mode = self.mode
        if mode == "huge-prefix":
            self.send(struct.pack("<II", 0, 0x7FFFFFFF))
        elif mode == "garbage":
            self.send(b"GET / HTTP/1.1\r\nHost: engine\r\n\r\n" * 4)
        elif mode == "bad-pointer":
            self.send(_bad_pointer())
        elif mode == "unknown-id":
            self.send(encode(rid + 1000, TextResult([1, 2])) + self.answer(rid))
        elif mode == "late-frame":
            self.send(self.answer(rid) + encode(rid, TextResult([5, 6, 7])))


async def serve(path: str, mode: str) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_unix_server(lambda: Rogue(mode), path)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    server.close()
    os.unlink(path)


def main() -> None:
    p = argparse.ArgumentParser(prog="rogue_engine")
    p.add_argument("--socket", required=True)
    p.add_argument("--mode", choices=MODES, required=True)
    args = p.parse_args()
    asyncio.run(serve(args.socket, args.mode))


if __name__ == "__main__":
    main()
