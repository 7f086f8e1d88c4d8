"""Wires configuration, engines, pipeline and front ends into one process."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING

from neutrino.config import Config, ConfigError
from neutrino.engine.fleet.router import EngineRouter
from neutrino.engine.managed import MOCK_NAME, ManagedEngine, ManagedEngines, mock_engine
from neutrino.engine.messages import Capability, ModelInfo
from neutrino.fleet.plane import FleetPlane
from neutrino.fleet.poller import NodePoller
from neutrino.frontends.http.h1 import wire as h1_wire
from neutrino.frontends.http.server import HttpServer, build_admin_app, build_app, fast_routes
from neutrino.frontends.quic.head import alt_svc
from neutrino.frontends.quic.server import Http3Server
from neutrino.instance import Instance, Registrar, registrars
from neutrino.observability.exporter import MetricsServer
from neutrino.observability.memory import HeapTrimmer
from neutrino.observability.metrics import Metrics, Raw
from neutrino.observability.tracing import Tracing
from neutrino.pipeline.history import History
from neutrino.pipeline.models import ModelTexts
from neutrino.pipeline.observe import Observer
from neutrino.pipeline.orchestrator import Orchestrator
from neutrino.workers.peers import Peers

if TYPE_CHECKING:
    from neutrino.frontends.grpc.server import GrpcServer

SWITCH_INTERVAL_S = 0.001
log = logging.getLogger("neutrino")

_ENDINGS_S = 2.0  # for the handlers of requests ended at shutdown to write their endings


# Sections a reload cannot change (listeners, processes, exporters): a change to one is
# reported as needing a restart, the rest of the reload goes on.
RESTART_SECTIONS = (
    "server", "grpc", "http", "admin", "auth", "metrics", "tracing", "logging", "sombrero",
    "discovery", "mock", "shutdown", "responses", "nodes", "catalogue", "fleet",
)  # fmt: skip
_RELOAD_ENGINES_S = 10.0  # how long new engines have to connect before a reload is refused


class Neutrino:
    def __init__(self, cfg: Config, reload_config: Callable[[], Config] | None = None) -> None:
        self.cfg = cfg
        # Reads the configuration again (the same file and flags) for reload().
        self._reload_config = reload_config
        self._reload_lock = asyncio.Lock()
        # Routers a reload replaced, closing once their requests end.
        self._retiring: dict[asyncio.Task[None], EngineRouter] = {}
        # Engine processes Neutrino starts and supervises ([[engines]] command, the mock).
        self.processes = ManagedEngines()
        try:
            self._build(cfg)
        except BaseException:  # a bad family or parser, missing stubs: no folder left behind
            self.processes.remove_folder()
            raise

    def _build(self, cfg: Config) -> None:
        engines = (mock_engine(cfg.mock),) if cfg.embedded_mock else cfg.engines
        self.cfg = cfg = replace(cfg, engines=self.processes.resolve(engines))
        self.router = EngineRouter(cfg.engines, cfg.engine_link, cfg.routing)
        # The fleet's control plane: node agents polled, the catalogue placed on them.
        self.plane: FleetPlane | None = None
        self.poller: NodePoller | None = None
        if cfg.has_fleet:
            self.plane = FleetPlane(cfg, self.router)
            self.router.place_with(self.plane)
            self.poller = NodePoller(self.plane)
        self.texts = ModelTexts(cfg.model)
        self.history = History(cfg.limits.history_size, cfg.limits.history_bytes)
        router = self.router
        self.metrics = Metrics(lambda: self.router.known_models)
        self.tracing = Tracing(cfg.tracing)
        self.observer = Observer(
            self.metrics if cfg.metrics.address else None,  # no listener: no tallies either
            self.tracing if self.tracing.enabled else None,
        )
        self.orchestrator = Orchestrator(cfg, router, self.texts, self.history, self.observer)
        self._build_workers(cfg)
        self._build_registration(cfg)
        fleet = self.plane.snapshot if self.plane is not None else None
        app = build_app(cfg, self.orchestrator, self._extra_state, self._reload_route, fleet)
        admin = (
            build_admin_app(self.orchestrator, self._extra_state, self._reload_route, fleet)
            if cfg.admin.address
            else None
        )
        orch = self.orchestrator
        self.http = HttpServer(cfg, app, orch.counters, admin, orch.keys)
        # HTTP/3: the same generation routes, every other route relayed to aiohttp.
        self.quic = (
            Http3Server(cfg, fast_routes(app), self._relay_handler)
            if cfg.server.quic_address
            else None
        )
        self.grpc: GrpcServer | None = None
        if cfg.grpc.enabled:  # imported here: the stubs are generated by `make protos`
            from neutrino.frontends.grpc.server import GrpcServer

            self.grpc = GrpcServer(cfg, self.orchestrator)
        self.router.listeners.append(self._engines_changed)
        self._warming: set[str] = set()
        self.trimmer = HeapTrimmer()
        self._ready_report: asyncio.Task[None] | None = None

    def _pool_connected(self, name: str) -> bool:
        return any(p.name == name and p.connected for p in self.router.pools)

    def _relay_handler(self) -> asyncio.Protocol:
        """An aiohttp request handler for an HTTP/3 request of the other routes."""
        server = self.http.runner.server
        assert server is not None  # set up by http.start(), before HTTP/3 starts
        return server()

    def _build_workers(self, cfg: Config) -> None:
        """The metrics listener, and in a worker of --workers what it shares with the rest:
        its socket for the others, merged metrics, the reload fan-out."""
        self.peers = (
            Peers(cfg.worker, cfg.server.workers, self.orchestrator, self.metrics_raw)
            if cfg.worker.active
            else None
        )
        # In a worker: asks the supervisor to reload every worker (True when asked).
        self.fan_out: Callable[[], bool] | None = self.peers.signal_reload if self.peers else None
        gather = self.peers.gather_raw if self.peers is not None else None
        self.metrics_server = (
            MetricsServer(
                cfg.metrics.address,
                self.metrics_raw,
                gather,
                gather is not None,
                cfg.server.listen_backlog,
            )
            if cfg.metrics.address
            else None
        )

    def _build_registration(self, cfg: Config) -> None:
        """[sombrero] and [discovery]: this server's record and load, and who sends them
        (under --workers, the first worker, for all)."""
        self.instance: Instance | None = None
        self.registrars: list[Registrar] = []
        self._refresh: asyncio.Task[None] | None = None
        if not (cfg.sombrero.address or cfg.discovery.etcd):
            return
        self.instance = Instance(self)
        self.observer.finished = self.instance.finished
        if self.peers is None or self.peers.index == 0:
            self.registrars = registrars(cfg, self.instance)

    def _start_registration(self) -> None:
        if self.peers is not None and self.instance is not None and self.registrars:
            self._refresh = asyncio.get_running_loop().create_task(
                self.instance.refresh(self._gather_raws), name="registration-load"
            )
        for registrar in self.registrars:
            registrar.start()

    async def _gather_raws(self) -> list[Mapping[str, object]]:
        """Every worker's metrics (for the load reports: their live values summed)."""
        return list(await self.peers.gather_raw()) if self.peers is not None else []

    async def _deregister(self) -> None:
        """Drain's first step: leave the balancer and etcd (bounded; never raises)."""
        if self.registrars:
            within = min(2.0, max(0.5, self.cfg.shutdown.grace_s / 2))
            await asyncio.gather(*(r.deregister(within) for r in self.registrars))
        if self._refresh is not None:
            self._refresh.cancel()

    def metrics_raw(self) -> Raw:
        """This process's metrics: the tallies, and the values read now."""
        orch = self.orchestrator
        raw = self.metrics.raw()
        raw["live"] = {
            "running": orch.inflight,
            "waiting": orch.admission.queued,
            **orch.counters.snapshot(),
        }
        raw["engines"] = {
            pool.name: {"connections": len(pool.connections), **pool.stats.snapshot()}
            for pool in self.router.pools
        }
        lifecycle = self.router.lifecycle.models
        if lifecycle:
            raw["lifecycle"] = {name: dataclasses.asdict(c) for name, c in lifecycle.items()}
        if self.router.routing.models or self.router.resender.used:
            raw["routing"] = self.router.routing.counts()
            resender = self.router.resender
            budget, migrations = resender.budget, resender.migrations
            raw["failover"] = {
                "retries": budget.retries,
                "retries_refused": budget.refused,
                "ejections": {n: h.ejected_total for n, h in resender.outliers.health.items()},
                "migrations": dict(migrations.moved),
                "migrations_refused": dict(migrations.refused),
            }
        if self.processes.engines:
            raw["processes"] = {
                m.name: {"state": m.state, "pid": m.pid, "restarts": m.restarts}
                for m in self.processes.engines.values()
            }
        if self.plane is not None:
            raw["fleet"] = self.plane.raw()
        if self.instance is not None:  # summed over workers for the load reports
            raw["live"]["tokens_per_s"] = self.instance.estimator.tokens_per_s(time.monotonic())
        return raw

    async def _extra_state(self) -> dict[str, object]:
        extra: dict[str, object] = {}
        if self.processes.engines:
            extra["managed_engines"] = self.processes.snapshot()
        mock = self.processes.engines.get(MOCK_NAME)
        if mock is not None:
            extra["embedded_mock"] = {"pid": mock.pid, "restarts": mock.restarts}
        if self.registrars:
            extra["registration"] = [r.snapshot() for r in self.registrars]
        if self.router.routing.models or self.router.resender.used:
            extra["routing"] = {
                **self.router.routing.snapshot(),
                "failover": self.router.failover_snapshot(),
            }
        lifecycle = self.router.lifecycle.models
        if lifecycle:
            extra["model_lifecycle"] = {n: dataclasses.asdict(c) for n, c in lifecycle.items()}
        if self.plane is not None:
            extra["fleet"] = self.plane.snapshot()
        if self.peers is not None:
            extra["worker"] = self.peers.index
            extra["workers"] = await self.peers.gather_state()
        return extra

    def _engines_changed(self) -> None:
        self.orchestrator.admission.wake()
        if self.grpc is not None:
            self.grpc.engines_changed()
        loop = asyncio.get_running_loop()
        for name, info in self.router.models().items():
            if name not in self._warming and self.texts.cached(name) is None:
                self._warming.add(name)
                warm = loop.run_in_executor(None, self._warm, name, info.can(Capability.GENERATE))
                warm.add_done_callback(self._warmed)

    def _warm(self, name: str, chat: bool) -> None:
        with contextlib.suppress(Exception):
            self.texts.get(name, chat)

    @staticmethod
    def _warm_all(texts: ModelTexts, models: Mapping[str, ModelInfo]) -> None:
        for name, info in models.items():
            with contextlib.suppress(Exception):  # a model that fails says so when used
                texts.get(name, info.can(Capability.GENERATE))

    def _warmed(self, _: object) -> None:
        """Once every model's text assets are loaded, what the process holds from then on
        (tokenizer tables, templates: hundreds of thousands of objects) leaves the
        garbage collector's view: a full collection walked them all, holding the event
        loop some 40 ms each time a burst of allocations set one off."""
        if all(self.texts.settled(m) for m in self.router.models()):
            gc.freeze()

    async def start(self, wait_engine_s: float = 10.0) -> None:
        """Start everything; if any part fails (a StartupError: a port taken...), what had
        started is stopped (the embedded mock_ie too, its folder removed) before it is raised."""
        t0 = time.monotonic()
        threads = ThreadPoolExecutor(self.cfg.server.offload_threads, "neutrino-offload")
        asyncio.get_running_loop().set_default_executor(threads)  # asyncio.to_thread's
        # A thread running Python (a dense body's decoding) gives the interpreter back to
        # the event loop within 1 ms of its asking, not 5 (the default): each of the
        # loop's waits for it, several per request it answers meanwhile, stays short.
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        try:
            started = await self.processes.start(self.cfg.engines)
            self.processes.adopt(started, self.cfg.engines)
            self.processes.watch(self._pool_connected)
            await self.router.start()
            if self.poller is not None:
                await self.poller.start()
            await self.http.start()
            if self.quic is not None:
                await self.quic.start()
                h1_wire.advertise_h3(alt_svc(self.quic.port))
            if self.grpc is not None:
                await self.grpc.start()
            if self.metrics_server is not None:
                await self.metrics_server.start()
            if self.peers is not None:
                await self.peers.start()
        except BaseException:
            try:
                await self.stop()
            except Exception:  # the start-up's own error is the one to report
                log.debug("stopping after a failed start-up", exc_info=True)
            finally:
                self.processes.remove_folder()
            raise
        self.trimmer.start()
        self._start_registration()
        log.info("Neutrino listening on http://%s:%d", self.cfg.server.http_host, self.http.port)
        log.info("%s", self.orchestrator.keys.describe())
        # Said once an engine is there (or not, after a while); a signal meanwhile stops
        # the server at once instead of after this wait.
        self._ready_report = asyncio.get_running_loop().create_task(
            self._report_ready(t0, wait_engine_s), name="engine-ready"
        )

    async def _report_ready(self, t0: float, wait_s: float) -> None:
        if self.plane is not None:
            up = len(self.plane.topology.up())
            log.info("fleet: %d of %d nodes up, %d models in the catalogue", up,
                     len(self.plane.topology.nodes), len(self.plane.entries))  # fmt: skip
            if not self.router.pools:
                return
        if await self.router.wait_ready(wait_s):
            log.info("engine ready after %.2fs", time.monotonic() - t0)
        else:
            log.warning("no engine connected yet; serving 503 until one is")

    async def stop(self) -> None:
        """Drain: refuse new requests, give those in flight ``[shutdown] grace_s``, then end
        the rest as failed requests (each front end writes its ending: an SSE error event
        and [DONE], a 503, gRPC UNAVAILABLE; the engine gets one cancel, "shutdown"), and
        only then close the listeners and connections. Before all that, the server leaves
        the load balancer and etcd, so that new requests stop coming."""
        await self._deregister()
        await self.trimmer.stop()
        if self._ready_report is not None:
            self._ready_report.cancel()
        orch = self.orchestrator
        orch.draining = True
        if self.grpc is not None:
            await self.grpc.drain()
        deadline = time.monotonic() + self.cfg.shutdown.grace_s
        while (orch.inflight or orch.admission.queued) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        ended = orch.shutdown()
        if ended:
            log.warning("shutdown: ended %d requests still running after the grace period", ended)
            await self._endings_written(_ENDINGS_S)
        if self.quic is not None:
            h1_wire.advertise_h3("")
            await self.quic.stop()
        await self.http.stop()
        if self.grpc is not None:
            # Calls still running are ending with UNAVAILABLE (the requests were ended
            # above), health watches are left: a moment for both (stop returns as soon as
            # no call is left).
            floor = 0.5 if ended else 0.1
            await self.grpc.stop(max(floor, min(1.0, deadline - time.monotonic())))
        if self.poller is not None:
            await self.poller.stop()
        if self.plane is not None:
            await self.plane.close()  # its engines stay loaded on the nodes (adopted again)
        await self.router.close()
        for task, old in list(self._retiring.items()):
            task.cancel()
            await old.close()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        for registrar in self.registrars:
            await registrar.stop()
        await self.tracing.shutdown()
        if self.peers is not None:
            await self.peers.stop()
        await self.processes.stop()

    async def _endings_written(self, within_s: float) -> None:
        """Wait (bounded) until the HTTP handlers of the ended requests have written their
        endings; gRPC calls end within the server's own stop grace."""
        deadline = time.monotonic() + within_s
        quic = self.quic
        while (self.http.busy or (quic is not None and quic.busy)) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    # ------------------------------------------------------------------ reload

    async def reload(self) -> dict[str, object]:
        """Read the configuration again and apply it at once: engines, models (families,
        tokenizers, templates, parsers) and limits. Requests in flight finish where they
        started (on the old engines, with their own tokenizer and parsers). A bad
        configuration raises ConfigError and the running one stays."""
        if self._reload_config is None:
            raise ConfigError("this server was not started from a configuration to re-read")
        async with self._reload_lock:
            new = self._reload_config()
            gc.unfreeze()  # what the old models held may go; frozen again once warm
            mock = [e for e in self.cfg.engines if e.name == MOCK_NAME]
            # The embedded engine stays as it runs.
            engines = (
                (tuple(mock) or (mock_engine(new.mock),)) if new.embedded_mock else new.engines
            )
            new = replace(new, engines=self.processes.resolve(engines))
            try:
                texts = ModelTexts(new.model)
            except ValueError as exc:  # a family or parser that does not exist
                raise ConfigError(str(exc)) from None
            started = await self.processes.start(new.engines)
            try:
                router = await self._router_for(new)
            except BaseException:
                for engine in started:
                    await engine.stop()
                raise
            gone = self.processes.adopt(started, new.engines)
            # The served models' assets loaded before the swap: a reload never makes the
            # status route say "loading" (a load balancer's health check would flap).
            await asyncio.to_thread(self._warm_all, texts, router.models())
            old = self.router
            self.orchestrator.swap(new, router, texts)
            self.router, self.texts = router, texts
            self._warming.clear()  # the new texts load every model's assets again
            restart = [s for s in RESTART_SECTIONS if getattr(new, s) != getattr(self.cfg, s)]
            self.cfg = new
            self.processes.watch(self._pool_connected)
            if router is not old:
                self._retire(old, gone)
            self._engines_changed()
        if restart:
            log.warning(
                "reload: [%s] changed; these take effect at a restart", "], [".join(restart)
            )
        log.info("configuration reloaded (%d engines)", len(router.pools))
        return {
            "reloaded": True,
            "engines": [p.name for p in router.pools],
            "restart_needed": restart,
        }

    async def _reload_route(self) -> dict[str, object]:
        """POST /neutrino/v1/reload: this process reloads (a bad configuration is refused
        here); under --workers the supervisor then has every worker reload (SIGHUP)."""
        result = await self.reload()
        if self.fan_out is not None:
            result["every_worker"] = self.fan_out()
        return result

    async def _router_for(self, new: Config) -> EngineRouter:
        """The running router if the engines did not change; else a new one, connected
        (ConfigError if none of its engines connects in time)."""
        same = new.engines == self.cfg.engines and new.engine_link == self.cfg.engine_link
        if same or self.plane is not None:  # the fleet's engines live in this router
            if not same:
                log.warning("reload: with a fleet, [[engines]] changes take effect at a restart")
            self.router.configure_routing(new.routing)
            return self.router
        router = EngineRouter(new.engines, new.engine_link, new.routing)
        await router.start()
        if not await router.wait_ready(_RELOAD_ENGINES_S):
            await router.close()
            raise ConfigError(
                f"none of the new engines connected within {_RELOAD_ENGINES_S:g} s "
                f"({', '.join(e.socket for e in new.engines) or 'no engine configured'})"
            )
        router.listeners.append(self._engines_changed)
        return router

    def _retire(self, old: EngineRouter, gone: list[ManagedEngine]) -> None:
        """Close the old engines' connections once their requests have ended, then stop
        the managed engines the new configuration no longer has."""
        old.listeners.clear()

        async def retire() -> None:
            deadline = time.monotonic() + self.cfg.limits.request_timeout_s + 5
            while any(p.inflight for p in old.pools) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await old.close()
            for engine in gone:
                await engine.stop()

        task = asyncio.get_running_loop().create_task(retire(), name="retire-engines")
        self._retiring[task] = old
        task.add_done_callback(self._retired)

    def _retired(self, task: asyncio.Task[None]) -> None:
        self._retiring.pop(task, None)
