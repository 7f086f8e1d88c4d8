"""The server's own sections: ``[server]`` (addresses, TLS, connections), ``[workers]``,
``[http]``, ``[grpc]``, ``[admin]``, ``[shutdown]`` and ``[responses]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from neutrino.config.checks import ConfigError as ConfigError

if TYPE_CHECKING:
    pass


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
