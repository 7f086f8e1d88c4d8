"""The per-stage budget's server (``bench/stages.py``): every hook still names a function
the request path calls, so a renamed stage fails here rather than reading zero in
``make bench``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from bench.stages import REST, STAGES, budget
from tests.support.procs import REPO, MockIE, _env, free_port, wait_for

WARMUP, COUNT = 2, 6


def _chat(port: int, stream: bool) -> bytes:
    body = {"model": "qwen2.5-mock", "max_tokens": 5, "stream": stream, "ignore_eos": True,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        data: bytes = resp.read()
        return data


def _listed(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:
            return b"qwen2.5-mock" in r.read()
    except OSError:
        return False


def test_every_stage_is_reached_and_the_budget_adds_up(
    tmp_path: Path, mock_factory: Callable[..., MockIE]
) -> None:
    port, out = free_port(), tmp_path / "stages.json"
    argv = [sys.executable, "-m", "bench.stages", "serve", "time", str(WARMUP), str(COUNT),
            "0.5", str(out), "--", "--http-address", f"127.0.0.1:{port}", "--grpc-address",
            "127.0.0.1:0", "--quic-address", "", "--metrics-address", "127.0.0.1:0",
            "--engine", mock_factory().socket, "--log-level", "warning"]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=REPO, env=_env(), stderr=subprocess.PIPE)
    try:
        assert wait_for(lambda: _listed(port) or proc.poll() is not None, 30)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        for i in range(WARMUP + COUNT):
            answer = _chat(port, stream=i % 2 == 1)  # both kinds of answer in the measure
            assert b"assistant" in answer
        time.sleep(1)  # its idle phase, half a second, ends before the server does
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    report = json.loads(out.read_text())
    assert report["ends"] == WARMUP + COUNT
    assert 0.4 < report["idle_s"] < 0.9
    rows = budget(report, COUNT)
    for stage in STAGES:  # each stage's functions ran, in every measured request
        assert report["calls"][stage] >= COUNT, stage
        assert rows[stage]["us"] > 0, stage
    # The stages are timed by the wall clock: here, beside other tests, the server is not
    # alone on its core (make bench pins it), so only their order of size is checked.
    staged = sum(report["ns"][s] for s in STAGES)
    assert 0 < staged < 10 * report["cpu_ns"]
    assert rows[REST]["us"] >= 0
