"""What Neutrino serves and where it sends it: ``[[models]]`` (their tokenizers and
templates), ``[[engines]]``, the embedded ``[mock]`` and ``[engine_link]``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from neutrino.config.checks import ConfigError as ConfigError
from neutrino.config.checks import (
    check,
    coerce,
    known_table,
    of_fields,
    read_token_file,
    typed,
)

if TYPE_CHECKING:
    from neutrino.text.tiktoken_files import TiktokenFile


@dataclass(frozen=True, slots=True)
class ModelConfig:
    # Family (key of assets/templates.json) for a model whose name matches no family.
    default_family: str = "chatml"
    # Explicit model name -> family, overriding name matching.
    families: Mapping[str, str] = field(default_factory=dict)
    # Model name -> tool-call / reasoning parser, overriding the family's (as vLLM's
    # --tool-call-parser and --reasoning-parser do); "none" turns that parsing off.
    tool_parsers: Mapping[str, str] = field(default_factory=dict)
    reasoning_parsers: Mapping[str, str] = field(default_factory=dict)
    # Model name -> the model's own tokenizer files (a Hugging Face model folder, a
    # tokenizer.json, a Mistral tekken.json or Kimi's folder), used instead of the family's
    # tokenizer, as vLLM's --tokenizer; the family still gives template, stops and parsers.
    tokenizers: Mapping[str, str] = field(default_factory=dict)
    # Model name -> a Jinja chat template file replacing the family's (vLLM's --chat-template).
    chat_templates: Mapping[str, str] = field(default_factory=dict)
    # Model name -> its Hugging Face model folder, which is then enough: its tokenizer, its
    # chat template (tokenizer_config.json or chat_template.jinja), EOS ids and sampling
    # defaults (generation_config.json) and, when the name matches no family, the family its
    # config.json's model_type names (neutrino.text.model_folder). The keys above override.
    models: Mapping[str, str] = field(default_factory=dict)
    # Model name -> a bare tiktoken rank file with its pattern and special tokens
    # ({ file, pattern, special_tokens }; neutrino.text.tiktoken_files), checked at load.
    tiktoken: Mapping[str, TiktokenFile] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TokenizerConfig:
    # Encodes longer than this many characters run in a worker thread (0: every encode).
    offload_chars: int = 16384


@dataclass(frozen=True, slots=True)
class EngineConfig:
    socket: str = ""  # "" with a command: a socket in Neutrino's private folder
    name: str = ""  # in logs, metrics and app_state ("": engine0, engine1 ...)
    connections: int = 2  # connections to it, requests spread over them
    # A managed engine: Neutrino starts this command (a leading "python" is the Python
    # running Neutrino; "{socket}" in an argument is the socket's path, else
    # "--socket PATH" is appended), waits for its handshake, restarts it with backoff
    # when it dies, and stops it at shutdown or when a reload removes it.
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # added to Neutrino's environment
    cwd: str = ""  # the command's working directory ("": Neutrino's)
    ready_timeout_s: float = 120.0  # from start to handshake; past it, killed and restarted
    stop_timeout_s: float = 10.0  # from SIGTERM to SIGKILL
    # An OpenAI-compatible HTTP upstream instead of a socket: its base URL
    # ("http://host:port/v1"). Mode "tokens": Neutrino sends token ids and reads token ids
    # back (llama.cpp's server); "passthrough": the OpenAI routes relay the client's body.
    url: str = ""
    mode: str = "tokens"  # tokens or passthrough (an upstream's)
    # The models it serves (empty: read from its /v1/models, again every refresh_s), and
    # the upstream's own name for those Neutrino serves under another.
    models: tuple[str, ...] = ()
    upstream_names: Mapping[str, str] = field(default_factory=dict)
    # The environment variable holding its API key (read once, at load: api_key).
    api_key_env: str = ""
    api_key: str = field(default="", repr=False)
    capacity: int = 64  # requests in flight to it at once (its connection pool's limit)
    context_length: int = 0  # 0: as the upstream reports it (else 4096)
    refresh_s: float = 10.0  # how often its health and models are read
    # A relayed answer (passthrough): the longest wait for its body's first bytes, and
    # for more of it once it began; past either it ends with a timeout (0: only the
    # request's deadline bounds it).
    first_byte_timeout_s: float = 0.0
    idle_timeout_s: float = 30.0
    # Models an engine that loads on demand keeps loaded (loaded at its connection, never
    # evicted to make room for another).
    pinned: tuple[str, ...] = ()
    # HOST:PORT of an engine listening on TCP instead of a socket (one a node agent runs).
    address: str = ""
    token_file: str = ""  # the secret its hello must carry (with address)
    token: str = field(default="", repr=False)  # read from token_file at load

    @property
    def managed(self) -> bool:
        return bool(self.command)

    @property
    def upstream(self) -> bool:
        """An HTTP upstream (``url``), not an engine on a socket."""
        return bool(self.url)

    def same_process(self, other: EngineConfig) -> bool:
        """Whether ``other`` runs the same managed process (a reload keeps it running)."""
        return (
            self.name == other.name
            and self.command == other.command
            and dict(self.env) == dict(other.env)
            and self.cwd == other.cwd
        )


@dataclass(frozen=True, slots=True)
class MockConfig:
    """The embedded ``mock_ie`` child started when no engine is configured."""

    enabled: bool = True  # started when no [[engines]] is configured
    models: tuple[str, ...] = ()  # NAME[:TOKENIZER[:CONTEXT]]; empty = mock's defaults
    ttft_ms: float = 0.0  # its time to first token
    itl_ms: float = 0.0  # its time between tokens
    capacity: int = 256  # requests it runs at once
    extra_args: tuple[str, ...] = ()  # more mock_ie flags


@dataclass(frozen=True, slots=True)
class EngineLinkConfig:
    connect_timeout_s: float = 5.0  # connecting to an engine's socket and its handshake
    heartbeat_interval_s: float = 5.0  # 0 = no heartbeats
    heartbeat_timeout_s: float = 10.0  # no pong this long: the connection is dropped
    # Reconnecting to an engine: the first wait, doubled at each failure up to the last.
    backoff_initial_s: float = 0.05
    backoff_max_s: float = 2.0


ENGINE_KEYS: dict[str, object] = {
    "socket": "",
    "name": "",
    "connections": 2,
    "command": (),
    "env": {},
    "cwd": "",
    "ready_timeout_s": 120.0,
    "stop_timeout_s": 10.0,
    "url": "",
    "mode": "tokens",
    "models": (),
    "upstream_names": {},
    "api_key_env": "",
    "capacity": 64,
    "context_length": 0,
    "refresh_s": 10.0,
    "first_byte_timeout_s": 0.0,
    "idle_timeout_s": 30.0,
    "pinned": (),
    "address": "",
    "token_file": "",
}


def engine_section(i: int, item: object) -> EngineConfig:
    where = f"[engines][{i}]"
    item = known_table(item, where, ENGINE_KEYS)
    if not {"socket", "command", "url", "address"} & set(item):
        raise ConfigError(
            f'{where} needs a socket path (socket = "/run/engine.sock") or a command to start'
            ' (or an upstream: url = "http://host:port/v1"; or an engine on TCP: address)'
        )
    if "url" in item and {"socket", "command", "address"} & set(item):
        raise ConfigError(f"{where}: an upstream url takes no socket, command or address")
    if "address" in item and {"socket", "command"} & set(item):
        raise ConfigError(f"{where}: an engine on TCP (address) takes no socket or command")
    if ("address" in item) != ("token_file" in item):
        raise ConfigError(f"{where}: address and token_file go together")
    values: dict[str, object] = {"name": f"engine{i}"}
    for key, default in ENGINE_KEYS.items():
        if key in item:
            value = typed(default, item[key], f"{where}.{key}")
            values[key] = check(f"engines.{key}", value, f"{where}.{key}")
    cfg = of_fields(EngineConfig, values)
    if not cfg.name:
        cfg = replace(cfg, name=f"engine{i}")
    if cfg.token_file:
        cfg = replace(cfg, token=read_token_file(cfg.token_file, f"{where}.token_file"))
    if cfg.api_key_env:
        key = os.environ.get(cfg.api_key_env, "")
        if not key:
            raise ConfigError(f"{where}.api_key_env: ${cfg.api_key_env} is not set")
        cfg = replace(cfg, api_key=key)
    return cfg


def unique_engine_names(engines: tuple[EngineConfig, ...]) -> None:
    seen: set[str] = set()
    for e in engines:
        if e.name in seen:
            raise ConfigError(f"[[engines]]: two engines are named {e.name!r}")
        seen.add(e.name)


def model_section(raw: object) -> ModelConfig:
    """[model]: its tiktoken table is read (and its files checked) apart from the rest."""
    tiktoken = raw.get("tiktoken") if isinstance(raw, Mapping) else None
    if isinstance(raw, Mapping) and tiktoken is not None:
        raw = {k: v for k, v in raw.items() if k != "tiktoken"}
    model: ModelConfig = coerce(ModelConfig, "model", raw)
    if tiktoken is not None:
        # Imported here: it loads tiktoken, which a config without the table never needs.
        from neutrino.text.tiktoken_files import (
            TiktokenFileError,
            check_tiktoken_files,
            parse_tiktoken_files,
        )

        try:
            files = parse_tiktoken_files(tiktoken, "[model].tiktoken")
            both = sorted(set(files) & set(model.tokenizers))
            if both:
                raise ConfigError(f"[model]: {both[0]!r} is in both tokenizers and tiktoken")
            check_tiktoken_files(files, "[model].tiktoken")
        except TiktokenFileError as exc:
            raise ConfigError(str(exc)) from None
        model = replace(model, tiktoken=files)
    check_model_files(model)
    return model


def check_model_files(model: ModelConfig) -> None:
    """Every configured tokenizer path exists and every chat template is a file."""
    for name, path in model.tokenizers.items():
        if not path or not Path(path).expanduser().exists():
            raise ConfigError(f"model.tokenizers: {name!r}: no such file or folder {path!r}")
    for name, path in model.chat_templates.items():
        if not path or not Path(path).expanduser().is_file():
            raise ConfigError(f"model.chat_templates: {name!r}: no such file {path!r}")
    for name, path in model.models.items():
        if not path or not (Path(path).expanduser() / "tokenizer.json").is_file():
            raise ConfigError(f"model.models: {name!r}: no tokenizer.json in folder {path!r}")
