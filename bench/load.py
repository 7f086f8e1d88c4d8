"""A small asyncio load generator for `make bench` (runs in its own process)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import aiohttp
import orjson


@dataclass
class Result:
    requests: int = 0
    errors: int = 0
    tokens: int = 0
    wall_s: float = 0.0
    latencies: list[float] = field(default_factory=list)
    p99: float | None = None  # when the driver reports it (wrk) instead of samples
    ttfts: list[float] = field(default_factory=list)

    def pct(self, values: list[float], p: float) -> float:
        if not values:
            return float("nan")
        s = sorted(values)
        return s[min(len(s) - 1, int(p / 100 * len(s)))]


async def _one(
    session: aiohttp.ClientSession, url: str, body: bytes, stream: bool, res: Result
) -> None:
    t0 = time.perf_counter()
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
        if resp.status != 200:
            await resp.read()
            res.errors += 1
            return
        if not stream:
            data = orjson.loads(await resp.read())
            res.tokens += data["usage"]["completion_tokens"]
        else:
            first = True
            buf = b""
            events_with_text = 0
            usage_tokens = None
            async for chunk in resp.content.iter_any():
                buf += chunk
                *events, buf = buf.split(b"\n\n")
                for ev in events:
                    if ev.startswith(b"data: {") and b'"content":"' in ev:
                        if first:
                            res.ttfts.append(time.perf_counter() - t0)
                            first = False
                        events_with_text += 1
                    elif ev.startswith(b"data: {") and b'"usage":{' in ev:
                        usage_tokens = orjson.loads(ev[6:])["usage"]["completion_tokens"]
            # Neutrino reports exact counts; the baseline sends one event per token.
            res.tokens += usage_tokens if usage_tokens is not None else events_with_text
    res.latencies.append(time.perf_counter() - t0)
    res.requests += 1


# Replaced in each request body by a number that differs per request, so that no
# cache keyed by the prompt's text can answer every request after the first.
VARY = b"#N#"


async def run(
    url: str, body: dict[str, object], *, concurrency: int, requests: int, stream: bool
) -> Result:
    res = Result()
    head, mark, tail = orjson.dumps(body).partition(VARY)
    left = requests
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn) as session:

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                payload = head + str(left).encode() + tail if mark else head
                await _one(session, url, payload, stream, res)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        res.wall_s = time.perf_counter() - t0
    return res
