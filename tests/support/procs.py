"""Real processes for integration tests: mock_ie engines and Neutrino servers."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mocks.mock_ie.events import read_events

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def free_udp_port() -> int:
    """A port free for UDP now (HTTP/3 listens there), from the kernel's own choice."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(pred: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``pred`` until it holds (True) or ``timeout`` passes (its last answer)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("NEUTRINO_CFG", None)
    return env


def run_neutrino(
    tmpdir: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """Run ``neutrino`` to its exit (a start meant to fail), its temporary folders (the
    embedded mock's) under ``tmpdir``; stdout and stderr are text. A server that starts
    instead is killed after ``timeout`` (subprocess.TimeoutExpired)."""
    environ = {**_env(), "TMPDIR": str(tmpdir), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "neutrino", "--quic-address", "", *args],  # HTTP/3 off unless asked
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class MockIE:
    """A real ``mock_ie`` process on a UNIX socket, with an event log."""

    def __init__(
        self, workdir: Path, *args: str, name: str = "mock", listen: str = "", token_file: str = ""
    ) -> None:
        self.workdir = workdir
        self.socket = str(workdir / f"{name}.sock")
        # On TCP instead (HOST:PORT), its hello asking for the token of ``token_file``.
        self.listen = listen
        self.token_file = token_file
        self.events_path = workdir / f"{name}.events.jsonl"
        self.args = list(args)
        self.proc: subprocess.Popen[bytes] | None = None

    def _listening(self) -> bool:
        if not self.listen:
            return os.path.exists(self.socket)
        host, _, port = self.listen.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=0.2).close()
        except OSError:
            return False
        return True

    def start(self, timeout: float = 20.0) -> MockIE:
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        where = (
            ["--listen", self.listen, "--token-file", self.token_file]
            if self.listen
            else ["--socket", self.socket]
        )
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mocks.mock_ie",
                *where,
                "--events",
                str(self.events_path),
                *self.args,
            ],
            cwd=REPO,
            env=_env(),
        )
        deadline = time.monotonic() + timeout
        while not self._listening():
            if self.proc.poll() is not None:
                raise RuntimeError(f"mock_ie exited with {self.proc.returncode}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError("mock_ie did not start")
            time.sleep(0.02)
        return self

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Its complete events (a line still being written is not one yet)."""
        return [e for e in read_events(self.events_path) if kind is None or e["event"] == kind]

    def wait_event(self, kind: str, count: int = 1, timeout: float = 5.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            evs = self.events(kind)
            if len(evs) >= count or time.monotonic() > deadline:
                return evs
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL: the engine dies without closing anything gracefully."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class NeutrinoProc:
    """A real Neutrino server process."""

    def __init__(
        self,
        workdir: Path,
        *args: str,
        config: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.args = list(args)
        self.config = config
        self.env = env or {}  # added to the environment (TMPDIR: where its folders go)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / f"neutrino-{self.port}.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0, wait_engine: bool = True) -> NeutrinoProc:
        argv = [
            sys.executable,
            "-m",
            "neutrino",
            "--http-address",
            f"127.0.0.1:{self.port}",
            "--log-level",
            "info",
            "--grpc-address",  # a free port each; a test may pass its own after this
            "127.0.0.1:0",
            "--metrics-address",
            "127.0.0.1:0",
            "--quic-address",  # HTTP/3 off; a test that wants it passes 127.0.0.1:0 after this
            "",
            *self.args,
        ]
        if self.config is not None:
            cfg = self.workdir / f"neutrino-{self.port}.toml"
            cfg.write_text(self.config)
            argv += ["--config", str(cfg)]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            argv,
            cwd=REPO,
            env={**_env(), **self.env},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a group of its own: stop(group=True) signals it all
        )
        deadline = time.monotonic() + timeout
        want = 200 if wait_engine else None
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"neutrino exited with {self.proc.returncode}: {self.log()}")
            status = self.status_code()
            if status is not None and (want is None or status == want):
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"neutrino did not become ready: {self.log()}")
            time.sleep(0.05)

    def quic_port(self) -> int:
        """The UDP port HTTP/3 listens on (from the start-up log: ``--quic-address
        127.0.0.1:0`` picks a free one)."""
        for line in self.log_path.read_text(errors="replace").splitlines():
            _, found, rest = line.partition("Neutrino HTTP/3 listening on udp ")
            if found:
                return int(rest.rpartition(":")[2])
        raise AssertionError(f"HTTP/3 is not listening: {self.log()}")

    def status_code(self) -> int | None:
        try:
            with urllib.request.urlopen(self.base_url + "/neutrino/v1/status", timeout=2) as r:
                code: int = r.status
                return code
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return None

    def get_json(self, path: str) -> Any:
        with urllib.request.urlopen(self.base_url + path, timeout=10) as r:
            return json.loads(r.read())

    def post_json(self, path: str, body: bytes) -> tuple[int, Any]:
        """POST a JSON body: the status and the decoded answer (errors included)."""
        req = urllib.request.Request(
            self.base_url + path, data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def history(self, limit: int = 100) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = self.get_json(f"/neutrino/v1/history?limit={limit}")["data"]
        return data

    def log(self) -> str:
        try:
            return self.log_path.read_text()[-4000:]
        except OSError:
            return ""

    def stop(self, *, group: bool = False) -> int | None:
        """SIGTERM, to the process or (``group``) to its process group, as a terminal's
        Ctrl-C or a signal to ``make run`` reaches it; its exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            if group:
                os.killpg(self.proc.pid, signal.SIGTERM)
            else:
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        return self.proc.returncode


@contextmanager
def serving(mock: MockIE, server: NeutrinoProc) -> Iterator[NeutrinoProc]:
    """Start ``server`` (in front of the started ``mock``); stop both afterwards, also when
    the server fails to start."""
    try:
        yield server.start()
    finally:
        server.stop()
        mock.stop()
