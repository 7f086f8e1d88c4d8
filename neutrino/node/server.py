"""The node agent's HTTP API (aiohttp) and its life: listening (loopback unless told
otherwise), every call behind the shared bearer token, registered in etcd when asked,
and at its end every engine it started stopped.

``GET /livez`` (the one call without the token: a probe's, it tells nothing),
``GET /discovery``, ``GET /health``, ``GET /models``, ``GET /models/{id}``,
``POST /models/load``, ``POST /models/unload``, ``GET /models/{id}/endpoint``; a refusal
is ``{"error": {"type", "message"}}`` with its status (401 without the token).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from neutrino import __version__
from neutrino.config import DiscoveryConfig
from neutrino.errors import StartupError, os_reason
from neutrino.node import hostinfo
from neutrino.node.api import error_body, load_spec, model_id
from neutrino.node.config import NodeConfig
from neutrino.node.gpu import Gpus
from neutrino.node.harness import Harness, harnesses
from neutrino.node.table import MB, ModelState, ModelTable, NodeError, read_usage
from neutrino.registration.record import InstanceRecord, Listener, LoadReport, ServedModel

log = logging.getLogger("neutrino.node")

API_VERSION = 1
MAX_BODY_BYTES = 64 * 1024
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class NodeAgent:
    def __init__(self, cfg: NodeConfig) -> None:
        self.cfg = cfg
        self.started = time.monotonic()
        self.started_at = time.time()
        self.facts = hostinfo.host_facts()
        self.gpus, self.no_gpu = Gpus.open()
        self.harnesses: dict[str, Harness] = harnesses(cfg)
        self._missing = {name: h.missing() for name, h in self.harnesses.items()}
        budget = cfg.memory_budget or self.facts.memory_total_bytes
        self.table = ModelTable(self.harnesses, self.gpus, budget)
        self.runner: web.AppRunner | None = None
        self.registrar: Any = None
        self.port = cfg.port

    # ------------------------------------------------------------------ the app

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._auth], client_max_size=MAX_BODY_BYTES)
        app.router.add_get("/livez", self.livez)
        app.router.add_get("/discovery", self.discovery)
        app.router.add_get("/health", self.health)
        app.router.add_get("/models", self.models)
        app.router.add_post("/models/load", self.load)
        app.router.add_post("/models/unload", self.unload)
        app.router.add_get("/models/{model:.+}/endpoint", self.endpoint)
        app.router.add_get("/models/{model:.+}", self.model)
        return app

    @web.middleware
    async def _auth(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == "/livez":  # a probe's: says nothing but that it answers
            return await handler(request)
        given = request.headers.get("Authorization", "")
        scheme, _, token = given.partition(" ")
        expected = self.cfg.token.encode()
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected):
            return web.json_response(
                error_body("unauthorized", "a bearer token is required (Authorization: Bearer"
                           " TOKEN), and this one is missing or wrong"),
                status=401, headers={"WWW-Authenticate": 'Bearer realm="neutrino-node"'},
            )  # fmt: skip
        try:
            return await handler(request)
        except NodeError as exc:
            return web.json_response(error_body(exc.kind, exc.message), status=exc.status)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return web.json_response(error_body("http_error", exc.reason), status=exc.status)

    # ------------------------------------------------------------------ routes

    async def livez(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "alive"})

    async def discovery(self, request: web.Request) -> web.Response:
        gpus = self.gpus
        body: dict[str, Any] = {
            "node": self.cfg.node_name,
            "version": __version__,
            "api": API_VERSION,
            **self.facts.to_dict(),
            "memory_budget_mb": self.table.budget_bytes // MB,
            "devices": [d.to_dict() for d in gpus.facts()] if gpus is not None else [],
            "driver_version": gpus.driver_version if gpus is not None else "",
            "cuda_version": gpus.cuda_version if gpus is not None else "",
            "gpu_note": self.no_gpu,
            "harnesses": [
                {
                    "name": name,
                    "kind": h.kind,
                    "available": not self._missing[name],
                    "reason": self._missing[name],
                }
                for name, h in self.harnesses.items()
            ],
        }
        return web.json_response(body)

    async def _measure(self) -> None:
        usage = await asyncio.to_thread(read_usage, self.table.live_pids(), self.gpus)
        self.table.measured(usage)

    async def health(self, request: web.Request) -> web.Response:
        await self._measure()
        used, free = hostinfo.host_memory()
        table = self.table
        held = table.held_bytes()
        states = [e.state for e in table.entries.values()]
        devices = self.gpus.health() if self.gpus is not None else []
        return web.json_response(
            {
                "node": self.cfg.node_name,
                "uptime_s": round(time.monotonic() - self.started, 3),
                "memory": {
                    "used_mb": used // MB,
                    "free_mb": free // MB,
                    "budget_mb": table.budget_bytes // MB,
                    "held_mb": held // MB,
                    # What a new model may take: the budget's rest, and no more than is free.
                    "budget_free_mb": max(0, min(table.budget_bytes - held, free)) // MB,
                },
                "load": list(hostinfo.load_average()),
                "devices": [d.to_dict() for d in devices],
                "models": {s.value: states.count(s) for s in ModelState},
            }
        )

    async def models(self, request: web.Request) -> web.Response:
        await self._measure()
        return web.json_response({"models": [e.to_dict() for e in self.table.entries.values()]})

    def _entry(self, request: web.Request) -> Any:
        model = model_id(request.match_info["model"])
        entry = self.table.entries.get(model)
        if entry is None:
            raise NodeError(404, "not_found", f"no model {model!r} on this node")
        return entry

    async def model(self, request: web.Request) -> web.Response:
        entry = self._entry(request)
        return web.json_response(entry.to_dict())

    async def load(self, request: web.Request) -> web.Response:
        doc = await _json(request)
        devices = len(self.gpus) if self.gpus is not None else 0
        spec, wait, timeout = load_spec(doc, self.cfg.models_dir, devices)
        await self._measure()
        entry = self.table.load(spec)
        if wait and entry.state is ModelState.LOADING:
            try:
                async with asyncio.timeout(timeout):
                    await entry.settled.wait()
            except TimeoutError:
                pass  # still loading: said so
        status = {ModelState.LOADED: 200, ModelState.LOADING: 202}.get(entry.state, 500)
        if entry.state is ModelState.FAILED:
            return web.json_response(
                {**error_body("load_failed", entry.reason), "model": entry.to_dict()}, status=502
            )
        return web.json_response(entry.to_dict(), status=status)

    async def unload(self, request: web.Request) -> web.Response:
        doc = await _json(request)
        if not isinstance(doc, dict) or set(doc) - {"model"}:
            raise NodeError(400, "invalid_request", 'the body must be {"model": ID}')
        entry = await self.table.unload(model_id(doc.get("model")))
        return web.json_response(entry.to_dict())

    async def endpoint(self, request: web.Request) -> web.Response:
        entry = self._entry(request)
        found = self.harnesses[entry.spec.harness].endpoint(entry.spec.model)
        if entry.state is not ModelState.LOADED or found is None:
            raise NodeError(
                409, "not_loaded", f"{entry.spec.model!r} is {entry.state.value}, not loaded"
            )
        return web.json_response({"model": entry.spec.model, **found.to_dict()})

    # ------------------------------------------------------------------ etcd

    def record(self) -> InstanceRecord:
        loaded = [m for m, e in self.table.entries.items() if e.state is ModelState.LOADED]
        host = self.cfg.advertised
        where = f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"
        return InstanceRecord(
            instance_id=self.cfg.node_name,
            version=__version__,
            listeners=(Listener("node", where),),
            models=tuple(ServedModel(m, 0) for m in sorted(loaded)),
            capacity=0,
            workers=1,
            started_at=self.started_at,
        )

    # ------------------------------------------------------------------ life

    async def start(self) -> None:
        for harness in self.harnesses.values():
            await harness.start()
        self.runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self.runner.setup()
        family = socket.AF_INET6 if ":" in self.cfg.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.cfg.host, self.cfg.port))
        except OSError as exc:
            sock.close()
            raise StartupError(
                f"cannot listen on {self.cfg.host}:{self.cfg.port}: {os_reason(exc)}"
            ) from None
        self.port = sock.getsockname()[1]
        await web.SockSite(self.runner, sock).start()
        if self.cfg.etcd:
            from neutrino.registration.etcd import EtcdRegistrar

            discovery = DiscoveryConfig(self.cfg.etcd, self.cfg.etcd_prefix, self.cfg.lease_ttl_s)
            self.registrar = EtcdRegistrar(discovery, _Record(self))
            self.registrar.start()
        available = [n for n, why in self._missing.items() if not why]
        log.info(
            "node %s listening on http://%s:%d (models from %s, budget %d MB, %d GPUs; "
            "harnesses: %s)",
            self.cfg.node_name, self.cfg.host, self.port, self.cfg.models_dir,
            self.table.budget_bytes // MB, len(self.gpus) if self.gpus else 0,
            ", ".join(available) or "none",
        )  # fmt: skip

    async def stop(self) -> None:
        if self.registrar is not None:
            await self.registrar.deregister(2.0)
        if self.runner is not None:
            await self.runner.cleanup()
        await self.table.close()
        if self.gpus is not None:
            self.gpus.close()
        log.info("node %s stopped", self.cfg.node_name)


async def _json(request: web.Request) -> Any:
    try:
        return await request.json()
    except ValueError:
        raise NodeError(400, "invalid_request", "the body must be JSON") from None


async def serve(cfg: NodeConfig) -> None:
    """Run the agent until SIGINT or SIGTERM; then stop every engine it started."""
    agent = NodeAgent(cfg)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await agent.start()
        await stop.wait()
    finally:
        await agent.stop()


class _Record:
    """The agent as etcd's registrar reads it: its record, and no load of its own."""

    def __init__(self, agent: NodeAgent) -> None:
        self._agent = agent

    def record(self) -> InstanceRecord:
        return self._agent.record()

    def load(self) -> LoadReport:
        return LoadReport(0, 0, 0.0, 0.0, 0)
