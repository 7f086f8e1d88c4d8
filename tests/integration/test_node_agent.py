"""The node agent (``neutrino node``) through its real HTTP API: discovery and health,
the token on every call, loads within its memory budget, engines as processes (a command
template running mock_ie on TCP; llama.cpp's engine and server on SmolLM2 where built),
failures with their reasons, unloads, and no engine outliving the agent."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.node import GGUF, NodeAgent, alive
from tests.support.procs import wait_for

pytestmark = pytest.mark.timeout(180)
MOCK = {"harness": "mock", "file": "mock.bin", "memory_mb": 100, "wait": True}


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeAgent]:
    node = NodeAgent(tmp_path_factory.mktemp("node"), "127.0.0.2", name="n1", budget="250M")
    (node.models_dir / "mock.bin").write_bytes(b"")
    node.add_model("smol.gguf")
    node.start()
    try:
        yield node
    finally:
        node.stop()


def test_every_call_needs_the_token(agent: NodeAgent) -> None:
    for path in ("/discovery", "/health", "/models", "/models/x/endpoint"):
        for token in ("", "wrong", agent.token + "x"):
            status, body = agent.call("GET", path, token=token)
            assert status == 401 and body["error"]["type"] == "unauthorized", (path, token)
    status, _ = agent.call("POST", "/models/load", {**MOCK, "model": "m"}, token="")
    assert status == 401 and "m" not in agent.models()
    assert agent.call("GET", "/livez", token="") == (200, {"status": "alive"})  # probes


def test_discovery_and_health_describe_the_host(agent: NodeAgent) -> None:
    status, d = agent.call("GET", "/discovery")
    assert status == 200
    assert d["node"] == "n1" and d["hostname"] == socket.gethostname()
    assert d["kernel"] == os.uname().release and d["cpu_cores"] >= 1
    assert d["memory_total_mb"] > 0 and d["memory_budget_mb"] == 250
    assert d["cpu_model"] and d["os"]
    gpu_here = Path("/proc/driver/nvidia/version").exists()
    assert bool(d["devices"]) == gpu_here  # the GPU path has its own test
    harnesses = {h["name"]: h for h in d["harnesses"]}
    assert {"llamacpp", "llama-server", "vllm", "mock"} <= set(harnesses)
    assert harnesses["mock"]["available"] and harnesses["mock"]["kind"] == "engine"
    assert harnesses["llama-server"]["kind"] == "http"
    status, h = agent.call("GET", "/health")
    assert status == 200 and h["uptime_s"] > 0
    memory = h["memory"]
    assert memory["budget_mb"] == 250 and memory["free_mb"] > 0 and memory["used_mb"] > 0
    assert len(h["load"]) == 3 and h["devices"] == ([] if not gpu_here else h["devices"])


def test_a_load_within_the_budget_runs_an_engine_and_an_unload_stops_it(agent: NodeAgent) -> None:
    status, entry = agent.call("POST", "/models/load", {**MOCK, "model": "m1"})
    assert status == 200 and entry["state"] == "loaded", entry
    pid = entry["pid"]
    assert alive(pid)
    status, where = agent.call("GET", "/models/m1/endpoint")
    assert status == 200 and where["kind"] == "engine"
    host, _, port = where["address"].rpartition(":")
    assert host == "127.0.0.2"
    socket.create_connection((host, int(port)), timeout=2).close()  # it listens there
    listed = agent.models()["m1"]
    assert listed["memory_used_mb"] > 10 and listed["harness"] == "mock"  # its measured RSS
    # A second model past the budget is refused, with what is taken.
    status, body = agent.call("POST", "/models/load", {**MOCK, "model": "m2", "memory_mb": 200})
    assert status == 409 and body["error"]["type"] == "insufficient_memory", body
    assert "250 MB budget" in body["error"]["message"]
    # Asking again for the loaded model is no second load.
    status, again = agent.call("POST", "/models/load", {**MOCK, "model": "m1"})
    assert status == 200 and again["pid"] == pid
    status, body = agent.call("POST", "/models/unload", {"model": "m1"})
    assert status == 200 and body["state"] == "unloaded"
    assert wait_for(lambda: not alive(pid), 5)
    status, body = agent.call("GET", "/models/m1/endpoint")
    assert status == 409 and body["error"]["type"] == "not_loaded"


def test_bad_loads_are_refused_clearly(agent: NodeAgent) -> None:
    cases = [
        ({**MOCK, "model": "../x"}, 400, "model must be an id"),
        ({**MOCK, "model": "x", "file": "../../etc/passwd"}, 400, "inside the models folder"),
        ({**MOCK, "model": "x", "file": "/etc/passwd"}, 400, "inside the models folder"),
        ({**MOCK, "model": "x", "file": "none.gguf"}, 404, "no file 'none.gguf'"),
        ({**MOCK, "model": "x", "harness": "nope"}, 400, "no harness 'nope'"),
        ({**MOCK, "model": "x", "memory_mb": -1}, 400, "memory_mb must be an integer"),
        ({**MOCK, "model": "x", "vram_mb": 1000}, 409, "this node has none"),
        ({**MOCK, "model": "x", "devices": [0]}, 400, "devices must be a list"),
        ({**MOCK, "model": "x", "colour": "red"}, 400, "unknown field 'colour'"),
        ({**MOCK, "model": "x", "harness": "vllm"}, 409, "vllm:"),
    ]
    for body, status, message in cases:
        got, answer = agent.call("POST", "/models/load", body)
        assert got == status and message in answer["error"]["message"], (body, answer)
    assert "x" not in agent.models()


def test_an_engine_that_fails_to_start_or_dies_leaves_its_reason(
    agent: NodeAgent, tmp_path: Path
) -> None:
    # mock_ie refuses a model spec whose context is not a number: the load fails, said.
    status, body = agent.call("POST", "/models/load", {**MOCK, "model": "bad:ctx"})
    assert status == 502 and body["error"]["type"] == "load_failed", body
    assert "exited with status 2" in body["error"]["message"]
    assert agent.models()["bad:ctx"]["state"] == "failed"
    status, entry = agent.call("POST", "/models/load", {**MOCK, "model": "m3"})
    assert status == 200
    os.kill(entry["pid"], signal.SIGKILL)
    assert wait_for(lambda: agent.models()["m3"]["state"] == "failed", 5)
    assert "exited with status -9" in agent.models()["m3"]["reason"]
    # Loaded again once asked: a failed model is no obstacle.
    status, entry = agent.call("POST", "/models/load", {**MOCK, "model": "m3"})
    assert status == 200 and entry["state"] == "loaded"
    agent.call("POST", "/models/unload", {"model": "m3"})


def test_no_engine_outlives_the_agent(tmp_path: Path) -> None:
    for how in (signal.SIGTERM, signal.SIGKILL):
        node = NodeAgent(tmp_path, "127.0.0.3", name=f"n-{how.name}", budget="1G")
        (node.models_dir / "mock.bin").write_bytes(b"")
        node.start()
        pids = []
        for model in ("a", "b"):
            status, entry = node.call("POST", "/models/load", {**MOCK, "model": model})
            assert status == 200, entry
            pids.append(entry["pid"])
        assert node.proc is not None
        node.proc.send_signal(how)
        node.proc.wait(30)
        assert wait_for(lambda p=pids: not any(alive(pid) for pid in p), 10), how  # type: ignore[misc]
        if how is signal.SIGTERM:
            assert node.proc.returncode == 0 and "node n-SIGTERM stopped" in node.log()


@pytest.mark.skipif(not GGUF.is_file(), reason=f"{GGUF} is missing (make install)")
@pytest.mark.parametrize("harness", ["llamacpp", "llama-server"])
def test_real_engines_load_smollm2(agent: NodeAgent, harness: str) -> None:
    pytest.importorskip("llama_cpp", reason="the llamacpp extra is not installed")
    body = {"model": f"smol-{harness}", "harness": harness, "file": "smol.gguf",
            "memory_mb": 150, "wait": True}  # fmt: skip
    t0 = time.monotonic()
    status, entry = agent.call("POST", "/models/load", body)
    assert status == 200 and entry["state"] == "loaded", (entry, agent.log()[-2000:])
    status, where = agent.call("GET", f"/models/smol-{harness}/endpoint")
    kind = "engine" if harness == "llamacpp" else "http"
    assert status == 200 and where["kind"] == kind
    assert agent.models()[f"smol-{harness}"]["memory_used_mb"] > 20
    agent.call("POST", "/models/unload", {"model": f"smol-{harness}"})
    assert time.monotonic() - t0 < 60
