"""A pool toward an engine: new queries go to a connection it still reads (write
backpressure), and the load the engine reports counts other front ends' requests
without keeping ours past their end."""

from __future__ import annotations

import asyncio
from pathlib import Path

from neutrino.config import EngineConfig, EngineLinkConfig
from neutrino.engine.messages import (
    EngineError,
    FinishReason,
    HelloAck,
    ModalResult,
    ModelInfo,
    Pong,
    Query,
    Sampling,
    TextQuery,
    TextResult,
)
from neutrino.engine.pool import EnginePool
from neutrino.engine.wire.schema import PROTOCOL_VERSION
from neutrino.engines.serve import ServerConnection, listen_unix
from neutrino.engines.session import EngineHandler
from neutrino.errors import NeutrinoError


class _Holding(EngineHandler):
    """Accepts every query and never answers; stops reading a connection that asks it to."""

    def __init__(self) -> None:
        self.conn: ServerConnection | None = None

    def hello_ack(self, hello: object) -> HelloAck:
        return HelloAck("holding", PROTOCOL_VERSION, [ModelInfo("m", 1 << 20)], 64)

    def start(self, rid: int, query: Query) -> EngineError | None:
        if isinstance(query, TextQuery) and query.prompt_tokens == [PAUSE]:
            assert self.conn is not None and self.conn.transport is not None
            self.conn.transport.pause_reading()
        return None


PAUSE = 7


class _Sink:
    def on_result(self, result: TextResult) -> bool:
        return False

    def on_tokens(self, tokens: list[int]) -> bool:
        return False

    def on_error(self, error: NeutrinoError) -> None:
        pass

    def on_modal(self, result: ModalResult) -> None:
        pass

    def flush(self) -> None:
        pass

    def on_moved(self, engine: str, reason: str) -> None:
        pass


async def test_a_connection_the_engine_does_not_read_gets_no_new_queries(
    tmp_path: Path,
) -> None:
    def factory() -> ServerConnection:
        handler = _Holding()
        handler.conn = ServerConnection(handler)
        return handler.conn

    path = str(tmp_path / "e.sock")
    server = await listen_unix(path, factory)
    pool = EnginePool(
        EngineConfig(path, "e", connections=2), EngineLinkConfig(heartbeat_interval_s=0)
    )
    await pool.start()
    try:
        assert await pool.wait_connected(5)
        for _ in range(100):
            if len(pool.connections) == 2:
                break
            await asyncio.sleep(0.01)
        slow, reading = pool.connections
        slow.submit(TextQuery("m", [PAUSE], Sampling(max_tokens=1)), _Sink())
        await asyncio.sleep(0.05)  # the engine stops reading this connection
        slow.submit(TextQuery("m", list(range(200_000)), Sampling(max_tokens=1)), _Sink())
        for _ in range(200):
            await asyncio.sleep(0.01)
            if slow.write_paused:
                break
        assert slow.write_paused and not reading.write_paused
        for _ in range(4):  # even once more requests are in flight on the other
            assert pool.pick() is reading
            reading.submit(TextQuery("m", [1], Sampling(max_tokens=1)), _Sink())
        assert reading.inflight > slow.inflight
    finally:
        await pool.close()
        server.close()


class _Shared(EngineHandler):
    """Holds our queries until told; its pongs count two more from another front end."""

    def __init__(self) -> None:
        self.conn: ServerConnection | None = None
        self.held: list[int] = []

    def hello_ack(self, hello: object) -> HelloAck:
        return HelloAck("shared", PROTOCOL_VERSION, [ModelInfo("m", 1 << 20)], 64)

    def start(self, rid: int, query: Query) -> EngineError | None:
        self.held.append(rid)
        return None

    def ping(self, rid: int, nonce: int) -> Pong | None:
        return Pong(nonce, running=len(self.held) + 2)

    def finish_all(self) -> None:
        assert self.conn is not None
        for rid in self.held:
            self.conn.send(rid, TextResult([1], FinishReason.LENGTH, completion_tokens=1))
        self.held = []
        self.conn.flush()


async def _until(check: object, what: str) -> None:
    for _ in range(300):
        if callable(check) and check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(what)


async def test_a_reported_load_counts_others_and_forgets_our_ended_requests(
    tmp_path: Path,
) -> None:
    handler = _Shared()

    def factory() -> ServerConnection:
        handler.conn = ServerConnection(handler)
        return handler.conn

    path = str(tmp_path / "e.sock")
    server = await listen_unix(path, factory)
    pool = EnginePool(
        EngineConfig(path, "e", connections=1), EngineLinkConfig(heartbeat_interval_s=0.02)
    )
    await pool.start()
    try:
        assert await pool.wait_connected(5)
        (conn,) = pool.connections
        for _ in range(3):
            conn.submit(TextQuery("m", [1], Sampling(max_tokens=1)), _Sink())
        await _until(lambda: pool.reported == 5, "the engine's five (ours and two more)")
        handler.ping = lambda rid, nonce: None  # type: ignore[method-assign]  # no more pongs
        handler.finish_all()
        await _until(lambda: pool.inflight == 0, "our three ended")
        assert pool.reported == 2  # the other front end's two stand, ours do not linger
    finally:
        await pool.close()
        server.close()
