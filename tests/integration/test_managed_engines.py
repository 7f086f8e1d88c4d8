"""Managed engine processes (``[[engines]] command``), with real mock_ie processes started
by a real Neutrino: readiness, log forwarding, app_state and metrics, a reload that
removes one, a command that never becomes ready, shutdown."""

from __future__ import annotations

import json
import os
import re
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.procs import NeutrinoProc, free_port, wait_for


def _mock(name: str, model: str) -> str:
    command = ["python", "-m", "mocks.mock_ie", "--model", model, "--capacity", "8"]
    return f'[[engines]]\nname = "{name}"\ncommand = {json.dumps(command)}\n'


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def _managed(server: NeutrinoProc) -> dict[str, dict[str, Any]]:
    state = server.get_json("/neutrino/v1/app_state")
    return {e["name"]: e for e in state.get("managed_engines", [])}


def _chat(server: NeutrinoProc, model: str) -> int:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    status, _ = server.post_json("/v1/chat/completions", json.dumps(body).encode())
    return status


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return str(r.read().decode())


def test_managed_engines_run_report_reload_and_stop(tmp_path: Path) -> None:
    config = _mock("alpha", "qwen2.5-mock") + _mock("beta", "llama3.2-mock")
    metrics_port = free_port()
    server = NeutrinoProc(
        tmp_path, "--metrics-address", f"127.0.0.1:{metrics_port}", config=config
    ).start(timeout=60)
    try:
        assert wait_for(lambda: all(e["state"] == "ready" for e in _managed(server).values()))
        engines = _managed(server)
        assert set(engines) == {"alpha", "beta"}
        pids = {name: e["pid"] for name, e in engines.items()}
        assert all(_alive(pid) for pid in pids.values())
        # Each engine's own output is in Neutrino's log, under its name and pid.
        assert wait_for(
            lambda: f"[beta {pids['beta']}] mock_ie ready" in server.log_path.read_text()
        )
        text = _metrics(metrics_port)
        assert 'neutrino_engine_process_state{engine="alpha",state="ready"} 1.0' in text
        assert f'neutrino_engine_process_pid{{engine="beta"}} {float(pids["beta"])}' in text
        assert 'neutrino_engine_process_restarts_total{engine="alpha"} 0.0' in text
        assert _chat(server, "llama3.2-mock") == 200
        # A reload without beta: beta stops (its requests had ended), alpha keeps running.
        (tmp_path / f"neutrino-{server.port}.toml").write_text(_mock("alpha", "qwen2.5-mock"))
        status, body = server.post_json("/neutrino/v1/reload", b"{}")
        assert status == 200, body
        assert wait_for(lambda: not _alive(pids["beta"]), 15)
        assert set(_managed(server)) == {"alpha"}
        assert _managed(server)["alpha"]["pid"] == pids["alpha"]
    finally:
        assert server.stop() == 0
    assert not _alive(pids["alpha"])  # stopped with Neutrino


def test_an_engine_never_ready_is_killed_and_started_again(tmp_path: Path) -> None:
    config = (
        _mock("good", "qwen2.5-mock")
        + '[[engines]]\nname = "stuck"\nready_timeout_s = 0.5\n'
        + 'command = ["python", "-c", "import time, sys; print(sys.argv); time.sleep(60)", '
        + '"{socket}"]\n'
    )
    server = NeutrinoProc(tmp_path, config=config).start(timeout=60)
    try:
        stuck = _managed(server)["stuck"]
        first, restarts = stuck["pid"], stuck["restarts"]
        assert wait_for(lambda: _managed(server)["stuck"]["restarts"] > restarts, 15), server.log()
        assert first is None or not _alive(first)
        assert "engine stuck" in server.log_path.read_text()
        assert "not ready within 0.5s; killing it" in server.log_path.read_text()
        # The socket was given through {socket}, not appended.
        assert re.search(r"\[stuck \d+\] \['-c', '/.*stuck\.sock'\]", server.log_path.read_text())
        assert _chat(server, "qwen2.5-mock") == 200
    finally:
        server.stop()


def test_a_reload_that_changes_a_command_replaces_the_process(tmp_path: Path) -> None:
    server = NeutrinoProc(tmp_path, config=_mock("alpha", "qwen2.5-mock")).start(timeout=60)
    try:
        assert wait_for(lambda: _managed(server)["alpha"]["state"] == "ready")
        old = _managed(server)["alpha"]
        changed = _mock("alpha", "qwen2.5-mock").replace('"8"]', '"9"]')
        (tmp_path / f"neutrino-{server.port}.toml").write_text(changed)
        status, body = server.post_json("/neutrino/v1/reload", b"{}")
        assert status == 200, body
        new = _managed(server)["alpha"]
        assert new["pid"] != old["pid"] and new["socket"] != old["socket"]
        assert wait_for(lambda: not _alive(old["pid"]), 15)
        assert _chat(server, "qwen2.5-mock") == 200
        assert server.get_json("/neutrino/v1/app_state")["engines"][0]["capacity"] == 9
    finally:
        server.stop()
