"""Real node agents (``neutrino node``) for the fleet tests: a process on a loopback
address of its own with its own token, models folder and memory budget, and a small
client of its API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.procs import REPO, _env, free_port

GGUF = Path(sys.prefix) / "share" / "neutrino" / "gguf" / "SmolLM2-135M-Instruct.Q4_1.gguf"

# A command template that runs mock_ie as an engine on TCP (fast: no weights).
MOCK_HARNESS = """
[[harness]]
name = "mock"
kind = "engine"
command = ["python", "-m", "mocks.mock_ie", "--listen", "{host}:{port}",
           "--token-env", "{token_env}", "--model", "{model}:qwen2:4096",
           "--capacity", "{slots}"]
"""


def port_free_on(host: str) -> int:
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


class NodeAgent:
    def __init__(
        self,
        workdir: Path,
        host: str,
        *,
        name: str,
        budget: str = "",
        token: str = "node-token",
        extra_config: str = MOCK_HARNESS,
        args: tuple[str, ...] = (),
    ) -> None:
        self.workdir = workdir / name
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.port = port_free_on(host) if host != "127.0.0.1" else free_port()
        self.name = name
        self.token = token
        self.token_file = self.workdir / "token"
        self.token_file.write_text(token + "\n")
        self.models_dir = self.workdir / "models"
        self.models_dir.mkdir(exist_ok=True)
        self.budget = budget
        self.config = self.workdir / "node.toml"
        self.config.write_text(extra_config)
        self.args = list(args)
        self.log_path = self.workdir / "agent.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def add_model(self, file: str, target: Path = GGUF) -> None:
        """A model file in its folder (a link to ``target``)."""
        path = self.models_dir / file
        if not path.exists():
            os.symlink(target, path)

    def start(self, timeout: float = 30.0) -> NodeAgent:
        argv = [
            sys.executable, "-m", "neutrino", "node",
            "--address", f"{self.host}:{self.port}", "--token-file", str(self.token_file),
            "--models-dir", str(self.models_dir), "--name", self.name,
            "--config", str(self.config), "--threads", "1", *self.args,
        ]  # fmt: skip
        if self.budget:
            argv += ["--memory-budget", self.budget]
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child holds it
        self.proc = subprocess.Popen(argv, cwd=REPO, env=_env(), stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"node agent exited with {self.proc.returncode}: {self.log()}")
            try:
                if self.call("GET", "/health")[0] == 200:
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"node agent did not start: {self.log()}")
            time.sleep(0.05)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        token: str | None = None,
        timeout: float = 60,
    ) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.endpoint + path, data=data, method=method)
        if token is None:
            token = self.token
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def models(self) -> dict[str, dict[str, Any]]:
        status, body = self.call("GET", "/models")
        assert status == 200, body
        return {m["id"]: m for m in body["models"]}

    def kill(self) -> None:
        """SIGKILL: the agent dies without stopping anything itself."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False
