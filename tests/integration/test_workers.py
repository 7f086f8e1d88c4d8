"""``--workers 2`` with real processes: a supervisor, two workers and the embedded mock.

The workers share the HTTP, gRPC and metrics ports (the supervisor chose the ports given
as 0), requests land on both, a worker killed with SIGKILL is started again while the
other serves, a scrape on either gives every worker's metrics merged (a dead worker's
counts included), and SIGTERM stops everything with status 0.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest

from neutrino.v1 import inference_pb2, inference_pb2_grpc
from tests.support.procs import NeutrinoProc, run_neutrino, wait_for

MODEL = "qwen2.5-mock"
BODY = json.dumps(
    {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
).encode()


def chat(server: NeutrinoProc, tries: int = 1) -> bool:
    """One chat completion on a new connection; with ``tries``, connection errors (a
    worker just killed) are tried again. True when it got a 200."""
    for _ in range(tries):
        try:
            status, _ = server.post_json("/v1/chat/completions", BODY)
            return bool(status == 200)
        except (OSError, urllib.error.URLError):
            time.sleep(0.05)
    return False


def grpc_chat(address: str, stream: bool = False) -> str:
    request = inference_pb2.GenerateRequest(
        model=MODEL,
        chat=inference_pb2.Chat(messages=[inference_pb2.ChatMessage(role="user", content="Hi")]),
        max_tokens=4,
    )
    with grpc.insecure_channel(address) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)
        if stream:
            return "".join(c.delta for c in stub.GenerateStream(request, timeout=10))
        return str(stub.Generate(request, timeout=10).text)


def workers(server: NeutrinoProc) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = server.get_json("/neutrino/v1/app_state")["workers"]
    return listed


def requests_total(metrics: str) -> float:
    """neutrino_requests_total summed over its series, from one scrape."""
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("neutrino_requests_total{")
    )


def whole_log(server: NeutrinoProc) -> str:
    try:
        return server.log_path.read_text()
    except FileNotFoundError:  # not started yet
        return ""


def listeners(server: NeutrinoProc) -> tuple[int, dict[str, str]]:
    """The supervisor's pid and the addresses it chose, from its log line."""
    line = re.compile(r"supervisor \(pid (\d+)\) starting 2 workers: (.+)")
    assert wait_for(lambda: line.search(whole_log(server)) is not None), server.log()
    found = line.search(whole_log(server))
    assert found is not None
    pairs = (item.split(" on ") for item in found.group(2).split(", "))
    return int(found.group(1)), dict(pairs)


def children(pid: int) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            fields = (proc / "stat").read_text().rpartition(")")[2].split()
        except (OSError, NotADirectoryError):
            continue
        if fields[1] == str(pid) and fields[0] != "Z":
            found.append(int(proc.name))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def both_up(server: NeutrinoProc) -> bool:
    listed = workers(server)
    return len(listed) == 2 and all(w.get("connections", 0) > 0 for w in listed)


def test_two_workers_serve_survive_a_kill_and_merge_metrics(tmp_path: Path) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    server = NeutrinoProc(tmp_path, "--workers", "2", env={"TMPDIR": str(tmpdir)})
    try:
        server.start()
        supervisor, addresses = listeners(server)
        assert addresses["HTTP"] == f"127.0.0.1:{server.port}"
        assert not addresses["gRPC"].endswith(":0") and not addresses["metrics"].endswith(":0")
        assert wait_for(lambda: both_up(server)), server.log()
        private_folder(supervisor)

        # HTTP and gRPC, each request on a new connection: both workers take some.
        assert all(chat(server) for _ in range(30))
        assert grpc_chat(addresses["gRPC"]) and grpc_chat(addresses["gRPC"], stream=True)
        done = 32
        first = workers(server)
        assert [w["requests"]["started"] > 0 for w in first] == [True, True], first
        assert sum(w["requests"]["started"] for w in first) == done
        # Every scrape (on either worker) merges both.
        assert [requests_total(addresses["metrics"]) for _ in range(5)] == [done] * 5

        # SIGKILL one: the other serves meanwhile, the supervisor starts it again.
        victim = first[1]["pid"]
        os.kill(victim, signal.SIGKILL)
        assert all(chat(server, tries=50) for _ in range(10))
        done += 10
        assert wait_for(lambda: both_up(server) and workers(server)[1]["pid"] != victim)
        again = workers(server)[1]
        assert again["restarts"] == 1 and again["pid"] in children(supervisor)
        assert all(chat(server) for _ in range(30))
        done += 30
        assert workers(server)[1]["requests"]["started"] > 0  # the new one serves too
        # The dead worker's counts stay in the merged metrics.
        assert [requests_total(addresses["metrics"]) for _ in range(5)] == [done] * 5

        # SIGTERM: every worker drains and exits, then the supervisor, with status 0.
        pids = [supervisor, *children(supervisor)]
        assert len(pids) == 4  # the supervisor, two workers and the embedded mock_ie
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(15) == 0, server.log()
        assert wait_for(lambda: not any(alive(p) for p in pids), 5)
        assert list(tmpdir.iterdir()) == []  # its folders and the mock's are removed
    finally:
        server.stop()


def private_folder(supervisor: int) -> None:
    """The workers' sockets: 0600, in a 0700 folder (named on the workers' command line)."""
    folders = set()
    for pid in children(supervisor):
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        folders |= {argv[i + 1].decode() for i, a in enumerate(argv) if a == b"--worker-dir"}
    (folder,) = map(Path, folders)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    socks = list(folder.glob("worker-*.sock"))
    assert len(socks) == 2
    assert all(stat.S_IMODE(sock.stat().st_mode) == 0o600 for sock in socks)


def test_reload_reaches_every_worker(tmp_path: Path) -> None:
    """SIGHUP to the supervisor, or POST /neutrino/v1/reload to any worker: every worker
    reloads. A SIGHUP while the workers start does not end them."""
    server = NeutrinoProc(tmp_path, "--workers", "2")
    starting = threading.Thread(target=server.start)
    try:
        starting.start()
        assert wait_for(lambda: "worker 1 started" in whole_log(server), 20)
        supervisor, _ = listeners(server)
        os.kill(supervisor, signal.SIGHUP)  # the workers are still importing
        starting.join(30)
        assert wait_for(lambda: both_up(server)), server.log()
        assert [w["restarts"] for w in workers(server)] == [0, 0], server.log()

        def reloads() -> int:
            return whole_log(server).count("configuration reloaded")

        before = reloads()
        os.kill(supervisor, signal.SIGHUP)
        assert wait_for(lambda: reloads() == before + 2), server.log()
        status, answer = server.post_json("/neutrino/v1/reload", b"")
        assert status == 200 and answer["every_worker"] is True, answer
        # The worker reached reloads, then the supervisor has both reload.
        assert wait_for(lambda: reloads() == before + 5), server.log()
        assert [w["restarts"] for w in workers(server)] == [0, 0]
    finally:
        starting.join(40)  # start() ends within its own timeout; then stop() finds the process
        server.stop()


@pytest.fixture
def tmpdir_(tmp_path: Path) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    return folder


def test_workers_that_keep_failing_at_start_end_the_supervisor(tmpdir_: Path) -> None:
    config = tmpdir_.parent / "bad.toml"
    config.write_text('[model]\ndefault_family = "nonexistent"\n')
    run = run_neutrino(
        tmpdir_,
        *("--workers", "2", "--config", str(config), "--http-address", "127.0.0.1:0"),
        *("--grpc-address", "127.0.0.1:0", "--metrics-address", "127.0.0.1:0"),
    )
    assert run.returncode == 1, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("neutrino: workers keep exiting soon after they start (worker ")
    assert "with status 2" in last and "3 times in a row" in last
    assert "unknown default family 'nonexistent'" in run.stderr  # the workers' own words
    assert "Traceback" not in run.stderr
    assert list(tmpdir_.iterdir()) == []


def test_a_taken_port_is_one_line_and_leaves_nothing(tmpdir_: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = run_neutrino(
            tmpdir_,
            *("--workers", "2", "--http-address", "127.0.0.1:0"),
            *("--grpc-address", f"127.0.0.1:{port}", "--metrics-address", "127.0.0.1:0"),
        )
    assert run.returncode == 1, run.stderr
    assert run.stderr.strip().splitlines() == [
        f"neutrino: cannot listen for gRPC on 127.0.0.1:{port}: address already in use "
        "(set [grpc] address, --grpc-address, or [grpc] enabled = false)"
    ]
    assert list(tmpdir_.iterdir()) == []  # no workers' folder, no mock started
