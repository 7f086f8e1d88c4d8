"""Harnesses: the inference engines a node agent can run, one process per model.

A harness is a small class: ``start`` and ``stop`` (of the harness: every process it
runs), ``health`` (each of its models' process alive or not), ``list``, ``load`` (start
the model's engine and wait for it to be ready), ``unload`` and ``endpoint`` (where the
front server reaches the model). Subclasses say only how their engine is started
(``argv``), how it tells it is ready, and how it is reached:

- ``llamacpp``: our llama.cpp engine (``python -m neutrino.engines.llamacpp``), the engine
  protocol on TCP with the node's token in the hello;
- ``llama-server``: llama.cpp's own server, an OpenAI HTTP upstream in token mode, the
  token as its API key;
- ``vllm``: our vLLM engine (``python -m neutrino.engines.vllm``), the engine protocol;
- a command template (``[[harness]]``) for any other engine, of either kind.

Engines listen on the agent's own address; the devices a model is placed on are the only
ones its engine sees (``CUDA_VISIBLE_DEVICES``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from neutrino.node.config import CommandHarness, NodeConfig
from neutrino.node.process import EngineProcess, LoadFailed

TOKEN_ENV = "NEUTRINO_ENGINE_TOKEN"  # the engines read the node's token from here


@dataclass(frozen=True, slots=True)
class LoadSpec:
    """One model to load, as the front server asked (checked by the agent's routes)."""

    model: str
    harness: str
    file: Path  # inside the models folder
    quant: str = ""
    tensor_parallel: int = 1
    devices: tuple[int, ...] = ()
    memory_mb: int = 0  # host memory it is expected to take (the budget's reservation)
    vram_mb: int = 0  # GPU memory, over its devices
    context_length: int = 0  # 0: the node's default
    slots: int = 0  # 0: the node's default


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a loaded model is reached: the engine protocol on TCP (``address``), or an
    OpenAI HTTP server in token mode (``url``). Both ask for the node's token."""

    kind: str  # "engine" or "http"
    address: str = ""  # HOST:PORT
    url: str = ""  # http://HOST:PORT/v1

    def to_dict(self) -> dict[str, str]:
        if self.kind == "engine":
            return {"kind": "engine", "address": self.address, "protocol": "ie.capnp"}
        return {"kind": "http", "url": self.url, "mode": "tokens"}


def free_port(host: str) -> int:
    """A port free on ``host`` now (the engine binds it a moment later)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Running:
    """A model's engine process and where it listens."""

    def __init__(self, spec: LoadSpec, process: EngineProcess, port: int) -> None:
        self.spec = spec
        self.process = process
        self.port = port


class Harness:
    name = ""
    kind = "engine"  # how its models are reached: "engine" or "http"

    def __init__(self, cfg: NodeConfig) -> None:
        self.cfg = cfg
        self.running: dict[str, Running] = {}
        self._http: aiohttp.ClientSession | None = None

    # ------------------------------------------------------------------ what subclasses say

    def missing(self) -> str:
        """Why this harness cannot run here ("" when it can)."""
        return ""

    def argv(self, spec: LoadSpec, host: str, port: int) -> list[str]:
        raise NotImplementedError

    def env(self, spec: LoadSpec) -> dict[str, str]:
        return {TOKEN_ENV: self.cfg.token}

    ready_path = "/health"  # http engines: ready once this answers 200

    # ------------------------------------------------------------------ the interface

    async def start(self) -> None:
        """Ready to load models (nothing runs until one is loaded)."""

    async def stop(self) -> None:
        """Stop every engine it runs."""
        await asyncio.gather(*(self.unload(model) for model in list(self.running)))
        if self._http is not None:
            await self._http.close()
            self._http = None

    def list(self) -> list[str]:
        return sorted(self.running)

    def health(self) -> dict[str, bool]:
        """Each model's engine: alive or not."""
        return {m: r.process.returncode is None for m, r in self.running.items()}

    async def load(
        self, spec: LoadSpec, on_exit: Callable[[EngineProcess], None] | None = None
    ) -> Running:
        """Start ``spec``'s engine and return once it is ready (LoadFailed if not)."""
        host = self.cfg.host if self.cfg.host not in ("0.0.0.0", "::") else "127.0.0.1"
        port = free_port(host)
        bind = self.cfg.host or "127.0.0.1"
        env = self.env(spec)
        devices = ",".join(str(d) for d in spec.devices)
        env["CUDA_VISIBLE_DEVICES"] = devices  # "" for a CPU model: it sees none
        process = EngineProcess(spec.model, self.argv(spec, bind, port), env, on_exit)
        running = Running(spec, process, port)
        self.running[spec.model] = running
        try:
            await process.start()
            await process.wait_ready(lambda: self._ready(host, port), self.cfg.ready_timeout_s)
        except BaseException:
            self.running.pop(spec.model, None)
            await process.stop(self.cfg.stop_timeout_s)
            raise
        return running

    async def unload(self, model: str) -> None:
        running = self.running.pop(model, None)
        if running is not None:
            await running.process.stop(self.cfg.stop_timeout_s)

    def endpoint(self, model: str) -> Endpoint | None:
        running = self.running.get(model)
        if running is None:
            return None
        where = _hostport(self.cfg.advertised, running.port)
        if self.kind == "engine":
            return Endpoint("engine", address=where)
        return Endpoint("http", url=f"http://{where}/v1")

    # ------------------------------------------------------------------ readiness

    async def _ready(self, host: str, port: int) -> bool:
        if self.kind == "engine":  # our engines listen once their model is loaded
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 1.0)
            except (OSError, TimeoutError):
                return False
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return True
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2.0))
        try:
            async with self._http.get(f"http://{_hostport(host, port)}{self.ready_path}") as r:
                return r.status == 200
        except (aiohttp.ClientError, TimeoutError, OSError):
            return False


class LlamaCppHarness(Harness):
    """Our llama.cpp engine, one process per GGUF file."""

    name = "llamacpp"

    def missing(self) -> str:
        if importlib.util.find_spec("llama_cpp") is None:
            return "llama-cpp-python is not installed (the llamacpp extra)"
        return ""

    def argv(self, spec: LoadSpec, host: str, port: int) -> list[str]:
        cfg = self.cfg
        return [
            sys.executable, "-m", "neutrino.engines.llamacpp",
            "--listen", _hostport(host, port), "--token-env", TOKEN_ENV,
            "--gguf", str(spec.file), "--model", spec.model,
            "--slots", str(spec.slots or cfg.slots), "--threads", str(cfg.threads),
            "--ctx", str(spec.context_length or cfg.context_length),
            "--gpu-layers", "999" if spec.devices else "0",
        ]  # fmt: skip


class LlamaServerHarness(Harness):
    """llama.cpp's own ``llama-server``, one process per model, in token mode."""

    name = "llama-server"
    kind = "http"

    def binary(self) -> str:
        if self.cfg.llama_server:
            return self.cfg.llama_server
        beside = Path(sys.prefix) / "bin" / "llama-server"
        return str(beside) if beside.is_file() else (shutil.which("llama-server") or "")

    def missing(self) -> str:
        binary = self.binary()
        return "" if binary and Path(binary).is_file() else "no llama-server binary found"

    def env(self, spec: LoadSpec) -> dict[str, str]:
        return {"LLAMA_API_KEY": self.cfg.token}  # its --api-key, kept off the command line

    def argv(self, spec: LoadSpec, host: str, port: int) -> list[str]:
        slots = spec.slots or self.cfg.slots
        ctx = spec.context_length or self.cfg.context_length
        return [
            self.binary(), "-m", str(spec.file), "--alias", spec.model,
            "--host", host, "--port", str(port),
            "-c", str(ctx * slots), "-np", str(slots), "-t", str(self.cfg.threads),
            "-ngl", "999" if spec.devices else "0", "--no-webui",
        ]  # fmt: skip


class VllmHarness(Harness):
    """Our vLLM engine, one process per model folder."""

    name = "vllm"
    _found: str | None = None

    def python(self) -> str:
        return self.cfg.vllm_python or sys.executable

    def missing(self) -> str:
        if self._found is None:
            try:
                probe = "import importlib.util as u; print(bool(u.find_spec('vllm')))"
                done = subprocess.run(
                    [self.python(), "-c", probe], capture_output=True, text=True, timeout=30
                )
                self._found = "" if done.stdout.strip() == "True" else "vLLM is not installed"
            except (OSError, subprocess.TimeoutExpired) as exc:
                self._found = f"cannot run {self.python()!r}: {exc}"
        return self._found

    def env(self, spec: LoadSpec) -> dict[str, str]:
        # Our engine's package, for a Python of its own (vLLM's pins are not ours).
        root = str(Path(__file__).resolve().parents[2])
        return {**super().env(spec), "PYTHONPATH": root}

    def argv(self, spec: LoadSpec, host: str, port: int) -> list[str]:
        return [
            self.python(), "-m", "neutrino.engines.vllm",
            "--listen", _hostport(host, port), "--token-env", TOKEN_ENV,
            "--model-dir", str(spec.file), "--served-name", spec.model,
            "--max-model-len", str(spec.context_length or self.cfg.context_length),
            "--max-num-seqs", str(spec.slots or self.cfg.slots),
        ]  # fmt: skip


class CommandTemplateHarness(Harness):
    """Any other engine, from a ``[[harness]]`` command template."""

    def __init__(self, cfg: NodeConfig, template: CommandHarness) -> None:
        super().__init__(cfg)
        self.template = template
        self.name = template.name
        self.kind = template.kind
        self.ready_path = template.ready_path

    def missing(self) -> str:
        first = self.template.command[0]
        if first in ("python", "python3") or shutil.which(first) or Path(first).is_file():
            return ""
        return f"{first!r} is not found"

    def env(self, spec: LoadSpec) -> dict[str, str]:
        return {**super().env(spec), **self.template.env}

    def argv(self, spec: LoadSpec, host: str, port: int) -> list[str]:
        values = {
            "file": str(spec.file), "model": spec.model, "host": host, "port": str(port),
            "ctx": str(spec.context_length or self.cfg.context_length),
            "slots": str(spec.slots or self.cfg.slots), "quant": spec.quant,
            "tp": str(spec.tensor_parallel), "devices": ",".join(map(str, spec.devices)),
            "token_env": TOKEN_ENV,
        }  # fmt: skip
        argv = [_fill(a, values) for a in self.template.command]
        if argv[0] in ("python", "python3"):
            argv[0] = sys.executable
        return argv


def _fill(arg: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        arg = arg.replace("{" + key + "}", value)
    return arg


def harnesses(cfg: NodeConfig) -> dict[str, Harness]:
    """Every harness this agent knows, by name (those it cannot run say why)."""
    built: list[Harness] = [LlamaCppHarness(cfg), LlamaServerHarness(cfg), VllmHarness(cfg)]
    built += [CommandTemplateHarness(cfg, t) for t in cfg.commands]
    return {h.name: h for h in built}


__all__ = ["Endpoint", "Harness", "LoadFailed", "LoadSpec", "Running", "harnesses"]
