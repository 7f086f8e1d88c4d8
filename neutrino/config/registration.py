"""Registration with an external load balancer: ``[sombrero]`` and ``[discovery]``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from neutrino.config.checks import ConfigError as ConfigError

if TYPE_CHECKING:
    pass


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
