"""``[metrics]``, ``[tracing]`` and ``[logging]``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from neutrino.config.checks import ConfigError as ConfigError

if TYPE_CHECKING:
    pass


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
