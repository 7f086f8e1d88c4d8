"""This server as a load balancer and etcd see it: its record and its load, and the
registrars that send them (``[sombrero]``, ``[discovery]``).

:class:`Instance` is the registrars' ``Source``: it reads the running server (listeners,
served models, capacity, in-flight and queued requests) and a queue estimator that
learns service rates from the requests that end (``Observer.finished``). Under
``--workers`` the first worker registers for all: its load is the workers' summed live
values, refreshed at each report interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from neutrino import __version__
from neutrino.config import Config
from neutrino.engine.messages import Capability, ModelInfo
from neutrino.pipeline.orchestrator import Orchestrator
from neutrino.registration.estimator import QueueEstimator
from neutrino.registration.record import (
    InstanceRecord,
    Listener,
    LoadReport,
    ServedModel,
    advertised,
    new_instance_id,
)


class _Port(Protocol):
    @property
    def port(self) -> int: ...


class _HttpPorts(_Port, Protocol):
    @property
    def admin_port(self) -> int: ...


class _Address(_Port, Protocol):
    @property
    def host(self) -> str: ...


class _Models(Protocol):
    def models(self) -> Mapping[str, ModelInfo]: ...


class Served(Protocol):
    """What the registrars read of a running server (neutrino.app's Neutrino is one): its
    configuration, listeners, models and queue."""

    @property
    def cfg(self) -> Config: ...

    @property
    def http(self) -> _HttpPorts: ...

    @property
    def grpc(self) -> _Port | None: ...

    @property
    def metrics_server(self) -> _Address | None: ...

    @property
    def router(self) -> _Models: ...

    @property
    def orchestrator(self) -> Orchestrator: ...


log = logging.getLogger("neutrino.registration")

Registrar = Any  # SombreroRegistrar | EtcdRegistrar: start(), deregister(s), stop(), snapshot()


def _served(info: ModelInfo) -> ServedModel:
    caps = info.capabilities or (Capability.GENERATE,)
    return ServedModel(info.name, info.context_length, tuple(c.name.lower() for c in caps))


class Instance:
    """The registrars' Source for one server (and, under workers, for all of them)."""

    def __init__(self, app: Served) -> None:
        self._app = app
        cfg = app.cfg
        self.instance_id = new_instance_id(cfg.sombrero.instance_id)
        self.started_at = time.time()
        self.estimator = QueueEstimator()
        # Under --workers: the workers' summed live values, refreshed by refresh().
        self._merged: Mapping[str, float] | None = None

    def finished(self, admitted_ns: int, end_ns: int, generated: int) -> None:
        """A request completed (Observer's hook): its service time and its tokens."""
        now = end_ns / 1e9
        est = self.estimator
        est.finished(now, (end_ns - admitted_ns) / 1e9)
        if generated:
            est.tokens(now, generated)

    def _listeners(self) -> tuple[Listener, ...]:
        app, cfg = self._app, self._app.cfg
        host = cfg.sombrero.advertise_host
        found = [Listener("http", advertised(f"{cfg.server.http_host}:{app.http.port}", host))]
        if app.grpc is not None:
            grpc_host = cfg.grpc.address.rpartition(":")[0]
            found.append(Listener("grpc", advertised(f"{grpc_host}:{app.grpc.port}", host)))
        if app.metrics_server is not None:
            ms = app.metrics_server
            found.append(Listener("metrics", advertised(f"{ms.host}:{ms.port}", host)))
        if cfg.admin.address:
            admin_host = cfg.admin.address.rpartition(":")[0]
            found.append(Listener("admin", advertised(f"{admin_host}:{app.http.admin_port}", host)))
        return tuple(found)

    def record(self) -> InstanceRecord:
        app = self._app
        models = app.router.models()
        return InstanceRecord(
            instance_id=self.instance_id,
            version=__version__,
            listeners=self._listeners(),
            models=tuple(_served(models[name]) for name in sorted(models)),
            capacity=app.orchestrator.capacity * app.cfg.server.workers,
            workers=app.cfg.server.workers,
            started_at=self.started_at,
        )

    def load(self) -> LoadReport:
        app = self._app
        orch = app.orchestrator
        merged = self._merged
        now = time.monotonic()
        est = self.estimator
        running = int(merged["running"]) if merged else orch.inflight
        waiting = int(merged["waiting"]) if merged else orch.admission.queued
        rate = merged.get("tokens_per_s", 0.0) if merged else est.tokens_per_s(now)
        slots = orch.capacity * app.cfg.server.workers
        return LoadReport(
            inflight=running,
            queue_depth=waiting,
            tokens_per_s=rate,
            estimated_wait_s=est.estimate(now, waiting, running, slots),
            capacity=slots,
        )

    async def refresh(self, gather: Callable[[], Awaitable[list[Mapping[str, Any]]]]) -> None:
        """Keep the workers' summed live values current (first worker only)."""
        period = self._app.cfg.sombrero.report_interval_s
        while True:
            with contextlib.suppress(Exception):
                raws = await gather()
                merged: dict[str, float] = {}
                for raw in raws:
                    for k, v in raw.get("live", {}).items():
                        merged[k] = merged.get(k, 0) + v
                self._merged = merged
            await asyncio.sleep(period)


def registrars(cfg: Config, source: Instance) -> list[Registrar]:
    """The registrars the configuration asks for (none without [sombrero] or [discovery])."""
    found: list[Registrar] = []
    if cfg.sombrero.address:
        from neutrino.registration.sombrero import SombreroRegistrar

        found.append(SombreroRegistrar(cfg.sombrero, source))
    if cfg.discovery.etcd:
        from neutrino.registration.etcd import EtcdRegistrar

        found.append(EtcdRegistrar(cfg.discovery, source))
    return found
