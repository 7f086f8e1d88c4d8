"""Write backpressure toward an engine: new queries go to a connection it still reads."""

from __future__ import annotations

import asyncio
from pathlib import Path

from neutrino.config import EngineConfig, EngineLinkConfig
from neutrino.engine.messages import (
    EngineError,
    HelloAck,
    ModalResult,
    ModelInfo,
    Query,
    Sampling,
    TextQuery,
    TextResult,
)
from neutrino.engine.pool import EnginePool
from neutrino.engine.schema import PROTOCOL_VERSION
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
