"""In-process tests of the asyncio server: backpressure, interleaving, shared capacity."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mocks.mock_ie.core import MockEngine, MockModel
from mocks.mock_ie.events import EventLog, read_events
from mocks.mock_ie.server import MockServer
from neutrino.engine.messages import (
    EngineError,
    ErrorCode,
    FinishReason,
    Hello,
    HelloAck,
    Message,
    Sampling,
    TextQuery,
    TextResult,
)
from neutrino.engine.wire.codec import decode, encode
from neutrino.engine.wire.framing import FrameDecoder
from neutrino.engine.wire.schema import PROTOCOL_VERSION
from tests.unit.mock_ie.helpers import ByteTokenizer


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[MockServer]:
    engine = MockEngine(
        [MockModel("b", "bytes", 100_000)],
        capacity=4,
        reply_tokens=400,
        tokenizers={"bytes": ByteTokenizer()},
    )
    srv = MockServer(engine, events=EventLog(tmp_path / "events.jsonl"))
    await srv.start(tmp_path / "s.sock")
    yield srv
    await srv.close()
    srv.events.close()
    assert not (tmp_path / "s.sock").exists()


async def _connect(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(encode(0, Hello("t", PROTOCOL_VERSION)))
    return reader, writer


async def _read_all(reader: asyncio.StreamReader, count: int) -> list[tuple[int, Message]]:
    decoder = FrameDecoder()
    out: list[tuple[int, Message]] = []
    ended = 0
    while ended < count:
        data = await asyncio.wait_for(reader.read(65536), 5)
        assert data, "connection closed"
        for frame in decoder.feed(data):
            rid, msg = decode(frame)
            out.append((rid, msg))
            if isinstance(msg, EngineError) or (
                isinstance(msg, TextResult) and msg.finish_reason != FinishReason.NONE
            ):
                ended += 1
    return out


async def test_streams_interleave_and_capacity_is_shared(
    server: MockServer, tmp_path: Path
) -> None:
    sock = tmp_path / "s.sock"
    r1, w1 = await _connect(sock)
    r2, w2 = await _connect(sock)
    for rid in (1, 2, 3):
        w1.write(encode(rid, TextQuery("b", [rid], Sampling(max_tokens=1000))))
    await w1.drain()
    await asyncio.sleep(0)
    for rid in (1, 2):
        w2.write(encode(rid, TextQuery("b", [rid], Sampling(max_tokens=1000))))
    got1 = await _read_all(r1, 3)  # three final results
    got2 = await _read_all(r2, 2)  # one final result, one error
    assert isinstance(got1[0][1], HelloAck) and isinstance(got2[0][1], HelloAck)
    results = [rid for rid, m in got1 if isinstance(m, TextResult)]
    assert results[:3] == [1, 2, 3]  # round robin, not one stream after another
    errors = [m for _, m in got2 if isinstance(m, EngineError)]
    assert len(errors) == 1 and errors[0].code == ErrorCode.OVERLOADED
    assert server.active == 0
    w1.close()
    w2.close()


async def test_backpressure_pauses_streams(server: MockServer, tmp_path: Path) -> None:
    server.engine.reply_tokens = 200_000
    server.engine.tokens_per_frame = 1000
    reader, writer = await _connect(tmp_path / "s.sock")
    writer.write(encode(1, TextQuery("b", [1], Sampling(max_tokens=100_000 - 1))))
    await writer.drain()
    conn = None
    for _ in range(500):  # the client does not read: the server must pause
        await asyncio.sleep(0.002)
        conn = next(iter(server.connections), None)
        if conn is not None and conn.paused:
            break
    assert conn is not None and conn.paused
    transport = conn.transport
    assert transport is not None
    buffered = transport.get_write_buffer_size()
    await asyncio.sleep(0.05)
    assert transport.get_write_buffer_size() == buffered  # nothing more was queued
    await _read_all(reader, 1)  # reading resumes the stream up to its final result
    writer.close()
    events = read_events(tmp_path / "events.jsonl")
    finish = [e for e in events if e["event"] == "finish"]
    assert finish[-1]["finish_reason"] == "length"
    assert finish[-1]["completion_tokens"] == 100_000 - 1


async def test_stale_socket_is_replaced_but_not_other_files(tmp_path: Path) -> None:
    stale = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(stale))
    s.close()  # leaves the socket file behind, as a crashed engine would
    engine = MockEngine([MockModel("b", "bytes")], tokenizers={"bytes": ByteTokenizer()})
    srv = MockServer(engine)
    await srv.start(stale)
    _, writer = await _connect(stale)
    writer.close()
    await srv.close()
    assert not stale.exists()
    plain = tmp_path / "plain.txt"
    plain.write_text("keep me")
    with pytest.raises(FileExistsError):
        await MockServer(engine).start(plain)
    assert plain.read_text() == "keep me"
