"""`make bench`'s noisy-neighbour section: a light key's time to first token, alone and
beside a heavy key that keeps the queue full (pipeline/fairness.py).

One ``mock_ie`` (100 ms to a first token, 2 ms between tokens, 20 tokens an answer) behind
one Neutrino with four engine slots (``[limits] max_inflight = 4``). The light key streams
one request at a time; the heavy key keeps 24 streams going (six times the slots, answers of
5 to 40 tokens), from three seconds before the light key's first request. The
light key's TTFT p50 and p99 beside the heavy key, as ratios of its own alone, in one run:
the goal is 1.3x or less (its requests go next when a slot frees, whatever the heavy key
has queued). Then again with one of the four slots reserved for keys holding none
(``[limits] reserved_slots = 1``), and what that costs the heavy key: its answers a second
beside the light key, with and without the reserve.

Run alone: ``python -m bench.fairness``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

from bench.run import REPO, free_port, wait_http

LIGHT_REQUESTS = 60
HEAVY_STREAMS = 24
BODY = {"model": "qwen2.5-mock", "stream": True, "max_tokens": 20,
        "messages": [{"role": "user", "content": "Hello there."}]}  # fmt: skip


async def _ttft(session: aiohttp.ClientSession, url: str, key: str, tokens: int = 20) -> float:
    t0 = time.perf_counter()
    headers = {"Authorization": f"Bearer {key}"}
    first = 0.0
    body = BODY if tokens == 20 else {**BODY, "max_tokens": tokens}
    async with session.post(url, json=body, headers=headers) as resp:
        async for line in resp.content:
            if not first and line.startswith(b"data: {") and _has_text(line):
                first = time.perf_counter() - t0
    return first


async def _run(url: str, heavy: bool, light_key: str = "sk-light") -> tuple[list[float], float]:
    """The light key's TTFTs, and the heavy key's answers a second meanwhile."""
    stop = asyncio.Event()
    done = [0]
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def noisy(seed: int) -> None:
            lengths = random.Random(seed)
            while not stop.is_set():  # answers of 5 to 40 tokens: slots free at any time
                await _ttft(session, url, "sk-heavy", lengths.randint(5, 40))
                done[0] += 1

        others = [asyncio.create_task(noisy(i)) for i in range(HEAVY_STREAMS if heavy else 0)]
        await asyncio.sleep(3.0 if heavy else 0)  # the queue fills; the heavy key is heavy
        t0, before = time.perf_counter(), done[0]
        light = [await _ttft(session, url, light_key) for _ in range(LIGHT_REQUESTS)]
        rate = (done[0] - before) / (time.perf_counter() - t0)
        stop.set()
        await asyncio.gather(*others)
    return light, rate


def _has_text(line: bytes) -> bool:
    """An SSE chunk with text (not the first chunk's empty content beside its role)."""
    at = line.find(b'"content":"')
    return at >= 0 and line[at + 11 : at + 12] != b'"'


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextlib.contextmanager
def _server(work: Path, sock: Path, reserved: int) -> Iterator[str]:
    """A Neutrino with four slots (``reserved`` of them kept for keys holding none) in
    front of the mock; yields its chat URL."""
    port = free_port()
    config = work / f"neutrino-{reserved}.toml"
    config.write_text(
        f'[[engines]]\nsocket = "{sock}"\n[limits]\nmax_inflight = 4\nmax_queue = 256\n'
        f"reserved_slots = {reserved}\n"
        '[auth]\n[[auth.keys]]\nkey = "sk-heavy"\nname = "heavy"\n'
        '[[auth.keys]]\nkey = "sk-light"\nname = "light"\n'
    )
    argv = [sys.executable, "-m", "neutrino", "--http-address", f"127.0.0.1:{port}",
            "--grpc-address", "127.0.0.1:0", "--metrics-address", "", "--quic-address", "",
            "--log-level", "warning", "--config", str(config)]  # fmt: skip
    server = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_http(f"http://127.0.0.1:{port}/neutrino/v1/status")
        yield f"http://127.0.0.1:{port}/v1/chat/completions"
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(20)


def measure() -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="neutrino-fairness-"))
    sock = work / "mock.sock"
    mock = subprocess.Popen(
        [sys.executable, "-m", "mocks.mock_ie", "--socket", str(sock), "--ttft-ms", "100",
         "--itl-ms", "2", "--reply-tokens", "20", "--log-level", "warning"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with _server(work, sock, 0) as url:
            # Beside first: the light key's own past (its tokens of the last minute, which
            # the fair shares weigh) is then less than the heavy key's, as a neighbour's is.
            beside = asyncio.run(_run(url, heavy=True))
            alone = asyncio.run(_run(url, heavy=False))
            # The same requests sent with the heavy key: one key's queue, first come first.
            shared = asyncio.run(_run(url, heavy=True, light_key="sk-heavy"))
        with _server(work, sock, 1) as url:
            reserved = asyncio.run(_run(url, heavy=True))
    finally:
        mock.terminate()
        mock.wait(10)
    out: dict[str, Any] = {}
    rows = (("alone", alone), ("beside", beside), ("fifo", shared), ("reserved", reserved))
    for name, (values, rate) in rows:
        out[name] = {"ttft_ms_p50": 1e3 * statistics.median(values),
                     "ttft_ms_p99": 1e3 * _p(values, 0.99), "heavy_per_s": rate}  # fmt: skip
    for name, prefix in (
        ("beside", "ratio"),
        ("fifo", "fifo_ratio"),
        ("reserved", "reserved_ratio"),
    ):
        for q in ("p50", "p99"):
            out[f"{prefix}_{q}"] = out[name][f"ttft_ms_{q}"] / out["alone"][f"ttft_ms_{q}"]
    return out


def print_fairness(r: dict[str, Any]) -> None:
    print("\nnoisy neighbour: a light key's TTFT beside a heavy key keeping the queue full")
    print(f"  ({HEAVY_STREAMS} heavy streams on 4 slots; goal: ratios <= 1.3x)")
    print(f"  {'':18} {'p50 ms':>8} {'p99 ms':>8}   ratios to alone   heavy answers/s")
    rows = (("alone", "alone", ""), ("beside", "beside", "ratio"),
            ("fifo", "as one key", "fifo_ratio"),
            ("reserved", "beside, 1 reserved", "reserved_ratio"))  # fmt: skip
    for name, label, ratio in rows:
        row = r[name]
        line = f"  {label:18} {row['ttft_ms_p50']:8.1f} {row['ttft_ms_p99']:8.1f}"
        if ratio:
            line += f"   {r[ratio + '_p50']:5.2f}x {r[ratio + '_p99']:5.2f}x"
            line += f"   {row['heavy_per_s']:13.1f}"
        print(line)


if __name__ == "__main__":
    print_fairness(measure())
