"""`make bench`'s migration section: what a move costs an answer (engine/fleet/migration.py).

Two ``mock_ie`` replicas (20 ms between tokens, no time to a first token) behind one
Neutrino; a streamed answer is under way when the replica making it is SIGKILLed (or
drained through the admin route). Measured: the time from the kill (or the drain's call)
to the answer's next token, which the other replica makes, against the gap between two
tokens of the same answer before it. The goal is under 50 ms plus the prompt's prefill
(the mock prefills nothing). The killed replica is started again between rounds.

Run alone: ``python -m bench.migration``.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

from bench.run import REPO, free_port, wait_http

ITL_MS = 20
ROUNDS = 8
BEFORE = 10  # tokens of the answer before its replica goes


def _mock(work: Path, name: str) -> subprocess.Popen[bytes]:
    sock = work / f"{name}.sock"
    sock.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "mocks.mock_ie", "--socket", str(sock), "--events",
            str(work / f"{name}.jsonl"), "--itl-ms", str(ITL_MS), "--reply-tokens", "400",
            "--log-level", "warning"]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not sock.exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"mock_ie {name} did not start")
        time.sleep(0.02)
    return proc


def _queries(work: Path, name: str) -> int:
    """The queries the replica ``name`` has received whose answer began there."""
    path = work / f"{name}.jsonl"
    if not path.exists():
        return 0
    events = [json.loads(line) for line in path.read_text().splitlines()]
    return sum(1 for e in events if e["event"] == "query" and not e.get("forced_tokens"))


async def _one(url: str, act: Any) -> tuple[float, float]:
    """A streamed answer: ``act()`` after ``BEFORE`` tokens; the gap from it to the next
    token, and the median gap between tokens before it (seconds)."""
    body = {"model": "qwen2.5-mock", "stream": True, "max_tokens": 300,
            "messages": [{"role": "user", "content": "A long answer, please."}]}  # fmt: skip
    arrivals: list[float] = []
    acted = 0.0
    after = 0.0
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as resp:
        async for line in resp.content:
            if not line.startswith(b"data: {") or b'"content"' not in line:
                continue
            now = time.perf_counter()
            if acted and not after:
                after = now
                break
            arrivals.append(now)
            if len(arrivals) == BEFORE:
                acted = time.perf_counter()
                await asyncio.to_thread(act)
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    return after - acted, statistics.median(gaps)


def measure(rounds: int = ROUNDS) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="neutrino-migration-"))
    names = ("a", "b")
    mocks = {n: _mock(work, n) for n in names}
    port = free_port()
    config = work / "neutrino.toml"
    config.write_text("".join(f'[[engines]]\nname = "{n}"\nsocket = "{work / n}.sock"\n'
                              for n in names) + "[routing]\nmigration_limit = 1\n")  # fmt: skip
    argv = [sys.executable, "-m", "neutrino", "--http-address", f"127.0.0.1:{port}",
            "--grpc-address", "127.0.0.1:0", "--metrics-address", "", "--quic-address", "",
            "--log-level", "warning", "--config", str(config)]  # fmt: skip
    server = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {"itl_ms": ITL_MS}
    try:
        wait_http(base + "/neutrino/v1/status")
        for how in ("kill", "drain"):
            moves, itls = [], []
            for _ in range(rounds):
                seen = {n: _queries(work, n) for n in names}
                act = functools.partial(_act, how, work, mocks, base, seen)
                move, itl = asyncio.run(_one(base + "/v1/chat/completions", act))
                moves.append(move * 1e3)
                itls.append(itl * 1e3)
                _restore(work, mocks, base)
            out[how] = {"move_ms_p50": statistics.median(moves), "move_ms_max": max(moves),
                        "itl_ms_p50": statistics.median(itls)}  # fmt: skip
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(20)
        for proc in mocks.values():
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)
    return out


def _act(
    how: str,
    work: Path,
    mocks: dict[str, subprocess.Popen[bytes]],
    base: str,
    seen: dict[str, int],
) -> None:
    """End the replica the answer began on (its query is the one not ``seen`` before)."""
    name = next(n for n in mocks if _queries(work, n) > seen[n])
    if how == "kill":
        mocks[name].send_signal(signal.SIGKILL)
        return
    req = urllib.request.Request(f"{base}/neutrino/v1/engines/{name}/drain", data=b"{}",
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    urllib.request.urlopen(req, timeout=10).close()


def _restore(work: Path, mocks: dict[str, subprocess.Popen[bytes]], base: str) -> None:
    """The killed replica started again, a drained one resumed; both connected."""
    for n, proc in list(mocks.items()):
        if proc.poll() is not None:
            proc.wait()
            mocks[n] = _mock(work, n)
        req = urllib.request.Request(f"{base}/neutrino/v1/engines/{n}/resume", data=b"{}",
                                     headers={"Content-Type": "application/json"})  # fmt: skip
        urllib.request.urlopen(req, timeout=10).close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with urllib.request.urlopen(base + "/neutrino/v1/app_state", timeout=10) as r:
            engines = json.loads(r.read())["engines"]
        if all(e["connected"] for e in engines):
            return
        time.sleep(0.05)
    raise RuntimeError("a replica did not come back")


def print_migration(r: dict[str, Any]) -> None:
    print(f"\nMigration: from the replica's end to the answer's next token (mock_ie, "
          f"{r['itl_ms']} ms between tokens, nothing to prefill; goal < 50 ms):")  # fmt: skip
    print(f" {'how':>6} {'p50 ms':>8} {'max ms':>8} {'gap before ms':>14}")
    for how in ("kill", "drain"):
        m = r[how]
        print(f" {how:>6} {m['move_ms_p50']:8.1f} {m['move_ms_max']:8.1f} {m['itl_ms_p50']:14.1f}")


if __name__ == "__main__":
    print_migration(measure())
