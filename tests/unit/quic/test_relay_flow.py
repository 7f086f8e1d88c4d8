"""The relay's back-pressure through a real HTTP/3 listener (in this process, so that its
state can be read): an aiohttp handler whose writes pause past the high-water mark
resumes as the client takes the data, and the connection is idle afterwards."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from aiohttp import web

from neutrino.config import Config, ServerConfig
from neutrino.frontends.quic.relay import HIGH_WATER
from neutrino.frontends.quic.server import Http3Server
from neutrino.loadgen.h3 import H3Client

BIG = bytes(range(256)) * 6400  # 1.6 MB: far over the high-water mark in one write
PIECE = bytes(range(256)) * 256  # 64 KB
PIECES = 40


async def _handler(request: web.BaseRequest) -> web.StreamResponse:
    if request.path == "/big":
        return web.Response(body=BIG, content_type="application/octet-stream")
    resp = web.StreamResponse()
    await resp.prepare(request)
    for _ in range(PIECES):
        await resp.write(PIECE)
    await resp.write_eof()
    return resp


@pytest.fixture
async def listener(tmp_path: Path) -> AsyncIterator[Http3Server]:
    relay = web.Server(_handler)
    cfg = Config(server=ServerConfig(quic_address="127.0.0.1:0", tls_dir=str(tmp_path / "tls")))
    server = Http3Server(cfg, {}, relay)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
        await relay.shutdown(1)


async def _until(pred: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if pred():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


def _idle(server: Http3Server) -> bool:
    conns = server.settings.connections
    return not server.busy and all(not c.requests and not c._paused for c in conns)


async def test_a_body_over_the_high_water_mark_ends_and_frees_its_handler(
    listener: Http3Server,
) -> None:
    async with H3Client("127.0.0.1", listener.port) as client:
        resp = await client.request("GET", "/big")
        assert await resp.read() == BIG
        assert resp.status == 200
        await _until(lambda: _idle(listener), "the relayed handler finished")


async def test_a_stream_paused_by_a_stalled_client_resumes(listener: Http3Server) -> None:
    assert len(PIECE) * PIECES > 4 * HIGH_WATER
    async with H3Client("127.0.0.1", listener.port) as client:
        client.stop_receiving()
        request = asyncio.ensure_future(client.request("GET", "/stream"))
        conns = listener.settings.connections
        await _until(lambda: any(c._paused for c in conns), "the handler's writes paused")
        client.resume_receiving()
        resp = await request
        assert await resp.read() == PIECE * PIECES
        await _until(lambda: _idle(listener), "the relayed handler finished")
