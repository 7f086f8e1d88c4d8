"""Frozen, typed configuration, loaded once at start-up.

Sources, later ones winning: built-in defaults, a TOML file (``--config FILE`` or
the ``NEUTRINO_CFG`` environment variable), then command-line flags. Nothing
else in Neutrino reads the environment or a config file. Every value is checked while
loading (types here, ranges and forms in ``checks``); a bad one is a one-line ConfigError
naming the key or flag.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from neutrino.config.checks import ConfigError as ConfigError
from neutrino.config.checks import check, read_token_file, shown, split_address, typed
from neutrino.config.fleet import (
    CatalogueEntry,
    FleetConfig,
    NodeEndpoint,
    catalogue_section,
    check_fleet,
    fleet_section,
    nodes_section,
)
from neutrino.config.keys import AuthConfig, KeyConfig, auth_section
from neutrino.config.routes import RouteConfig, routes_section
from neutrino.config.routing import RoutingConfig, routing_section

if TYPE_CHECKING:
    from neutrino.text.tiktoken_files import TiktokenFile

__all__ = [
    "AuthConfig",
    "CatalogueEntry",
    "ConfigError",
    "FleetConfig",
    "KeyConfig",
    "NodeEndpoint",
    "RouteConfig",
    "RoutingConfig",
]


@dataclass(frozen=True, slots=True)
class ServerConfig:
    # The HTTP listener (OpenAI, Anthropic and Responses routes, status, health);
    # --http-address HOST:PORT sets both.
    http_host: str = "127.0.0.1"
    http_port: int = 51055
    uvloop: bool = True  # uvloop's event loop (false: asyncio's own)
    log_level: str = "info"  # the older spelling of [logging].level (which wins when set)
    # Processes serving the same listeners (SO_REUSEPORT), each with its own engine
    # connections, under one supervisor that restarts a worker that dies.
    workers: int = 1
    # HOST:PORT (UDP) of the HTTP/3 listener; "" turns HTTP/3 off.
    quic_address: str = "127.0.0.1:51056"
    # PEM certificate (chain) and key for HTTP/3; unset: a self-signed pair kept in
    # tls_dir ("" = ~/.local/state/neutrino/tls), its fingerprint logged at start.
    tls_cert: str = ""
    tls_key: str = ""
    tls_dir: str = ""
    # Connections the kernel holds for each TCP listener (HTTP, admin, metrics) before
    # they are accepted; the kernel caps it at net.core.somaxconn. gRPC's own server
    # always asks for somaxconn. NGINX's 511: the event loop accepts every waiting
    # connection in one turn (~36 us each), so this also bounds that turn (~18 ms).
    listen_backlog: int = 511
    # Threads for work taken off the event loop (large bodies, long prompts, audio and
    # images, loading models' text assets).
    offload_threads: int = 2


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """Set only in a worker that ``--workers N`` started (hidden flags, not a TOML section):
    its slot, and the supervisor's private folder (the workers' sockets and snapshots)."""

    index: int = -1  # -1: not a worker (a single process, or the supervisor itself)
    dir: str = ""

    @property
    def active(self) -> bool:
        return self.index >= 0


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
class LimitsConfig:
    max_body_bytes: int = 8 * 1024 * 1024  # a request body past it: 413
    max_queue: int = 1024  # 0 = no queue: 429 at once when no slot is free
    max_inflight: int = 0  # 0 = sum of connected engines' capacity
    request_timeout_s: float = 120.0  # from receipt to end; past it the request fails (408/504)
    # Bytes a streaming client may leave unread before it is dropped.
    stream_buffer_bytes: int = 4 * 1024 * 1024
    history_size: int = 1000  # ended requests /neutrino/v1/history keeps
    history_bytes: int = 2 * 1024 * 1024  # the history ring's size in bytes, roughly
    max_n: int = 8  # choices one request may ask for (n)
    max_stop_sequences: int = 16  # stop strings one request may give
    max_stop_chars: int = 1024  # length of each stop string
    # A JSON schema (response_format, structured outputs) nested deeper is refused.
    max_schema_depth: int = 64
    # logit_bias entries one request may give.
    max_logit_bias: int = 1024
    # n * max_tokens * (1 + top_logprobs) of a non-streamed request: the tokens and
    # alternatives its one answer may hold (a stream is paced by its client). Past it a
    # request is refused; one that names no max_tokens gets fewer tokens instead.
    max_unstreamed_tokens: int = 1 << 20
    # A request body larger than this is decoded and checked on a worker thread.
    offload_bytes: int = 64 * 1024
    # JSON objects and arrays one body may hold (counted while a dense body is decoded).
    max_json_containers: int = 100_000
    # Messages and tools one chat request may give (OpenAI's bounds).
    max_messages: int = 2048
    max_tools: int = 128
    # An audio upload's form (transcriptions, translations) may be this large: OpenAI's
    # file limit, 25 MB (other bodies: max_body_bytes).
    max_upload_bytes: int = 25 * 1024 * 1024
    # The longest audio one transcription or translation may send, decoded (a file that
    # holds more is refused as it decodes); 1,800 s at 16 kHz is 58 MB of samples.
    max_audio_seconds: float = 1800.0
    # Longest a write to a client may wait for it to read (HTTP/1.0 and speech streams,
    # gRPC streams); past it the client is dropped and its engine request cancelled.
    send_timeout_s: float = 60.0
    # The queue's fair shares (docs/limits.md): a queued request gains a priority level
    # per this long waited (0: no ageing); a key's tokens weigh half after share_decay_s.
    priority_age_s: float = 30.0
    share_decay_s: float = 60.0
    # The last this many free engine slots go only to keys with no request in flight: a
    # key's request need not wait for another key's running answer to end (0: every slot
    # to whoever is next; the busy keys cannot use them while no other key comes).
    reserved_slots: int = 0
    # The highest priority a request may ask for (x-neutrino-priority) when keys are off.
    unkeyed_max_priority: int = 0
    # The answer's tokens a request is charged at admission when it names no max_tokens
    # (corrected at its end), in fair shares and tokens-per-minute limits.
    answer_estimate_tokens: int = 256
    # Where per-key request and token counters are shared by every worker and instance
    # (redis://host:port/db; "": each process counts its own).
    redis: str = ""
    # The per-minute limits count in fixed windows this long, each allowed its share of
    # the minute's (60: the minute itself; 10: a sixth in every ten seconds, fewer bursts).
    rate_window_s: int = 60


@dataclass(frozen=True, slots=True)
class EngineLinkConfig:
    connect_timeout_s: float = 5.0  # connecting to an engine's socket and its handshake
    heartbeat_interval_s: float = 5.0  # 0 = no heartbeats
    heartbeat_timeout_s: float = 10.0  # no pong this long: the connection is dropped
    # Reconnecting to an engine: the first wait, doubled at each failure up to the last.
    backoff_initial_s: float = 0.05
    backoff_max_s: float = 2.0


@dataclass(frozen=True, slots=True)
class HttpConfig:
    sse_keepalive_s: float = 10.0  # an SSE comment this often while a stream waits
    # Name of the reasoning field in messages and deltas ("reasoning" as newer vLLM names it).
    reasoning_field: str = "reasoning_content"
    # Serve chat and text completions with the lean HTTP/1.1 server (httptools) in front of
    # aiohttp, which serves every other route; false: aiohttp serves everything.
    fast_path: bool = True
    # A request's head must arrive within this many seconds of its first byte (a new
    # connection's within this of being accepted), else 408 and the connection closes.
    header_timeout_s: float = 15.0
    # Longest pause between two reads of a request's body (408 and close after it).
    body_timeout_s: float = 30.0
    # The least a body must average, in bytes a second, once body_grace_s have passed
    # since it began (408 and close below it; 0: no minimum): a body dribbled a byte at a
    # time, each within body_timeout_s, is cut all the same.
    min_body_rate: float = 1024.0
    body_grace_s: float = 5.0
    # How long a connection may wait idle for its next request.
    keepalive_timeout_s: float = 75.0


@dataclass(frozen=True, slots=True)
class GrpcConfig:
    """The gRPC front end (``neutrino.v1`` services, health and reflection)."""

    enabled: bool = True  # false: no gRPC listener
    address: str = "127.0.0.1:50051"  # HOST:PORT (port 0: any free port)
    max_message_bytes: int = 26 * 1024 * 1024  # received and sent messages
    # Backstop for the health status, which also follows engine changes at once.
    health_interval_s: float = 1.0
    # Calls gRPC's core may hold, arrived and not yet taken by a handler, before it cancels
    # more unseen (its own default, 1000, cancelled 4-9 % of a burst of 2,000 calls on one
    # channel): past Neutrino's queue, a call is refused (RESOURCE_EXHAUSTED) and counted.
    max_pending_calls: int = 16384


@dataclass(frozen=True, slots=True)
class AdminConfig:
    # HOST:PORT of a listener of its own for the admin routes (state, history), which then
    # leave the public listener; "" keeps them there (behind an admin key, if set).
    address: str = ""
    # With no admin key, the admin routes refuse a browser's request from a web page of
    # another origin than the server's own, unless it is named here ("*": any origin).
    allowed_origins: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    # HOST:PORT of the Prometheus listener (GET /metrics); "" turns it off.
    address: str = "127.0.0.1:9089"


@dataclass(frozen=True, slots=True)
class TracingConfig:
    # OTLP/gRPC collector, e.g. "http://127.0.0.1:4317"; "" turns tracing off.
    endpoint: str = ""
    sample_ratio: float = 1.0  # of the traces this server starts (a parent's choice is kept)
    service_name: str = "neutrino"  # the spans' service.name
    # Longest a shutdown waits for the last spans to reach the collector.
    shutdown_timeout_s: float = 2.0
    insecure: bool = True  # plain gRPC to the collector (false: TLS)


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    level: str = ""  # debug, info, warning, error ("": [server].log_level, i.e. info)
    format: str = "text"  # text, or json (one object per line)
    file: str = ""  # a file to log to instead of stderr, rotated by size
    max_bytes: int = 100 * 1024 * 1024  # the file's size at which it is rotated
    backups: int = 5  # rotated files kept


@dataclass(frozen=True, slots=True)
class SombreroConfig:
    """Registration with the Sombrero load balancer (``protos/sombrero``)."""

    address: str = ""  # HOST:PORT of the balancer's gRPC service; "" = no registration
    instance_id: str = ""  # "" = HOSTNAME-PID-RANDOM, new at each start
    # The host the balancer should reach this server's listeners at, where they listen on
    # 0.0.0.0 or :: ("" = the machine's host name).
    advertise_host: str = ""
    report_interval_s: float = 1.0  # how often load is reported
    # Reconnecting to the balancer: the first wait, doubled at each failure up to the last.
    backoff_initial_s: float = 0.2
    backoff_max_s: float = 10.0


@dataclass(frozen=True, slots=True)
class DiscoveryConfig:
    """The registration record in etcd, under a lease (``[discovery] etcd = [URL, ...]``)."""

    etcd: tuple[str, ...] = ()  # the etcd endpoints (URLs); empty: no record
    prefix: str = "/neutrino/instances/"  # the record's key is this and the instance id
    lease_ttl_s: int = 10  # the lease the record lives under, kept alive while serving


@dataclass(frozen=True, slots=True)
class ShutdownConfig:
    grace_s: float = 10.0  # 0 = in-flight requests are not waited for


@dataclass(frozen=True, slots=True)
class ResponsesConfig:
    """The Responses API's store of finished responses (``previous_response_id``,
    ``GET``/``DELETE /v1/responses/{id}``): in memory, per worker, lost at a restart;
    the oldest go first past either bound. 0 entries (the default): nothing is stored."""

    store_entries: int = 0  # responses kept (0: none)
    store_bytes: int = 64 * 1024 * 1024  # the stored responses' JSON, roughly

    def __post_init__(self) -> None:
        for key in ("store_entries", "store_bytes"):
            value = getattr(self, key)
            if value < 0:
                raise ConfigError(f"[responses].{key} must be at least 0, got {value}")


@dataclass(frozen=True, slots=True)
class Config:
    server: ServerConfig = field(default_factory=ServerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    engines: tuple[EngineConfig, ...] = ()
    mock: MockConfig = field(default_factory=MockConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    engine_link: EngineLinkConfig = field(default_factory=EngineLinkConfig)
    http: HttpConfig = field(default_factory=HttpConfig)
    grpc: GrpcConfig = field(default_factory=GrpcConfig)
    shutdown: ShutdownConfig = field(default_factory=ShutdownConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    admin: AdminConfig = field(default_factory=AdminConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    tracing: TracingConfig = field(default_factory=TracingConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    sombrero: SombreroConfig = field(default_factory=SombreroConfig)
    discovery: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    worker: WorkerConfig = field(default_factory=WorkerConfig)
    responses: ResponsesConfig = field(default_factory=ResponsesConfig)
    routing: RoutingConfig = field(default_factory=RoutingConfig)
    routes: tuple[RouteConfig, ...] = ()  # manifest routes: aliases for a router model
    nodes: tuple[NodeEndpoint, ...] = ()  # node agents (the fleet), by their API
    catalogue: tuple[CatalogueEntry, ...] = ()  # models the fleet places on its nodes
    fleet: FleetConfig = field(default_factory=FleetConfig)

    @property
    def log_level(self) -> str:
        return (self.logging.level or self.server.log_level).lower()

    @property
    def has_fleet(self) -> bool:
        """Node agents are configured (or found in etcd): the control plane runs."""
        return bool(self.nodes or self.fleet.etcd or self.fleet.dns)

    @property
    def embedded_mock(self) -> bool:
        return not self.engines and not self.has_fleet and self.mock.enabled


_SECTIONS: dict[str, type[Any]] = {
    "server": ServerConfig,
    "model": ModelConfig,
    "tokenizer": TokenizerConfig,
    "mock": MockConfig,
    "limits": LimitsConfig,
    "engine_link": EngineLinkConfig,
    "http": HttpConfig,
    "grpc": GrpcConfig,
    "shutdown": ShutdownConfig,
    "admin": AdminConfig,
    "metrics": MetricsConfig,
    "tracing": TracingConfig,
    "logging": LoggingConfig,
    "sombrero": SombreroConfig,
    "discovery": DiscoveryConfig,
    "responses": ResponsesConfig,
}


def _coerce(cls: type[Any], section: str, raw: Any) -> Any:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"[{section}] must be a table, got {shown(raw)}")
    known = {f.name: f for f in fields(cls)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        f = known.get(key)
        if f is None:
            raise ConfigError(f"unknown key [{section}].{key} (known: {', '.join(known)})")
        default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[operator]
        where = f"[{section}].{key}"
        values[key] = check(f"{section}.{key}", typed(default, value, where), where)
    return cls(**values)


_ENGINE_KEYS: dict[str, Any] = {
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


def _engine(i: int, item: Any) -> EngineConfig:
    where = f"[engines][{i}]"
    if not isinstance(item, Mapping):
        raise ConfigError(f"{where} must be a table, got {shown(item)}")
    extra = sorted(set(item) - set(_ENGINE_KEYS))
    if extra:
        raise ConfigError(f"unknown key {where}.{extra[0]} (known: {', '.join(_ENGINE_KEYS)})")
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
    values: dict[str, Any] = {"name": f"engine{i}"}
    for key, default in _ENGINE_KEYS.items():
        if key in item:
            value = typed(default, item[key], f"{where}.{key}")
            values[key] = check(f"engines.{key}", value, f"{where}.{key}")
    values["name"] = values["name"] or f"engine{i}"
    if values.get("token_file"):
        values["token"] = read_token_file(values["token_file"], f"{where}.token_file")
    if values.get("api_key_env"):
        key = os.environ.get(values["api_key_env"], "")
        if not key:
            raise ConfigError(f"{where}.api_key_env: ${values['api_key_env']} is not set")
        values["api_key"] = key
    return EngineConfig(**values)


def _unique_engine_names(engines: tuple[EngineConfig, ...]) -> None:
    seen: set[str] = set()
    for e in engines:
        if e.name in seen:
            raise ConfigError(f"[[engines]]: two engines are named {e.name!r}")
        seen.add(e.name)


def _model_section(raw: Any) -> ModelConfig:
    """[model]: its tiktoken table is read (and its files checked) apart from the rest."""
    tiktoken = raw.get("tiktoken") if isinstance(raw, Mapping) else None
    if tiktoken is not None:
        raw = {k: v for k, v in raw.items() if k != "tiktoken"}
    model: ModelConfig = _coerce(ModelConfig, "model", raw)
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
    _check_model_files(model)
    return model


def _check_model_files(model: ModelConfig) -> None:
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


def from_mapping(data: Mapping[str, object]) -> Config:
    cfg = Config()
    updates: dict[str, Any] = {}
    for key, raw in data.items():
        if key == "engines":
            if not isinstance(raw, list):
                raise ConfigError("[[engines]] must be an array of tables")
            updates["engines"] = tuple(_engine(i, item) for i, item in enumerate(raw))
            _unique_engine_names(updates["engines"])
        elif key == "auth":
            updates["auth"] = auth_section(raw)
        elif key == "routing":
            updates["routing"] = routing_section(raw)
        elif key == "routes":
            updates["routes"] = routes_section(raw)
        elif key == "nodes":
            updates["nodes"] = nodes_section(raw)
        elif key == "catalogue":
            updates["catalogue"] = catalogue_section(raw)
        elif key == "fleet":
            updates["fleet"] = fleet_section(raw)
        elif key == "model":
            updates[key] = _model_section(raw)
        elif key in _SECTIONS:
            updates[key] = _coerce(_SECTIONS[key], key, raw)
        else:
            known = ", ".join(
                ["engines", *_SECTIONS, "auth", "routing", "routes", "nodes", "catalogue", "fleet"]
            )
            raise ConfigError(f"unknown section [{key}] (known: {known})")
    return _checked(replace(cfg, **updates))


def _checked(cfg: Config) -> Config:
    """What no single value can say: values that must agree with each other."""
    if cfg.server.quic_address:
        split_address(cfg.server.quic_address, "[server].quic_address")
    link = cfg.engine_link
    if link.backoff_max_s < link.backoff_initial_s:
        raise ConfigError(
            f"[engine_link].backoff_max_s ({link.backoff_max_s:g}) must be >= "
            f"[engine_link].backoff_initial_s ({link.backoff_initial_s:g})"
        )
    check_fleet(cfg.nodes, cfg.catalogue, cfg.fleet)
    return cfg


def load_file(path: str | Path, source: str = "--config") -> Config:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        raise ConfigError(f"cannot read config file {path} ({source}): {reason}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML in {path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"invalid TOML in {path}: not UTF-8 (byte {exc.start})") from None
    try:
        return from_mapping(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """A bad flag is a ConfigError (one line, exit 2), not argparse's usage text."""
        raise ConfigError(f"{message} (see neutrino --help)")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="neutrino", description="Neutrino LLM front server")
    p.add_argument("--config", help="TOML config file (default: $NEUTRINO_CFG)")
    p.add_argument("--http-address", help="HOST:PORT for the OpenAI HTTP API")
    p.add_argument("--grpc-address", help="HOST:PORT for the gRPC API")
    p.add_argument("--quic-address", help='HOST:PORT (UDP) for HTTP/3 ("" = off)')
    p.add_argument(
        "--engine",
        action="append",
        default=[],
        metavar="SOCKET",
        help="UNIX socket of an engine started elsewhere (repeatable; disables the mock)",
    )
    p.add_argument("--metrics-address", help='HOST:PORT for Prometheus /metrics ("" = off)')
    p.add_argument("--sombrero-address", help="HOST:PORT of the Sombrero load balancer")
    p.add_argument("--workers", type=int, help="processes serving the listeners (default 1)")
    p.add_argument("--admin-address", help='HOST:PORT for the admin routes ("" = public listener)')
    # Given by the --workers supervisor to each worker it starts.
    p.add_argument("--worker-index", type=int, help=argparse.SUPPRESS)
    p.add_argument("--worker-dir", help=argparse.SUPPRESS)
    p.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error"], help="[logging] level"
    )
    p.add_argument("--log-format", choices=["text", "json"], help="[logging] format")
    p.add_argument("--no-uvloop", action="store_true", help="use the default asyncio loop")
    p.add_argument("--request-timeout", type=float, help="seconds before a request times out")
    p.add_argument("--mock-itl-ms", type=float, help="embedded mock: inter-token delay")
    p.add_argument("--mock-ttft-ms", type=float, help="embedded mock: time to first token")
    return p


def load(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Build the configuration from defaults, the config file and flags; every value is
    checked here, once (a ConfigError names the key or flag)."""
    args = parser().parse_args(argv)
    env = os.environ if environ is None else environ
    if args.config:
        cfg = load_file(args.config)
    elif env.get("NEUTRINO_CFG"):
        cfg = load_file(env["NEUTRINO_CFG"], "NEUTRINO_CFG")
    else:
        cfg = Config()
    server = cfg.server
    if args.http_address is not None:
        host, port = split_address(args.http_address, "--http-address")
        server = replace(server, http_host=host, http_port=port)
    if args.workers is not None:
        server = replace(server, workers=check("server.workers", args.workers, "--workers"))
    if args.no_uvloop:
        server = replace(server, uvloop=False)
    if args.quic_address is not None:
        if args.quic_address:
            split_address(args.quic_address, "--quic-address")
        server = replace(server, quic_address=args.quic_address)
    cfg = replace(cfg, server=server)
    if args.engine:
        engines = [
            EngineConfig(socket=check("engines.socket", s, "--engine"), name=f"engine{i}")
            for i, s in enumerate(args.engine)
        ]
        cfg = replace(cfg, engines=tuple(engines))
    if args.grpc_address is not None:
        split_address(args.grpc_address, "--grpc-address")
        cfg = replace(cfg, grpc=replace(cfg.grpc, address=args.grpc_address))
    if args.request_timeout is not None:
        timeout = check("limits.request_timeout_s", args.request_timeout, "--request-timeout")
        cfg = replace(cfg, limits=replace(cfg.limits, request_timeout_s=timeout))
    mock = cfg.mock
    if args.mock_itl_ms is not None:
        mock = replace(mock, itl_ms=check("mock.itl_ms", args.mock_itl_ms, "--mock-itl-ms"))
    if args.mock_ttft_ms is not None:
        mock = replace(mock, ttft_ms=check("mock.ttft_ms", args.mock_ttft_ms, "--mock-ttft-ms"))
    cfg = _worker_flags(_flags_of_operations(replace(cfg, mock=mock), args), args)
    if cfg.has_fleet and cfg.server.workers > 1:
        raise ConfigError(
            "the fleet's control plane ([[nodes]], [fleet] etcd or dns) runs in one process: "
            "[server].workers must be 1"
        )
    return cfg


def _flags_of_operations(cfg: Config, args: argparse.Namespace) -> Config:
    """The flags of [metrics], [sombrero] and [logging]."""
    if args.metrics_address is not None:
        if args.metrics_address:
            split_address(args.metrics_address, "--metrics-address")
        cfg = replace(cfg, metrics=replace(cfg.metrics, address=args.metrics_address))
    if args.sombrero_address is not None:
        split_address(args.sombrero_address, "--sombrero-address")
        cfg = replace(cfg, sombrero=replace(cfg.sombrero, address=args.sombrero_address))
    logs = cfg.logging
    if args.log_level:
        logs = replace(logs, level=args.log_level)
    if args.log_format:
        logs = replace(logs, format=args.log_format)
    return replace(cfg, logging=logs)


def _worker_flags(cfg: Config, args: argparse.Namespace) -> Config:
    """--admin-address, and the hidden flags a worker of ``--workers`` is started with."""
    if args.admin_address is not None:
        if args.admin_address:
            split_address(args.admin_address, "--admin-address")
        cfg = replace(cfg, admin=replace(cfg.admin, address=args.admin_address))
    if (args.worker_index is None) != (args.worker_dir is None):
        raise ConfigError("--worker-index and --worker-dir go together")
    if args.worker_index is None:
        return cfg
    index = check("worker.index", args.worker_index, "--worker-index")
    if index >= cfg.server.workers:
        raise ConfigError(f"--worker-index must be < --workers ({cfg.server.workers}), got {index}")
    worker = WorkerConfig(index, check("worker.dir", args.worker_dir, "--worker-dir"))
    return replace(cfg, worker=worker)
