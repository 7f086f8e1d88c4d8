"""An engine that breaks the protocol harms only its own connection.

A rogue engine process (tests/support/rogue_engine.py) answers the hello, then meets a
query with a 16 GB frame header, bytes that are not framing, a frame whose pointer runs
outside it, results for an id never issued, results after the end, or no hello at all.
Neutrino refuses what it cannot read without buffering it, fails the requests on that
connection once (502), reconnects, ignores what belongs to no live request, and stays
up with its tasks and descriptors where they were.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.procs import REPO, NeutrinoProc

CHAT = json.dumps(
    {"model": "qwen2.5-mock", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
).encode()


@pytest.fixture
def rogue(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(mode: str) -> str:
        path = str(tmp_path / f"rogue-{mode}.sock")
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        argv = [sys.executable, "-m", "tests.support.rogue_engine", "--socket", path]
        procs.append(subprocess.Popen([*argv, "--mode", mode], cwd=REPO, env=env))
        deadline = time.monotonic() + 20
        while not os.path.exists(path):
            assert time.monotonic() < deadline, "the rogue engine did not start"
            time.sleep(0.02)
        return path

    yield start
    for p in procs:
        p.terminate()
        p.wait(10)


def post(server: NeutrinoProc) -> tuple[int, dict[str, Any]]:
    status, body = server.post_json("/v1/chat/completions", CHAT)
    return status, body


def figures(server: NeutrinoProc) -> tuple[int, int]:
    p = server.get_json("/neutrino/v1/app_state")["process"]
    return p["tasks"], p["open_fds"]


def config(sock: str, extra: str = "") -> str:
    return f"""
[[engines]]
socket = "{sock}"
connections = 1
[engine_link]
backoff_initial_s = 0.05
backoff_max_s = 0.2
connect_timeout_s = 0.5
{extra}
"""


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("huge-prefix", "exceeds the"),
        ("garbage", "invalid stream"),
        ("bad-pointer", "malformed frame"),
    ],
)
def test_unreadable_engine_output_drops_only_that_connection(
    rogue: Callable[[str], str],
    neutrino_factory: Callable[..., NeutrinoProc],
    mode: str,
    says: str,
) -> None:
    server = neutrino_factory(config=config(rogue(mode)))
    baseline = figures(server)
    for _ in range(5):  # each query breaks the connection again; each time it comes back
        status, body = post(server)
        assert status == 502 and body["error"]["code"] == "engine_disconnected", body
        deadline = time.monotonic() + 10
        while server.status_code() != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert says in server.log()
    assert "Traceback" not in server.log_path.read_text()
    time.sleep(0.3)
    tasks, fds = figures(server)
    assert tasks <= baseline[0] and fds <= baseline[1]
    assert server.proc is not None and server.proc.poll() is None


@pytest.mark.parametrize("mode", ["unknown-id", "late-frame"])
def test_frames_for_no_live_request_are_ignored(
    rogue: Callable[[str], str], neutrino_factory: Callable[..., NeutrinoProc], mode: str
) -> None:
    server = neutrino_factory(config=config(rogue(mode)))
    for _ in range(5):
        status, body = post(server)
        assert status == 200, body
        assert body["usage"]["completion_tokens"] == 4
    assert server.get_json("/neutrino/v1/app_state")["engines"][0]["reconnects"] == 0


def test_an_engine_that_never_says_hello_is_not_served(
    rogue: Callable[[str], str], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    server = neutrino_factory(config=config(rogue("no-handshake")), wait_engine=False)
    time.sleep(1.5)  # a few connect attempts, each given up after 0.5 s
    baseline = figures(server)
    status, body = post(server)
    assert status == 503 and body["error"]["code"] == "no_engine"
    time.sleep(2.0)  # more attempts: nothing may pile up
    tasks, fds = figures(server)
    assert tasks <= baseline[0] + 1 and fds <= baseline[1] + 1
    assert server.status_code() == 503
