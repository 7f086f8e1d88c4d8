"""The listeners' ports, reserved by the supervisor before any worker starts.

Every worker must listen on the same port, so a port 0 (any free port) is chosen here,
once. The supervisor keeps a socket bound (not listening) on each address with
SO_REUSEPORT for as long as it runs: the workers' listening sockets join it, and no
other program can take the port meanwhile. A port already taken is the same one-line
start-up error a single process gives.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from neutrino.config import Config
from neutrino.config.checks import split_address
from neutrino.errors import StartupError, os_reason


@dataclass(frozen=True, slots=True)
class Listener:
    what: str  # "HTTP", in messages
    flag: str  # the flag that gives a worker the address
    address: str  # HOST:PORT as configured
    hint: str  # the settings that change it, as a single process names them


def listeners(cfg: Config) -> list[Listener]:
    """The TCP listeners ``cfg`` opens (each worker opens them all)."""
    host, port = cfg.server.http_host, cfg.server.http_port
    http = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    hint = "[server] http_host and http_port, or --http-address"
    found = [Listener("HTTP", "--http-address", http, hint)]
    if cfg.grpc.enabled:
        hint = "[grpc] address, --grpc-address, or [grpc] enabled = false"
        found.append(Listener("gRPC", "--grpc-address", cfg.grpc.address, hint))
    if cfg.metrics.address:
        hint = '[metrics] address or --metrics-address; "" turns it off'
        found.append(Listener("metrics", "--metrics-address", cfg.metrics.address, hint))
    if cfg.admin.address:
        hint = "[admin] address or --admin-address"
        found.append(Listener("the admin routes", "--admin-address", cfg.admin.address, hint))
    return found


def _bind(host: str, port: int) -> socket.socket:
    family, kind, proto, _, sockaddr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(sockaddr)
    except BaseException:
        sock.close()
        raise
    return sock


def reserve(listener: Listener) -> tuple[socket.socket, str]:
    """A socket holding ``listener``'s port, and its address with the port chosen."""
    host, port = split_address(listener.address, listener.flag)
    try:
        sock = _bind(host, port)
    except OSError as exc:
        raise StartupError(
            f"cannot listen for {listener.what} on {listener.address}: {os_reason(exc)} "
            f"(set {listener.hint})"
        ) from exc
    chosen = sock.getsockname()[1]
    head = listener.address.rpartition(":")[0]
    return sock, f"{head}:{chosen}"


class Reservation:
    """Every listener's port, held until :meth:`release`; ``argv`` gives them to a worker."""

    def __init__(self, cfg: Config) -> None:
        self.sockets: list[socket.socket] = []
        self.addresses: dict[str, str] = {}  # what (HTTP, gRPC ...) -> HOST:PORT chosen
        self.argv: list[str] = []
        try:
            for listener in listeners(cfg):
                sock, address = reserve(listener)
                self.sockets.append(sock)
                self.addresses[listener.what] = address
                self.argv += [listener.flag, address]
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets.clear()
