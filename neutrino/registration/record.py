"""What an instance tells a load balancer and etcd about itself, as plain data.

The app builds an :class:`InstanceRecord` (who and where it is, what it serves) and a
:class:`LoadReport` (how loaded it is now) through a :class:`Source`; the registrars only
read them. ``to_dict`` is the JSON form stored in etcd and shown by ``mock_sombrero``.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import socket
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "PROTOCOLS",
    "InstanceRecord",
    "Listener",
    "LoadReport",
    "ServedModel",
    "Source",
    "advertised",
    "new_instance_id",
]

# What a listener may speak (protos/sombrero/v1/sombrero.proto, Listener.protocol); "node":
# a node agent's API, in the record it keeps in etcd.
PROTOCOLS = frozenset({"http", "grpc", "metrics", "admin", "quic", "node"})


@dataclass(frozen=True, slots=True)
class Listener:
    protocol: str  # one of PROTOCOLS
    address: str  # "host:port" the balancer can reach

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown listener protocol {self.protocol!r}")

    def to_dict(self) -> dict[str, object]:
        return {"protocol": self.protocol, "address": self.address}


@dataclass(frozen=True, slots=True)
class ServedModel:
    name: str
    context_length: int
    capabilities: tuple[str, ...] = ("generate",)  # lower-case names: generate, embed, ...

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "context_length": self.context_length,
            "capabilities": list(self.capabilities),
        }


@dataclass(frozen=True, slots=True)
class InstanceRecord:
    instance_id: str
    version: str
    listeners: tuple[Listener, ...]
    models: tuple[ServedModel, ...]
    capacity: int  # concurrent requests before new ones queue
    workers: int
    started_at: float  # Unix seconds

    def to_dict(self) -> dict[str, object]:
        return {
            "instance_id": self.instance_id,
            "version": self.version,
            "listeners": [x.to_dict() for x in self.listeners],
            "models": [m.to_dict() for m in self.models],
            "capacity": self.capacity,
            "workers": self.workers,
            "started_at": self.started_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InstanceRecord:
        """The inverse of :meth:`to_dict` (raises KeyError, TypeError or ValueError)."""
        return cls(
            instance_id=str(data["instance_id"]),
            version=str(data["version"]),
            listeners=tuple(
                Listener(str(x["protocol"]), str(x["address"])) for x in data["listeners"]
            ),
            models=tuple(
                ServedModel(str(m["name"]), int(m["context_length"]), tuple(m["capabilities"]))
                for m in data["models"]
            ),
            capacity=int(data["capacity"]),
            workers=int(data["workers"]),
            started_at=float(data["started_at"]),
        )


@dataclass(frozen=True, slots=True)
class LoadReport:
    inflight: int  # admitted, not finished
    queue_depth: int  # waiting for a slot
    tokens_per_s: float  # recent generation rate
    estimated_wait_s: float  # before a request sent now would start (0: a slot is free)
    capacity: int  # concurrent requests taken now

    def to_dict(self) -> dict[str, object]:
        return {
            "inflight": self.inflight,
            "queue_depth": self.queue_depth,
            "tokens_per_s": self.tokens_per_s,
            "estimated_wait_s": self.estimated_wait_s,
            "capacity": self.capacity,
        }


class Source(Protocol):
    """What the registrars read; the app implements it. Both calls are cheap and never
    block: ``record`` may change (models come and go with engines), ``load`` does."""

    def record(self) -> InstanceRecord: ...

    def load(self) -> LoadReport: ...


def new_instance_id(configured: str = "") -> str:
    """The configured id, or ``HOSTNAME-PID-RANDOM`` (new at each start; the app calls this
    once and puts the id in every record it builds)."""
    if configured:
        return configured
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def advertised(address: str, host: str = "") -> str:
    """``address`` ("host:port" as listened on) as others reach it: a wildcard host
    (0.0.0.0, ::, empty) becomes ``host`` (default: this machine's host name); IPv6 hosts
    are bracketed."""
    name, sep, port = address.rpartition(":")
    if not sep:
        raise ValueError(f"not host:port: {address!r}")
    name = name.strip("[]")
    if name in ("", "0.0.0.0", "::"):
        name = host or socket.gethostname()
    try:
        if ipaddress.ip_address(name).version == 6:
            return f"[{name}]:{port}"
    except ValueError:
        pass  # a host name
    return f"{name}:{port}"
