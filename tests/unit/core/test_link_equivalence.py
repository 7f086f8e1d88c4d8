"""The socket client and the in-process client follow the same engine-link rules.

Each scenario is a script of engine reads (frames that arrive together) and client
actions; it runs once against a real ``EngineConnection`` on a UNIX socket pair (the
test plays the engine) and once against ``InProcessEngineClient`` (frames handed over
undecoded). Both must give every sink the same calls and send the same cancels.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pytest

from neutrino.engine.client import StreamSink
from neutrino.engine.connection import EngineConnection
from neutrino.engine.messages import (
    Cancel,
    EmbedResult,
    EngineError,
    ErrorCode,
    FinishReason,
    Hello,
    HelloAck,
    Message,
    ModalResult,
    ModelInfo,
    Query,
    Sampling,
    TextQuery,
    TextResult,
    TokenBatch,
)
from neutrino.engine.wire.codec import decode, encode
from neutrino.engine.wire.framing import FrameDecoder
from neutrino.engine.wire.schema import PROTOCOL_VERSION
from neutrino.engines.inprocess import InProcessEngineClient
from neutrino.engines.session import EngineHandler
from neutrino.errors import NeutrinoError

ACK = HelloAck("scripted", PROTOCOL_VERSION, [ModelInfo("m", 4096)], 8)


@dataclass(eq=False)
class Sink:
    fail_on: int | None = None  # raise from the n-th call (0-based)
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def _take(self, *call: Any) -> bool:
        self.calls.append(call)
        if self.fail_on is not None and len(self.calls) > self.fail_on:
            self.fail_on = None
            raise RuntimeError("render bug")
        return True

    def on_tokens(self, tokens: list[int]) -> bool:
        return self._take("tokens", list(tokens))

    def on_result(self, result: TextResult) -> bool:
        return self._take("result", list(result.tokens), result.finish_reason)

    def on_modal(self, result: ModalResult) -> None:
        self._take("modal", type(result).__name__)

    def on_error(self, error: NeutrinoError) -> None:
        self.calls.append(("error", error.kind, error.message))

    def flush(self) -> None:
        self.calls.append(("flush",))

    def on_moved(self, engine: str, reason: str) -> None:
        pass


class _Silent(EngineHandler):
    """An engine that produces nothing by itself: the script speaks for it."""

    def hello_ack(self, hello: Hello) -> HelloAck:
        return ACK

    def start(self, rid: int, query: Query) -> EngineError | None:
        return None


class Harness(Protocol):
    async def submit(self, sink: StreamSink) -> int: ...
    async def read(self, *frames: tuple[int, Message]) -> None: ...
    async def cancel(self, rid: int, reason: str) -> None: ...
    async def lose(self) -> None: ...
    async def cancels(self) -> list[tuple[int, str]]: ...


QUERY = TextQuery("m", [1, 2, 3], Sampling(max_tokens=100))


class SocketHarness:
    def __init__(self, conn: EngineConnection, engine: socket.socket) -> None:
        self.conn = conn
        self.engine = engine
        self.decoder = FrameDecoder()

    @classmethod
    async def open(cls) -> SocketHarness:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        theirs.setblocking(False)
        conn = EngineConnection("test")
        await asyncio.get_running_loop().create_unix_connection(lambda: conn, sock=ours)
        h = cls(conn, theirs)
        assert [type(m) for _, m in await h._sent()] == [Hello]
        await h.read((0, ACK))
        assert conn.is_open
        return h

    async def _sent(self) -> list[tuple[int, Message]]:
        loop = asyncio.get_running_loop()
        out: list[tuple[int, Message]] = []
        while True:
            try:
                data = await asyncio.wait_for(loop.sock_recv(self.engine, 65536), 0.1)
            except TimeoutError:
                return out
            if not data:
                return out
            out += [decode(f) for f in self.decoder.feed(data)]

    async def submit(self, sink: StreamSink) -> int:
        return self.conn.submit(QUERY, sink)

    async def read(self, *frames: tuple[int, Message]) -> None:
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(self.engine, b"".join(encode(r, m) for r, m in frames))
        await asyncio.sleep(0.03)

    async def cancel(self, rid: int, reason: str) -> None:
        self.conn.cancel(rid, reason)

    async def lose(self) -> None:
        self.engine.close()
        await asyncio.sleep(0.03)

    async def cancels(self) -> list[tuple[int, str]]:
        if self.engine.fileno() < 0:
            return []
        return [(r, m.reason) for r, m in await self._sent() if isinstance(m, Cancel)]


class InProcessHarness:
    def __init__(self) -> None:
        self.client = InProcessEngineClient(lambda line: _Silent())
        self.seen = 0

    async def submit(self, sink: StreamSink) -> int:
        sub = self.client.submit(QUERY, sink)
        await asyncio.sleep(0)
        return sub.rid

    async def read(self, *frames: tuple[int, Message]) -> None:
        self.client.receive(list(frames))
        await asyncio.sleep(0)

    async def cancel(self, rid: int, reason: str) -> None:
        self.client.cancel(rid, reason)

    async def lose(self) -> None:
        self.client.disconnect()

    async def cancels(self) -> list[tuple[int, str]]:
        new = self.client.cancels[self.seen :]
        self.seen = len(self.client.cancels)
        return new


Script = Callable[[Harness], Awaitable[list[Any]]]


async def late_and_unknown(h: Harness) -> list[Any]:
    a, b = Sink(), Sink()
    r1, r2 = await h.submit(a), await h.submit(b)
    await h.read((r1, TextResult([5])), (r2, TextResult([6])), (r1, TextResult([7])))
    await h.read(
        (0, TokenBatch([r1, r2], [1, 2], [8, 9, 10])),
        (r1, TextResult([11], FinishReason.STOP, completion_tokens=5)),
        (r1, TextResult([12])),  # late: r1 has ended
        (99, TextResult([13])),  # an id never used
    )
    await h.read((0, TokenBatch([r1, r2, 99], [1, 1, 1], [14, 15, 16])))
    await h.read((r2, TextResult([], FinishReason.LENGTH)), (r2, EmbedResult(1, [0.0], 1)))
    return [a.calls, b.calls, await h.cancels()]


async def sink_failure(h: Harness) -> list[Any]:
    bad, ok = Sink(fail_on=1), Sink()
    r1, r2 = await h.submit(bad), await h.submit(ok)
    await h.read((r1, TextResult([1])), (r2, TextResult([2])))
    await h.read((0, TokenBatch([r1, r2], [1, 1], [3, 4])))  # bad raises: one cancel
    await h.read((r1, TextResult([5])), (r2, TextResult([6], FinishReason.STOP)))
    return [bad.calls, ok.calls, await h.cancels()]


async def engine_errors(h: Harness) -> list[Any]:
    a, b, c = Sink(), Sink(), Sink()
    r1, r2, r3 = await h.submit(a), await h.submit(b), await h.submit(c)
    await h.read(
        (r1, EngineError(ErrorCode.OVERLOADED, "busy\nsecond line")),
        (r2, EngineError(ErrorCode.INTERNAL, "Traceback: /secret/path")),
        (r1, TextResult([1])),  # late
    )
    await h.cancel(r3, "client disconnected")
    await h.cancel(r3, "client disconnected")  # a second cancel sends nothing
    await h.read((r3, TextResult([2], FinishReason.CANCELLED)))
    return [a.calls, b.calls, c.calls, await h.cancels()]


async def connection_loss(h: Harness) -> list[Any]:
    a, b, done = Sink(), Sink(), Sink()
    r1, _r2, r3 = await h.submit(a), await h.submit(b), await h.submit(done)
    await h.read((r1, TextResult([1])), (r3, TextResult([2], FinishReason.STOP)))
    await h.lose()
    late = Sink()
    try:
        await h.submit(late)
    except NeutrinoError as exc:
        late.calls.append(("refused", exc.kind))
    return [a.calls, b.calls, done.calls, late.calls, await h.cancels()]


SCRIPTS = [late_and_unknown, sink_failure, engine_errors, connection_loss]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: s.__name__)
async def test_socket_and_in_process_clients_deliver_alike(script: Script) -> None:
    sock = await SocketHarness.open()
    try:
        over_socket = await script(sock)
    finally:
        sock.conn.close()
        sock.engine.close()
    in_process = await script(InProcessHarness())
    assert over_socket == in_process
    assert any(over_socket), "the script delivered nothing"


async def test_the_scripts_see_the_rules() -> None:
    """What the shared rules give, spelled out once (so equal results are not both wrong)."""
    a, b, cancels = await late_and_unknown(InProcessHarness())
    assert a == [  # one call per stream per read for its tokens, before its final frame
        ("tokens", [5, 7]),
        ("flush",),
        ("tokens", [8]),
        ("result", [11], FinishReason.STOP),
        ("flush",),
    ]
    assert b[-2:] == [("result", [], FinishReason.LENGTH), ("flush",)]
    assert cancels == []
    bad, ok, cancels = await sink_failure(InProcessHarness())
    assert bad[-1][0] == "error" and len([c for c in bad if c[0] == "error"]) == 1
    assert cancels == [(1, "output rejected")]
    assert ok[-2:] == [("result", [6], FinishReason.STOP), ("flush",)]
    a, b, c, cancels = await engine_errors(InProcessHarness())
    assert a[0][2] == "engine error: busy" and b[0][2] == "the engine failed to process the request"
    assert c == [] and cancels == [(3, "client disconnected")]
    a, b, done, late, cancels = await connection_loss(InProcessHarness())
    assert [x[0] for x in a] == ["tokens", "flush", "error"] and len(b) == 1
    assert ("error",) not in [x[:1] for x in done] and late[0][0] == "refused"
