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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from neutrino.config.checks import ConfigError, check, coerce, replaced, split_address
from neutrino.config.engines import (
    EngineConfig,
    EngineLinkConfig,
    MockConfig,
    ModelConfig,
    TokenizerConfig,
    engine_section,
    model_section,
    unique_engine_names,
)
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
from neutrino.config.limits import LimitsConfig
from neutrino.config.observability import LoggingConfig, MetricsConfig, TracingConfig
from neutrino.config.registration import DiscoveryConfig, SombreroConfig
from neutrino.config.routes import RouteConfig, routes_section
from neutrino.config.routing import RoutingConfig, routing_section
from neutrino.config.server import (
    AdminConfig,
    GrpcConfig,
    HttpConfig,
    ResponsesConfig,
    ServerConfig,
    ShutdownConfig,
    WorkerConfig,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# Each section's class lives in the module of its part (server, engines, limits,
# observability, registration, fleet, keys, routes, routing); all are named here.
__all__ = [
    "AdminConfig",
    "AuthConfig",
    "CatalogueEntry",
    "Config",
    "ConfigError",
    "DiscoveryConfig",
    "EngineConfig",
    "EngineLinkConfig",
    "FleetConfig",
    "GrpcConfig",
    "HttpConfig",
    "KeyConfig",
    "LimitsConfig",
    "LoggingConfig",
    "MetricsConfig",
    "MockConfig",
    "ModelConfig",
    "NodeEndpoint",
    "ResponsesConfig",
    "RouteConfig",
    "RoutingConfig",
    "ServerConfig",
    "ShutdownConfig",
    "SombreroConfig",
    "TokenizerConfig",
    "TracingConfig",
    "WorkerConfig",
]


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


_SECTIONS: dict[str, type[DataclassInstance]] = {
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


def _engines(raw: object) -> tuple[EngineConfig, ...]:
    if not isinstance(raw, list):
        raise ConfigError("[[engines]] must be an array of tables")
    engines = tuple(engine_section(i, item) for i, item in enumerate(raw))
    unique_engine_names(engines)
    return engines


# The sections with readers of their own; the others are coerced into their dataclass.
_READERS: dict[str, Callable[[object], object]] = {
    "engines": _engines,
    "auth": auth_section,
    "routing": routing_section,
    "routes": routes_section,
    "nodes": nodes_section,
    "catalogue": catalogue_section,
    "fleet": fleet_section,
    "model": model_section,
}


def from_mapping(data: Mapping[str, object]) -> Config:
    cfg = Config()
    updates: dict[str, object] = {}
    for key, raw in data.items():
        reader = _READERS.get(key)
        if reader is not None:
            updates[key] = reader(raw)
        elif key in _SECTIONS:
            updates[key] = coerce(_SECTIONS[key], key, raw)
        else:
            known = dict.fromkeys(["engines", *_SECTIONS, *_READERS])
            raise ConfigError(f"unknown section [{key}] (known: {', '.join(known)})")
    return _checked(replaced(cfg, updates))


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
