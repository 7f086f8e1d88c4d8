"""The node agent's configuration: frozen, typed, loaded once from flags (and an optional
TOML file for what flags do not say well: command templates of other engines).

``neutrino node --address HOST:PORT --token-file FILE --models-dir DIR [--memory-budget
SIZE]``; the token may come from an environment variable instead (``--token-env NAME``),
which a Kubernetes Secret sets. Every value is checked here; a bad one is a one-line
ConfigError naming the flag or key.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn

from neutrino.config.checks import ConfigError, read_token_file, split_address

DEFAULT_PORT = 51070
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
ENGINE_KINDS = ("engine", "http")  # the engine protocol on TCP, or OpenAI HTTP in token mode


def parse_size(text: str, where: str) -> int:
    """``"2G"``, ``"512MiB"``, ``"1.5g"``, ``"1048576"``: bytes (binary units)."""
    m = _SIZE.match(text)
    if m is None:
        raise ConfigError(f"{where} must be a size like 512M or 2G, got {text!r}")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m[2].lower()]
    return int(float(m[1]) * scale)


@dataclass(frozen=True, slots=True)
class CommandHarness:
    """Any other engine, run from a command template (``[[harness]]`` in the TOML file).

    Placeholders in the arguments: ``{file}`` (the model's path), ``{model}`` (its id),
    ``{host}``, ``{port}`` (where the engine must listen), ``{ctx}``, ``{slots}``,
    ``{quant}``, ``{tp}`` (tensor parallel), ``{devices}`` (comma-separated indexes) and
    ``{token_env}`` (the environment variable holding the token). ``kind = "engine"``: it
    speaks the engine protocol on TCP, asking for the token in the hello; ``"http"``: an
    OpenAI-compatible server in token mode (llama.cpp's), ready once ``ready_path``
    answers 200 and given the token as its API key.
    """

    name: str
    command: tuple[str, ...]
    kind: str = "engine"
    ready_path: str = "/health"
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeConfig:
    host: str = "127.0.0.1"  # the API's address (and the engines'): loopback unless told
    port: int = DEFAULT_PORT
    name: str = ""  # the node's name ("" = the host name)
    token: str = field(default="", repr=False)  # every call's bearer token, and the engines'
    models_dir: str = ""  # model files are found here, by their path relative to it
    memory_budget: int = 0  # bytes of host memory its models may take (0: the host's memory)
    # The host the front server reaches this agent and its engines at ("" = host, or the
    # host name when listening on every address).
    advertise: str = ""
    llama_server: str = ""  # llama.cpp's server binary ("" = beside Python, or on PATH)
    vllm_python: str = ""  # a Python with vLLM for the vllm harness ("" = this one)
    threads: int = 1  # CPU threads of each llama.cpp engine
    slots: int = 4  # sequences each engine decodes together (unless a load says)
    context_length: int = 2048  # each sequence's context (unless a load says)
    ready_timeout_s: float = 300.0  # from an engine's start to its readiness
    stop_timeout_s: float = 10.0  # from SIGTERM to SIGKILL
    etcd: tuple[str, ...] = ()  # register in etcd (the front server finds the agent there)
    etcd_prefix: str = "/neutrino/nodes/"
    lease_ttl_s: int = 10
    commands: tuple[CommandHarness, ...] = ()
    log_level: str = "info"

    @property
    def node_name(self) -> str:
        return self.name or socket.gethostname()

    @property
    def advertised(self) -> str:
        if self.advertise:
            return self.advertise
        return socket.gethostname() if self.host in ("0.0.0.0", "::", "") else self.host


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{message} (see neutrino node --help)")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="neutrino node", description="Neutrino's node agent (one per host)")
    p.add_argument("--address", help=f"HOST:PORT of its API (default 127.0.0.1:{DEFAULT_PORT})")
    p.add_argument("--token-file", help="a file holding the shared bearer token")
    p.add_argument("--token-env", help="an environment variable holding it instead")
    p.add_argument("--models-dir", help="the folder model files are read from")
    p.add_argument("--memory-budget", help="host memory its models may take (e.g. 8G)")
    p.add_argument("--name", help="the node's name (default: the host name)")
    p.add_argument("--advertise", help="the host the front server reaches it at")
    p.add_argument("--config", help="a TOML file of these settings and [[harness]] templates")
    p.add_argument("--etcd", action="append", help="register in etcd at this URL (repeatable)")
    p.add_argument("--llama-server", help="llama.cpp's llama-server binary")
    p.add_argument("--vllm-python", help="a Python interpreter with vLLM installed")
    p.add_argument("--threads", type=int, help="CPU threads of each llama.cpp engine")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    return p


_FILE_KEYS: dict[str, object] = {
    "address": "",
    "token_file": "",
    "token_env": "",
    "models_dir": "",
    "memory_budget": "",
    "name": "",
    "advertise": "",
    "llama_server": "",
    "vllm_python": "",
    "threads": 1,
    "slots": 4,
    "context_length": 2048,
    "ready_timeout_s": 300.0,
    "stop_timeout_s": 10.0,
    "etcd": [],
    "etcd_prefix": "",
    "lease_ttl_s": 10,
    "log_level": "",
}


def _file(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {(exc.strerror or str(exc)).lower()}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML in {path}: {exc}") from None
    return data


def _typed(key: str, value: object) -> object:
    default = _FILE_KEYS[key]
    kind = type(default)
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    if isinstance(value, list):
        ok = ok and all(isinstance(v, str) for v in value)
    if not ok:
        raise ConfigError(f"{key} must be {kind.__name__}, got {value!r}")
    return value


def _harness(i: int, raw: object) -> CommandHarness:
    where = f"[[harness]][{i}]"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where} must be a table")
    extra = sorted(set(raw) - {"name", "command", "kind", "ready_path", "env"})
    if extra:
        raise ConfigError(f"unknown key {where}.{extra[0]}")
    name, command = raw.get("name"), raw.get("command")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{where}.name must be a name of letters, digits, '.', '_', '-'")
    if name in ("llamacpp", "llama-server", "vllm"):
        raise ConfigError(f"{where}.name {name!r} is a built-in harness")
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        raise ConfigError(f"{where}.command must be a list of strings, not empty")
    kind = raw.get("kind", "engine")
    if kind not in ENGINE_KINDS:
        raise ConfigError(f"{where}.kind must be one of {', '.join(ENGINE_KINDS)}")
    env = raw.get("env", {})
    if not isinstance(env, Mapping) or not all(isinstance(v, str) for v in env.values()):
        raise ConfigError(f"{where}.env must be a table of strings")
    path = raw.get("ready_path", "/health")
    if not isinstance(path, str) or not path.startswith("/"):
        raise ConfigError(f"{where}.ready_path must start with /")
    return CommandHarness(name, tuple(command), kind, path, dict(env))


def _merged(args: argparse.Namespace) -> tuple[dict[str, Any], tuple[CommandHarness, ...]]:
    """The file's values, then the flags' (which win)."""
    values: dict[str, Any] = {}
    commands: tuple[CommandHarness, ...] = ()
    if args.config:
        data = _file(args.config)
        harnesses = data.pop("harness", [])
        if not isinstance(harnesses, list):
            raise ConfigError("[[harness]] must be an array of tables")
        commands = tuple(_harness(i, h) for i, h in enumerate(harnesses))
        if len({h.name for h in commands}) != len(commands):
            raise ConfigError("[[harness]]: two harnesses share a name")
        for key, value in data.items():
            if key not in _FILE_KEYS:
                raise ConfigError(f"unknown key {key} in {args.config}")
            values[key] = _typed(key, value)
    for key in _FILE_KEYS:
        flag = getattr(args, key, None)
        if flag is not None:
            values[key] = flag
    return values, commands


def _token(values: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    if values.get("token_file"):
        return read_token_file(values["token_file"], "--token-file")
    name = values.get("token_env")
    if name:
        token = environ.get(name, "").strip()
        if not token:
            raise ConfigError(f"--token-env: ${name} is not set or empty")
        return str(token)
    raise ConfigError("every call needs a token: give --token-file FILE or --token-env NAME")


def _checked(cfg: NodeConfig) -> NodeConfig:
    if not cfg.models_dir or not Path(cfg.models_dir).is_dir():
        raise ConfigError(f"--models-dir: no such folder {cfg.models_dir!r}")
    if cfg.name and not _NAME.match(cfg.name):
        raise ConfigError("--name must be letters, digits, '.', '_' or '-' (up to 63)")
    for key in ("threads", "slots", "context_length", "lease_ttl_s"):
        if getattr(cfg, key) < 1:
            raise ConfigError(f"{key} must be at least 1, got {getattr(cfg, key)}")
    for key in ("ready_timeout_s", "stop_timeout_s"):
        if not getattr(cfg, key) > 0:
            raise ConfigError(f"{key} must be > 0")
    if not cfg.etcd_prefix.startswith("/"):
        raise ConfigError("etcd_prefix must start with /")
    for url in cfg.etcd:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"--etcd must be an http:// or https:// URL, got {url!r}")
    return cfg


def load(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> NodeConfig:
    """The agent's configuration from its flags (and ``--config``); ConfigError if wrong."""
    args = parser().parse_args(argv)
    env = os.environ if environ is None else environ
    values, commands = _merged(args)
    host, port = split_address(values.get("address") or f"127.0.0.1:{DEFAULT_PORT}", "--address")
    budget = values.get("memory_budget") or ""
    cfg = NodeConfig(
        host=host,
        port=port,
        token=_token(values, env),
        models_dir=str(Path(values.get("models_dir", "")).expanduser()),
        memory_budget=parse_size(budget, "--memory-budget") if budget else 0,
        commands=commands,
    )
    plain = {
        k: values[k]
        for k in ("name", "advertise", "llama_server", "vllm_python", "threads", "slots")
        if values.get(k) not in (None, "")
    }
    plain |= {
        k: values[k]
        for k in ("context_length", "ready_timeout_s", "stop_timeout_s", "lease_ttl_s")
        if k in values
    }
    if values.get("etcd"):
        plain["etcd"] = tuple(values["etcd"])
    if values.get("etcd_prefix"):
        plain["etcd_prefix"] = values["etcd_prefix"]
    if values.get("log_level"):
        plain["log_level"] = values["log_level"]
    return _checked(replace(cfg, **plain))
