"""End-to-end tests: the real ``python -m mocks.mock_ie`` process over a UNIX socket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mocks.mock_ie.core import MockEngine, MockGeneration, MockModel
from mocks.mock_ie.events import read_events
from neutrino.engine.messages import (
    Cancel,
    EngineError,
    ErrorCode,
    FinishReason,
    Hello,
    HelloAck,
    Message,
    Ping,
    Pong,
    Sampling,
    TextQuery,
    TextResult,
)
from neutrino.engine.wire.codec import decode, encode
from neutrino.engine.wire.framing import FrameDecoder
from neutrino.engine.wire.schema import PROTOCOL_VERSION
from tests.unit.mock_ie.helpers import all_tokens, drain

REPO = Path(__file__).resolve().parents[3]
EOS = 151645
TIMEOUT = 5.0


class Client:
    """A raw protocol client on an asyncio UNIX connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.decoder = FrameDecoder()
        self.pending: list[tuple[int, Message]] = []

    @classmethod
    async def connect(cls, path: Path) -> Client:
        reader, writer = await asyncio.open_unix_connection(str(path))
        return cls(reader, writer)

    def send(self, rid: int, msg: Message) -> None:
        self.writer.write(encode(rid, msg))

    def send_raw(self, data: bytes) -> None:
        self.writer.write(data)

    async def recv(self) -> tuple[int, Message]:
        while not self.pending:
            data = await asyncio.wait_for(self.reader.read(65536), TIMEOUT)
            if not data:
                raise EOFError
            self.pending.extend(decode(f) for f in self.decoder.feed(data))
        return self.pending.pop(0)

    async def recv_until(self, rid: int) -> tuple[list[TextResult], EngineError | None]:
        """Frames for ``rid`` until its final result or error; others stay queued."""
        frames: list[TextResult] = []
        kept: list[tuple[int, Message]] = []
        try:
            while True:
                got, msg = await self.recv()
                if got != rid:
                    kept.append((got, msg))
                    continue
                if isinstance(msg, EngineError):
                    return frames, msg
                assert isinstance(msg, TextResult), msg
                frames.append(msg)
                if msg.finish_reason != FinishReason.NONE:
                    return frames, None
        finally:
            self.pending[:0] = kept

    async def barrier(self, nonce: int) -> list[tuple[int, Message]]:
        """Ping and return everything received before the matching pong."""
        self.send(0, Ping(nonce))
        seen: list[tuple[int, Message]] = []
        while True:
            rid, msg = await self.recv()
            if isinstance(msg, Pong) and msg.nonce == nonce:
                return seen
            seen.append((rid, msg))

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()


def sampling(**kw: Any) -> Sampling:
    kw.setdefault("max_tokens", 200)
    return Sampling(**kw)


class Engine:
    def __init__(self, proc: subprocess.Popen[bytes], socket: Path, events: Path, err: Path):
        self.proc = proc
        self.socket = socket
        self.events = events
        self.stderr = err

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=TIMEOUT)


@pytest.fixture
def start_engine(tmp_path: Path) -> Iterator[Any]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> Engine:
        sock = tmp_path / "ie.sock"
        events = tmp_path / "events.jsonl"
        err = tmp_path / "stderr.txt"
        with err.open("wb") as err_file:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "mocks.mock_ie",
                    "--socket",
                    str(sock),
                    "--events",
                    str(events),
                    *args,
                ],
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err_file,
            )
        procs.append(proc)
        deadline = time.monotonic() + 15
        while not sock.exists():
            if proc.poll() is not None:
                pytest.fail(f"mock_ie exited early: {err.read_text()}")
            if time.monotonic() > deadline:
                pytest.fail("mock_ie did not create its socket")
            time.sleep(0.01)
        return Engine(proc, sock, events, err)

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "script.json"
    rules = [
        {"match": "STALL", "fault": "stall"},
        {
            "match": "ERROR",
            "fault": "error",
            "fault_after": 2,
            "error_code": "overloaded",
            "error_message": "scripted boom",
        },
        {"match": "café", "reply": "Bonjour café 🙂 你好"},
    ]
    path.write_text(json.dumps({"rules": rules}), encoding="utf-8")
    return path


async def test_process_end_to_end(tmp_path: Path, start_engine: Any) -> None:
    engine = start_engine(
        "--model",
        "m1:qwen2:4096",
        "--capacity",
        "2",
        "--itl-ms",
        "5",
        "--reply-tokens",
        "30",
        "--tokens-per-frame",
        "2",
        "--script",
        str(_script(tmp_path)),
    )
    local = MockEngine([MockModel("m1", "qwen2", 4096)], reply_tokens=30, tokens_per_frame=2)
    tok = local.tokenizer("m1")
    c = await Client.connect(engine.socket)

    c.send(0, Hello("test/1", PROTOCOL_VERSION))
    rid, ack = await c.recv()
    assert rid == 0 and isinstance(ack, HelloAck)
    assert [(m.name, m.context_length) for m in ack.models] == [("m1", 4096)]
    assert ack.capacity == 2 and ack.protocol_version == PROTOCOL_VERSION
    assert await c.barrier(42) == []

    # A full stream matches the in-process core exactly (determinism across processes).
    hello = tok.encode("Hello there")
    q1 = TextQuery("m1", hello, sampling(seed=7, stop_token_ids=[EOS]))
    c.send(1, q1)
    frames, err = await c.recv_until(1)
    assert err is None
    gen = local.start(q1)
    assert isinstance(gen, MockGeneration)
    expected = drain(gen)
    assert all_tokens(frames) == all_tokens(expected)
    assert [len(f.tokens) for f in frames] == [len(f.tokens) for f in expected]
    final = frames[-1]
    assert final.finish_reason == FinishReason.STOP and final.stop_token_id == EOS
    assert final.completion_tokens == 31 and final.prompt_tokens == len(hello)
    assert final.decode_ns > 0

    # Capacity: a running stream and a stalled one fill the engine.
    c.send(2, TextQuery("m1", hello, sampling(seed=1, max_tokens=40)))
    c.send(3, TextQuery("m1", tok.encode("please STALL"), sampling()))
    c.send(4, TextQuery("m1", hello, sampling()))
    frames, err = await c.recv_until(4)
    assert frames == [] and err is not None and err.code == ErrorCode.OVERLOADED

    # Cancel the stalled request: exactly one CANCELLED final, repeated cancels ignored.
    c.send(3, Cancel("test cancel"))
    c.send(3, Cancel("again"))
    c.send(99, Cancel("unknown"))
    frames, err = await c.recv_until(3)
    assert err is None and len(frames) == 1
    assert frames[0].finish_reason == FinishReason.CANCELLED
    assert frames[0].completion_tokens == 0

    # Cancel the running one mid-stream.
    streamed: list[TextResult] = []
    while sum(len(f.tokens) for f in streamed) < 4:
        rid, msg = await c.recv()
        assert rid == 2 and isinstance(msg, TextResult), msg
        streamed.append(msg)
    c.send(2, Cancel("client disconnected"))
    frames, err = await c.recv_until(2)
    streamed += frames
    assert err is None and streamed[-1].finish_reason == FinishReason.CANCELLED
    assert streamed[-1].completion_tokens == len(all_tokens(streamed)) < 40
    leftovers = await c.barrier(7)
    assert [r for r, _ in leftovers if r in (2, 3)] == []

    # Scripted error after two tokens, scripted multi-byte reply, unknown model.
    c.send(5, TextQuery("m1", tok.encode("ERROR now"), sampling()))
    frames, err = await c.recv_until(5)
    assert len(all_tokens(frames)) == 2
    assert err is not None and err.code == ErrorCode.OVERLOADED and err.message == "scripted boom"
    c.send(6, TextQuery("m1", tok.encode("un café"), sampling(stop_token_ids=[EOS])))
    frames, err = await c.recv_until(6)
    assert err is None and tok.decode(all_tokens(frames)[:-1]) == "Bonjour café 🙂 你好"
    c.send(7, TextQuery("nope", hello, sampling()))
    frames, err = await c.recv_until(7)
    assert err is not None and err.code == ErrorCode.UNKNOWN_MODEL

    # Disconnecting with a stalled request cancels it.
    c.send(8, TextQuery("m1", tok.encode("STALL"), sampling()))
    await c.barrier(8)
    await c.close()

    deadline = time.monotonic() + TIMEOUT
    while not any(e["event"] == "disconnect" for e in read_events(engine.events)):
        assert time.monotonic() < deadline, "no disconnect event"
        await asyncio.sleep(0.01)
    assert engine.stop(signal.SIGTERM) == 0
    assert not engine.socket.exists()
    assert "mock_ie ready on " in engine.stderr.read_text()

    events = read_events(engine.events)
    kinds = [e["event"] for e in events]
    assert kinds[:2] == ["connect", "hello"] and kinds[-1] == "disconnect"
    assert kinds.count("ping") == 3
    q = next(e for e in events if e["event"] == "query" and e["request_id"] == 1)
    assert q["model"] == "m1" and q["prompt_tokens"] == len(hello)
    assert q["max_tokens"] == 200 and q["seed"] == 7 and q["conn"] == 1
    cancels = [
        (e["request_id"], e["reason"], e["active"]) for e in events if e["event"] == "cancel"
    ]
    assert cancels == [
        (3, "test cancel", True),
        (3, "again", False),
        (99, "unknown", False),
        (2, "client disconnected", True),
    ]
    finishes = {e["request_id"]: e["finish_reason"] for e in events if e["event"] == "finish"}
    assert finishes == {
        1: "stop",
        2: "cancelled",
        3: "cancelled",
        4: "error",
        5: "error",
        6: "stop",
        7: "error",
        8: "disconnected",
    }
    assert all(isinstance(e["t"], float) for e in events)


async def test_process_protocol_errors_drop_and_sigint(tmp_path: Path, start_engine: Any) -> None:
    script = tmp_path / "drop.json"
    script.write_text(json.dumps({"rules": [{"match": "*", "fault": "drop", "fault_after": 1}]}))
    engine = start_engine("--model", "m1:qwen2:4096", "--script", str(script))

    # An oversized frame header: PROTOCOL error with request id 0, then the engine closes.
    c = await Client.connect(engine.socket)
    c.send_raw(struct.pack("<II", 0, 200 * 1024 * 1024 // 8))
    rid, msg = await c.recv()
    assert rid == 0 and isinstance(msg, EngineError) and msg.code == ErrorCode.PROTOCOL
    with pytest.raises(EOFError):
        await c.recv()
    await c.close()

    # A well-framed but undecodable frame.
    c = await Client.connect(engine.socket)
    c.send_raw(struct.pack("<II", 0, 1) + b"\xff" * 8)
    rid, msg = await c.recv()
    assert rid == 0 and isinstance(msg, EngineError) and msg.code == ErrorCode.PROTOCOL
    await c.close()

    # A query before hello is a protocol error too.
    c = await Client.connect(engine.socket)
    c.send(1, TextQuery("m1", [1, 2], sampling()))
    rid, msg = await c.recv()
    assert rid == 0 and isinstance(msg, EngineError) and msg.code == ErrorCode.PROTOCOL
    await c.close()

    # The drop fault closes the connection after one token.
    c = await Client.connect(engine.socket)
    c.send(0, Hello("test/1", PROTOCOL_VERSION))
    assert isinstance((await c.recv())[1], HelloAck)
    c.send(1, TextQuery("m1", [1, 2], sampling()))
    rid, msg = await c.recv()
    assert rid == 1 and isinstance(msg, TextResult) and len(msg.tokens) == 1
    with pytest.raises((EOFError, ConnectionError)):
        await c.recv()
    await c.close()

    # The engine keeps serving new connections.
    c = await Client.connect(engine.socket)
    assert await c.barrier(1) == []
    await c.close()

    assert engine.stop(signal.SIGINT) == 0
    assert not engine.socket.exists()
    finishes = [e for e in read_events(engine.events) if e["event"] == "finish"]
    assert [e["finish_reason"] for e in finishes] == ["dropped"]
    assert os.path.getsize(engine.events) > 0
