"""`make bench`, workers: Neutrino with one process and with ``--workers 2`` in the same
run, against the same mock_ie (a process of its own).

Nothing is pinned here: the workers, the engine and the load generator (wrk for whole
answers, the Python client for streams) share every CPU of the machine, as they would on
a server that runs them all. On a 2-core machine the engine and the load take a good
part of the second core, so two workers cannot reach twice one's throughput there; the
report says so next to the figures.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.run import (
    WRK,
    WRK_SECONDS,
    Server,
    cpu_seconds,
    free_port,
    phase,
    pin,
    wrk_phase,
)

COUNTS = (1, 2)
CONCURRENCY = 64
STREAM_CONCURRENCY = 32
STREAM_TOKENS = 32
STREAM_REQUESTS = 600


def children(pid: int) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            fields = (proc / "stat").read_text().rpartition(")")[2].split()
        except (OSError, NotADirectoryError):
            continue
        if fields[1] == str(pid):
            found.append(int(proc.name))
    return found


class Workers(Server):
    """Neutrino with ``count`` workers (1: a single process, no supervisor)."""

    def __init__(self, count: int, engine: str, engine_pid: int, cpus: set[int]) -> None:
        self.engine_pid = engine_pid
        # At each cpu() (a load phase reads it at its start and end): the time, the
        # machine's idle and total ticks, and the engine's CPU seconds.
        self.marks: list[tuple[float, int, int, float]] = []
        port = free_port()
        argv = [
            *(sys.executable, "-m", "neutrino", "--workers", str(count), "--engine", engine),
            *("--http-address", f"127.0.0.1:{port}", "--grpc-address", "127.0.0.1:0"),
            *("--metrics-address", "127.0.0.1:0", "--log-level", "warning"),
            *("--quic-address", ""),
        ]
        status = f"http://127.0.0.1:{port}/neutrino/v1/status"
        super().__init__(f"{count} worker{'s' * (count > 1)}", argv, status, port, cpus)
        self.load_cpus = cpus
        if count > 1:
            self._wait_workers(count)

    def _wait_workers(self, count: int, timeout: float = 30) -> None:
        url = f"http://127.0.0.1:{self.port}/neutrino/v1/app_state"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with urllib.request.urlopen(url, timeout=2) as r:
                listed = json.loads(r.read()).get("workers", [])
            if len(listed) == count and all(w.get("connections", 0) for w in listed):
                return
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"{self.name}: not every worker connected to the engine")

    def cpu(self) -> float:
        """The supervisor's and every worker's CPU seconds."""
        idle, total = _idle_ticks()
        self.marks.append((time.monotonic(), idle, total, cpu_seconds(self.engine_pid)))
        return sum(cpu_seconds(pid) for pid in (self.proc.pid, *children(self.proc.pid)))

    def last_phase(self) -> tuple[float, float]:
        """The machine's idle share and the engine's cores over the last load phase."""
        (t0, idle0, total0, engine0), (t1, idle1, total1, engine1) = self.marks[-2:]
        return (idle1 - idle0) / max(1, total1 - total0), (engine1 - engine0) / (t1 - t0)


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _idle_ticks() -> tuple[int, int]:
    """The machine's idle CPU time and its total so far (/proc/stat, in ticks)."""
    first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    ticks = [int(v) for v in first[1:9]]  # user nice system idle iowait irq softirq steal
    return ticks[3] + ticks[4], sum(ticks)


async def _one_round(srv: Workers, args: Any) -> dict[str, float]:
    messages = [{"role": "user", "content": "Write a short note about the weather on day #N#."}]
    body: dict[str, Any] = {"model": "qwen2.5-mock", "messages": messages, "max_tokens": 1}
    if WRK is not None:
        plain, plain_cpu = await wrk_phase(srv, body, CONCURRENCY, WRK_SECONDS)
    else:
        plain, plain_cpu = await phase(srv, body, CONCURRENCY, args.requests, False)
    idle, engine_cores = srv.last_phase()
    body = {**body, "max_tokens": STREAM_TOKENS, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    streamed, _ = await phase(srv, body, STREAM_CONCURRENCY, STREAM_REQUESTS, True)
    return {
        "req_s": plain.requests / plain.wall_s,
        "cpu_us_per_req": 1e6 * plain_cpu / max(1, plain.requests),
        "idle": idle,
        "engine_cores": engine_cores,
        "stream_req_s": streamed.requests / streamed.wall_s,
        "stream_tokens_s": streamed.tokens / streamed.wall_s,
        "errors": plain.errors + streamed.errors,
    }


async def compare(engine_pid: int, engine: str, args: Any, cpus: set[int]) -> dict[str, Any]:
    """Each figure is the median of ``args.repeats`` rounds, the two servers alternating;
    the servers, the engine and this process (the load) run on ``cpus``."""
    before = os.sched_getaffinity(0), os.sched_getaffinity(engine_pid)
    pin(0, cpus)  # the load generator, and what it starts
    pin(engine_pid, cpus)
    servers: list[Workers] = []
    try:
        servers = [Workers(n, engine, engine_pid, cpus) for n in COUNTS]
        rounds: dict[int, list[dict[str, float]]] = {n: [] for n in COUNTS}
        for _ in range(args.repeats):
            for n, srv in zip(COUNTS, servers, strict=True):
                rounds[n].append(await _one_round(srv, args))
    finally:
        for srv in servers:
            srv.stop()
        pin(0, before[0])
        pin(engine_pid, before[1])
    report: dict[str, Any] = {
        str(n): {key: _median([r[key] for r in got]) for key in got[0]} for n, got in rounds.items()
    }
    return {**report, "cpus": sorted(cpus)}


def print_workers(r: dict[str, Any]) -> None:
    one, two = r["1"], r["2"]
    driver = "wrk" if WRK else "the Python load generator"
    cpus = len(r["cpus"])
    print(
        f"\nWorkers: one process against --workers 2, same mock_ie, same run; the workers, "
        f"the engine and the load ({driver}; streams: the Python client) share all "
        f"{cpus} CPUs {r['cpus']}, none has one of its own"
    )
    print(
        f"{'workers':>8} {'req/s':>9} {'CPU us/req':>11} {'cores':>6} {'engine':>7} {'idle':>5} "
        f"{'streamed req/s':>15} "
        f"{'tokens/s':>10}   (non-streamed at concurrency {CONCURRENCY}; streamed: "
        f"{STREAM_TOKENS} tokens at concurrency {STREAM_CONCURRENCY})"
    )
    for n in COUNTS:
        m = r[str(n)]
        print(
            f"{n:>8} {m['req_s']:>9,.0f} {m['cpu_us_per_req']:>11,.0f} "
            f"{m['req_s'] * m['cpu_us_per_req'] / 1e6:>6.2f} {m['engine_cores']:>7.2f} "
            f"{m['idle']:>5.0%} "
            f"{m['stream_req_s']:>15,.0f} {m['stream_tokens_s']:>10,.0f}"
        )
    print(
        f"2 workers / 1: {two['req_s'] / one['req_s']:.2f}x non-streamed, "
        f"{two['stream_req_s'] / one['stream_req_s']:.2f}x streamed (goal 1.8x where the "
        f"workers have two cores to themselves; with {cpus} CPUs shared with the engine "
        "and the load generator, what is left for the second worker bounds the ratio)"
    )
    print(
        "cores: the CPUs Neutrino's processes kept busy under the non-streamed load; engine: "
        "the CPUs mock_ie (one Python process: at most 1.00) kept busy meanwhile; idle: the "
        "machine's idle share (the rest went to wrk and the kernel)"
    )
    if one["errors"] or two["errors"]:
        print(f"WARNING: {one['errors'] + two['errors']} requests failed in the workers runs")
