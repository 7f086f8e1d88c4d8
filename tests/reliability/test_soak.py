"""A soak: thousands of mixed requests, 30 % of them abandoned mid-way, and afterwards
the server is where it started.

Mixed: streamed and whole chat, streamed completions, embeddings and gRPC streams; a
third of them (streams after their first chunks, whole ones after a moment) are left by
their client. Afterwards the server's tasks and descriptors are back at their baseline,
its resident size within 50 MB of it, the engine got exactly one cancel per abandoned
request still running (never two), and nothing failed that was not abandoned.

``make soak`` runs a long one (``NEUTRINO_SOAK_REQUESTS``, default 200,000 there).
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
import grpc
import pytest

from neutrino.v1 import inference_pb2, inference_pb2_grpc
from tests.support.procs import MockIE, NeutrinoProc, free_port

MB = 1024 * 1024
REQUESTS = int(os.environ.get("NEUTRINO_SOAK_REQUESTS", "8000"))
CONCURRENCY = 32
# Embeddings (a tenth of the mix) are answered at once and never left: the others are
# left a third of the time, so 30 % of all requests are.
CANCEL_SHARE = 1 / 3
MODEL = "qwen2.5-mock"


@dataclass
class Tally:
    done: int = 0
    abandoned: int = 0
    unexpected: list[str] = field(default_factory=list)
    kinds: collections.Counter[str] = field(default_factory=collections.Counter)


def _chat(rng: random.Random, stream: bool) -> dict[str, object]:
    return {
        "model": MODEL,
        "stream": stream,
        "max_tokens": rng.choice([8, 32, 64]),
        "messages": [{"role": "user", "content": f"Tell me about {rng.randrange(10**6)}"}],
        "seed": rng.randrange(1000),
    }


async def _stream(s: aiohttp.ClientSession, url: str, body: object, leave: bool, t: Tally) -> None:
    async with s.post(url, json=body) as r:
        if r.status != 200:
            t.unexpected.append(f"{url} {r.status} {(await r.text())[:200]}")
            return
        chunks = 0
        async for line in r.content:
            if not line.startswith(b"data: "):
                continue
            if b'"error"' in line:
                t.unexpected.append(line.decode()[:200])
            chunks += 1
            if leave and chunks >= 2:
                return  # the client leaves mid-stream
            if line.startswith(b"data: [DONE]"):
                return
        if not leave:
            t.unexpected.append(f"{url}: the stream ended without [DONE]")


async def _whole(s: aiohttp.ClientSession, url: str, body: object, leave: bool, t: Tally) -> None:
    try:
        async with asyncio.timeout(0.02 if leave else 30):
            async with s.post(url, json=body) as r:
                text = await r.text()
                if r.status != 200:
                    t.unexpected.append(f"{url} {r.status} {text[:200]}")
    except TimeoutError:
        if not leave:
            t.unexpected.append(f"{url}: timed out")


async def _grpc(
    stub: inference_pb2_grpc.InferenceStub, rng: random.Random, leave: bool, t: Tally
) -> None:
    msgs = [inference_pb2.ChatMessage(role="user", content=f"Hi {rng.randrange(10**6)}")]
    call = stub.GenerateStream(
        inference_pb2.GenerateRequest(
            model=MODEL, chat=inference_pb2.Chat(messages=msgs), max_tokens=32
        ),
        timeout=30,
    )
    seen = 0
    try:
        async for _ in call:
            seen += 1
            if leave and seen >= 2:
                call.cancel()
                return
    except grpc.aio.AioRpcError as exc:
        if not (leave and exc.code() is grpc.StatusCode.CANCELLED):
            t.unexpected.append(f"gRPC {exc.code()} {exc.details()}")


async def _one(
    i: int, s: aiohttp.ClientSession, stub: inference_pb2_grpc.InferenceStub, base: str, t: Tally
) -> None:
    rng = random.Random(i)
    leave = rng.random() < CANCEL_SHARE
    roll = rng.random()
    if roll < 0.4:
        kind = "chat stream"
        await _stream(s, base + "/v1/chat/completions", _chat(rng, True), leave, t)
    elif roll < 0.6:
        kind = "chat"
        await _whole(s, base + "/v1/chat/completions", _chat(rng, False), leave, t)
    elif roll < 0.75:
        kind = "completion stream"
        body = {"model": MODEL, "prompt": f"Once {i}", "max_tokens": 32, "stream": True}
        await _stream(s, base + "/v1/completions", body, leave, t)
    elif roll < 0.85:
        kind, leave = "embeddings", False  # answered at once: nothing to leave
        await _whole(
            s, base + "/v1/embeddings", {"model": "embed-mock", "input": f"x{i}"}, False, t
        )
    else:
        kind = "grpc stream"
        await _grpc(stub, rng, leave, t)
    t.kinds[kind] += 1
    t.abandoned += leave
    t.done += 1


async def _soak(base: str, grpc_address: str, n: int) -> Tally:
    tally = Tally()
    counter = iter(range(n))
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with (
        aiohttp.ClientSession(connector=connector) as s,
        grpc.aio.insecure_channel(grpc_address) as channel,
    ):
        stub = inference_pb2_grpc.InferenceStub(channel)

        async def worker() -> None:
            for i in counter:
                await _one(i, s, stub, base, tally)

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return tally


def _process(server: NeutrinoProc) -> dict[str, int]:
    got: dict[str, int] = server.get_json("/neutrino/v1/app_state")["process"]
    return got


def _settled(server: NeutrinoProc, timeout: float = 20.0) -> dict[str, int]:
    """The server's figures once nothing is in flight and its memory stops falling."""
    deadline = time.monotonic() + timeout
    while server.get_json("/neutrino/v1/app_state")["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.1)
    low = _process(server)
    calm = 0
    while calm < 6 and time.monotonic() < deadline:
        time.sleep(0.5)
        now = _process(server)
        calm = calm + 1 if now["rss_bytes"] >= low["rss_bytes"] - MB else 0
        low = {k: min(low[k], now[k]) for k in now}
    return low


@pytest.mark.timeout(max(600, REQUESTS // 100))  # make soak: ~1,000 requests a second
async def test_soak_of_mixed_requests_with_30_percent_cancels(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    mock = mock_factory("--itl-ms", "1", "--reply-tokens", "64")
    address = f"127.0.0.1:{free_port()}"
    server = neutrino_factory("--engine", mock.socket, "--grpc-address", address)
    await _soak(server.base_url, address, 500)  # warm: tokenizers, caches, arenas
    before = await asyncio.to_thread(_settled, server)
    warm_cancels = len(mock.events("cancel"))
    t0 = time.monotonic()
    tally = await _soak(server.base_url, address, REQUESTS)
    took = time.monotonic() - t0
    after = await asyncio.to_thread(_settled, server)

    assert tally.done == REQUESTS and not tally.unexpected, tally.unexpected[:5]
    assert tally.abandoned >= 0.28 * REQUESTS
    cancels = mock.events("cancel")[warm_cancels:]
    keys = collections.Counter((e["conn"], e["request_id"]) for e in cancels)
    duplicates = sum(1 for c in keys.values() if c > 1)
    reasons = collections.Counter(e["reason"] for e in cancels)
    print(
        f"\nsoak: {REQUESTS} requests in {took:.1f} s ({dict(tally.kinds)}), "
        f"{tally.abandoned} abandoned, {len(cancels)} engine cancels ({dict(reasons)}), "
        f"{duplicates} duplicates; tasks {before['tasks']} -> {after['tasks']}, "
        f"fds {before['open_fds']} -> {after['open_fds']}, "
        f"RSS {before['rss_bytes'] / MB:.0f} -> {after['rss_bytes'] / MB:.0f} MB"
    )
    assert duplicates == 0
    assert set(reasons) <= {"client disconnected"}
    # One cancel per abandoned request still running when left (most are: a few had
    # ended just before), never more.
    assert 0.75 * tally.abandoned <= len(cancels) <= tally.abandoned
    assert after["tasks"] <= before["tasks"]
    assert after["open_fds"] <= before["open_fds"]
    assert after["rss_bytes"] <= before["rss_bytes"] + 50 * MB
    states = collections.Counter(r["state"] for r in server.history(1000))
    assert set(states) <= {"complete", "cancelled"}, states
