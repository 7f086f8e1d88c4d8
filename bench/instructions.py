"""Instructions per request, counted under valgrind's callgrind: a CPU measure without noise.

CPU time per request moves by a few percent from run to run on a shared machine, more
than most changes to the request path are worth. Instructions executed do not: the same
server given the same load executes the same instructions within about 0.2 %. Each server
here runs under callgrind (some 50 times slower, so the counts come from a few hundred
requests); after a warm-up its counters are zeroed (``callgrind_control -z``), the load
runs, and they are dumped (``callgrind_control -d``). The figure is every thread's
instructions over the load divided by its requests (or streamed tokens).

Instructions are not time (a cache miss or a system call's kernel side costs more than
its count), so this complements the CPU figures of ``bench.compare``, which it runs after
when given ``--instructions``.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.load import run

TOTALS = re.compile(rb"^(?:summary|totals):\s+(\d+)", re.M)


def available() -> bool:
    return shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None


def _control(command: str, pid: int) -> None:
    subprocess.run(
        ["callgrind_control", command, str(pid)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _wait_ready(url: str | None, port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Until ``url`` answers 200 (None: until ``port`` takes connections)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server under callgrind exited with {proc.returncode}")
        try:
            if url is None:
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
                return
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"the server under callgrind was not ready within {timeout:.0f} s")


def _dumped(folder: Path, before: set[Path]) -> int:
    """The instruction total of the dump written since ``before``."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        new = sorted(set(folder.glob("cg.out*")) - before)
        for path in new:
            found = TOTALS.search(path.read_bytes())
            if found:
                return int(found.group(1))
        time.sleep(0.2)
    raise TimeoutError("callgrind wrote no dump")


async def count(
    argv: list[str],
    cwd: Path,
    ready_url: str | None,
    target: str,
    body: dict[str, Any],
    *,
    requests: int,
    concurrency: int,
    stream: bool,
    warmup: int = 100,
) -> float:
    """Instructions per request (per token when ``stream``) of the server ``argv`` starts,
    loaded through ``target`` (``cwd``: the checkout it runs from; ``ready_url``: what
    answers once it is up, None for a plain port)."""
    folder = Path(tempfile.mkdtemp(prefix="neutrino-callgrind-"))
    out = folder / "cg.out"
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(cwd)}
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv]
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        port = urlsplit(target).port or 80
        await asyncio.to_thread(_wait_ready, ready_url, port, proc, 600)
        await run(target, body, concurrency=concurrency, requests=warmup, stream=stream)
        await asyncio.to_thread(_control, "-z", proc.pid)
        res = await run(target, body, concurrency=concurrency, requests=requests, stream=stream)
        before = set(folder.glob("cg.out*"))
        await asyncio.to_thread(_control, "-d", proc.pid)
        total = await asyncio.to_thread(_dumped, folder, before)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
    if res.errors:
        raise RuntimeError(f"{res.errors} requests failed under callgrind")
    return total / (res.tokens if stream else res.requests)
