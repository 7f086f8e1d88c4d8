"""llama.cpp's own HTTP server (``llama-server``, built by ``make llama-server``) as a
real upstream for the HTTP-upstream tests, on the SmolLM2 GGUF that ``make install``
keeps in the venv."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.procs import free_port

BINARY = Path(sys.prefix) / "bin" / "llama-server"
GGUF = Path(sys.prefix) / "share" / "neutrino" / "gguf" / "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = "smollm2-135m-instruct"

MISSING = (
    f"{BINARY} is missing (make llama-server)"
    if not BINARY.is_file()
    else f"{GGUF} is missing (make install)"
    if not GGUF.is_file()
    else ""
)


class LlamaServer:
    """One ``llama-server`` process serving SmolLM2 as ``MODEL`` on a free port (or the
    given one: a test restarts it where Neutrino expects it); or, given ``models_dir``,
    in router mode: a process per loaded model of that folder, at most ``models_max`` at
    once, loaded only when asked (``POST /models/load``)."""

    def __init__(
        self,
        workdir: Path,
        *,
        port: int = 0,
        slots: int = 4,
        ctx: int = 1024,
        models_dir: Path | None = None,
        models_max: int = 1,
    ) -> None:
        self.port = port or free_port()
        self.slots = slots
        self.ctx = ctx
        self.models_dir = models_dir
        self.models_max = models_max
        self.log_path = workdir / f"llama-server-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    health = "/health"  # answers 200 once the server serves

    def argv(self) -> list[str]:
        served = (
            ["-m", str(GGUF), "--alias", MODEL]
            if self.models_dir is None
            else ["--models-dir", str(self.models_dir), "--models-max", str(self.models_max),
                  "--no-models-autoload"]
        )  # fmt: skip
        argv = [
            str(BINARY), *served,
            "--host", "127.0.0.1", "--port", str(self.port),
            "-c", str(self.ctx * self.slots), "-np", str(self.slots), "-t", "1",
            "--slots", "--no-webui",
        ]  # fmt: skip
        return argv

    def start(self, timeout: float = 60.0) -> LlamaServer:
        argv = self.argv()
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child holds it
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + timeout
        while self.status(self.health) != 200:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{argv[0]} exited with {self.proc.returncode}: {self.log()}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"{argv[0]} did not become ready: {self.log()}")
            time.sleep(0.1)
        return self

    def status(self, path: str) -> int | None:
        try:
            with urllib.request.urlopen(self.url + path, timeout=2) as r:
                code: int = r.status
                return code
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return None

    def get_json(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read())

    def busy_slots(self) -> int:
        """Slots generating now (llama-server's ``/slots``)."""
        return sum(1 for s in self.get_json("/slots") if s.get("is_processing"))

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def kill(self) -> None:
        """Killed at once (SIGKILL): what an upstream's crash looks like to its clients."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def states(self) -> dict[str, str]:
        """Router mode: each model's state as the server lists it."""
        return {m["id"]: m["status"]["value"] for m in self.get_json("/models")["data"]}


class PythonLlamaServer(LlamaServer):
    """llama-cpp-python's own OpenAI server (``python -m llama_cpp.server``) on the same
    GGUF as ``MODEL``: one request at a time, no token-id API (a passthrough upstream)."""

    health = "/v1/models"

    def argv(self) -> list[str]:
        return [
            sys.executable, "-m", "llama_cpp.server", "--model", str(GGUF),
            "--model_alias", MODEL, "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", str(self.ctx), "--n_threads", "1",
            # By default it ends a running stream when any other request arrives, a
            # health read included (Neutrino reads /v1/models every refresh_s).
            "--interrupt_requests", "False",
        ]  # fmt: skip
