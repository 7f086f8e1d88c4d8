"""Model listing and Neutrino's own status, state and history endpoints."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from neutrino import __version__
from neutrino.config import ConfigError, RouteConfig
from neutrino.errors import ErrorKind, NeutrinoError, bad_request
from neutrino.frontends.http.browsers import foreign_origin, preflighted
from neutrino.frontends.http.exchange import json_response
from neutrino.frontends.http.guard import caller, error_response
from neutrino.frontends.http.routes import AiohttpHandler, RouteGroup
from neutrino.observability.process import process_stats
from neutrino.pipeline.orchestrator import Orchestrator

_CATCH_ALL = "/{tail:.*}"


def _unavailable(status: str, kind: ErrorKind, down: list[str] | None = None) -> web.Response:
    resp = json_response({"status": status, **({"down": down} if down else {})}, 503)
    resp.headers["Retry-After"] = str(kind.spec.retry_after_s)
    return resp


# Re-reads the configuration and applies it (Neutrino.reload); raises ConfigError.
Reload = Callable[[], Awaitable[dict[str, object]]]
# What app_state adds to its own fields (the embedded engine, the workers of --workers).
ExtraState = Callable[[], Awaitable[dict[str, object]]]
# The fleet's nodes and catalogue, as the control plane knows them (/neutrino/v1/nodes).
FleetState = Callable[[], dict[str, object]]


class AdminRoutes(RouteGroup):
    """Models, status, and the admin routes (state, history).

    On the public listener the admin routes want an admin key when keys are set (or
    are absent, when ``[admin] address`` gives them a listener of their own); status and
    health stay open to load balancers' probes.
    """

    def __init__(
        self,
        orchestrator: Orchestrator,
        extra_state: ExtraState,
        admin_listener: bool = False,
        reload: Reload | None = None,
        fleet: FleetState | None = None,
    ) -> None:
        super().__init__(orchestrator)
        self._reload = reload
        self._fleet = fleet
        self._extra = extra_state
        self._started = time.time()
        self._on_admin_listener = admin_listener

    def aiohttp_routes(self) -> list[tuple[str, str, AiohttpHandler]]:
        routes: list[tuple[str, str, AiohttpHandler]] = []
        if not self._on_admin_listener:
            routes += [
                ("GET", "/v1/models", self.models),
                ("GET", "/v1/models/{model:.+}", self.model),
            ]
        routes += [
            ("GET", "/neutrino/v1/status", self.status),
            ("GET", "/neutrino/v1/live", self.live),
            ("GET", "/health", self.status),
        ]
        if self._on_admin_listener or not self.orch.keys.admin_listener:
            routes += [
                ("GET", "/neutrino/v1/app_state", self.app_state),
                ("GET", "/neutrino/v1/history", self.history),
                ("GET", "/neutrino/v1/nodes", self.nodes),
                ("POST", "/neutrino/v1/reload", self.reload),
                ("POST", "/neutrino/v1/models/{model:.+}/load", self.load_model),
                ("POST", "/neutrino/v1/models/{model:.+}/unload", self.unload_model),
                ("POST", "/neutrino/v1/engines/{engine}/drain", self.drain_engine),
                ("POST", "/neutrino/v1/engines/{engine}/resume", self.resume_engine),
            ]
        return [*routes, ("*", _CATCH_ALL, self.not_found)]

    def _admin(self, request: web.Request, changes_state: bool = False) -> None:
        """Let a call of an admin route through, or raise: the keys decide where admin
        keys exist; with none, a browser's request from a page of another origin is
        refused, and a request that changes state must be one no page could send to
        another site unasked (browsers.py)."""
        headers = request.headers
        keys = self.orch.keys
        keys.authorize_admin(
            headers.get("Authorization", ""),
            headers.get("x-api-key", ""),
            self._on_admin_listener,
        )
        if keys.admin_keys:
            return
        allowed = self.orch.cfg.admin.allowed_origins
        origin = foreign_origin(headers.get("Origin"), headers.get("Host", ""), allowed)
        if origin is not None:
            raise NeutrinoError(
                ErrorKind.PERMISSION_DENIED,
                f"the admin routes refuse requests from the web page at {origin[:128]!r}; "
                "name it in [admin] allowed_origins, or set an admin key",
            )
        if changes_state and not preflighted(
            headers.get("Content-Type"), headers.get("X-Requested-With")
        ):
            raise NeutrinoError(
                ErrorKind.UNSUPPORTED_MEDIA_TYPE,
                f"{request.method} {request.path} takes a JSON body (Content-Type: "
                "application/json) or an X-Requested-With header",
            )

    def _model_card(self, name: str, ctx: int) -> dict[str, object]:
        card: dict[str, object] = {
            "id": name,
            "object": "model",
            "created": int(self._started),
            "owned_by": "neutrino",
        }
        if ctx:  # 0: not known (a passthrough upstream that does not say)
            card["max_model_len"] = ctx
        engines = self.orch.engines.model_engines(name)
        states = {state.name.lower() for _, state in engines}
        # Loaded where any engine holds it; else loading, else unloaded (loaded on demand).
        if not states:  # no engine holds it now: as its listing says (a fleet's catalogue)
            info = self.orch.engines.models().get(name)
            card["status"] = info.state.name.lower() if info is not None else "loaded"
        elif "loaded" in states:
            card["status"] = "loaded"
        else:
            card["status"] = "loading" if "loading" in states else "unloaded"
        card["engines"] = [{"name": e, "status": state.name.lower()} for e, state in engines]
        served = self.orch.texts.card(name)  # a model served from its own folder
        if served is not None:
            card["neutrino"] = served
        return card

    async def load_model(self, request: web.Request) -> web.Response:
        """POST /neutrino/v1/models/{id}/load (admin): load it now, on an engine that loads
        models on demand (evicting others as a request's load would)."""
        self._admin(request, changes_state=True)
        name = request.match_info["model"]
        await self.orch.engines.load(name, self.orch.cfg.limits.request_timeout_s)
        info = self.orch.engines.models()[name]
        return json_response(self._model_card(info.name, info.context_length))

    async def unload_model(self, request: web.Request) -> web.Response:
        """POST /neutrino/v1/models/{id}/unload (admin): unload it (its requests end first)."""
        self._admin(request, changes_state=True)
        name = request.match_info["model"]
        if name not in self.orch.engines.models():
            raise NeutrinoError(
                ErrorKind.MODEL_NOT_FOUND, f"the model {name!r} does not exist", param="model"
            )
        await self.orch.engines.unload(name)
        info = self.orch.engines.models()[name]
        return json_response(self._model_card(info.name, info.context_length))

    async def drain_engine(self, request: web.Request) -> web.Response:
        """POST /neutrino/v1/engines/{name}/drain (admin): no request goes to the engine
        from now on; the answers it is making go on on other replicas
        (engine/fleet/migration.py)."""
        self._admin(request, changes_state=True)
        name = request.match_info["engine"]
        moved = self.orch.engines.drain(name)
        return json_response({"engine": name, "draining": True, "moved": moved})

    async def resume_engine(self, request: web.Request) -> web.Response:
        """POST /neutrino/v1/engines/{name}/resume (admin): route to a drained engine again."""
        self._admin(request, changes_state=True)
        name = request.match_info["engine"]
        self.orch.engines.resume(name)
        return json_response({"engine": name, "draining": False})

    async def models(self, request: web.Request) -> web.Response:
        """The served models (those the caller's key may use)."""
        principal = caller(self.orch.keys, request)
        models = self.orch.engines.models()
        data = [
            self._model_card(m.name, m.context_length)
            for m in models.values()
            if principal is None or principal.allows(m.name)
        ]
        data += [
            self._route_card(route)
            for route in self.orch.routes.by_name.values()
            if principal is None or principal.allows(route.name)
        ]
        return json_response({"object": "list", "data": data})

    def _route_card(self, route: RouteConfig) -> dict[str, object]:
        """A manifest route as a model: its router and the models it may pick."""
        return {
            "id": route.name,
            "object": "model",
            "created": int(self._started),
            "owned_by": "neutrino",
            "status": "loaded",
            "route": {"router": route.router, "intents": dict(route.intents),
                      "fallback": route.fallback},
        }  # fmt: skip

    async def model(self, request: web.Request) -> web.Response:
        principal = caller(self.orch.keys, request)
        name = request.match_info["model"]
        info = self.orch.engines.models().get(name)
        if info is None or (principal is not None and not principal.allows(name)):
            return error_response(
                NeutrinoError(
                    ErrorKind.MODEL_NOT_FOUND, f"the model {name!r} does not exist", param="model"
                )
            )
        return json_response(self._model_card(info.name, info.context_length))

    async def live(self, request: web.Request) -> web.Response:
        """Liveness: 200 while the process answers, engines or not, draining or not (a
        supervisor restarts it only when it does not; readiness is the status route)."""
        return json_response({"status": "alive", "draining": self.orch.draining})

    async def status(self, request: web.Request) -> web.Response:
        engines = self.orch.engines
        if self.orch.draining:
            return _unavailable("draining", ErrorKind.SHUTTING_DOWN)
        # Engines (and upstreams) not connected now, and why when it is known.
        down = [
            f"{e['name']}: {e['problem']}" if e.get("problem") else str(e["name"])
            for e in engines.snapshot()
            if not e.get("connected")
        ]
        if not engines.has_engine():
            return _unavailable("no_engine", ErrorKind.NO_ENGINE, down)
        if not all(self.orch.texts.settled(m) for m in engines.models()):
            return json_response({"status": "loading"}, 503)
        ok: dict[str, object] = {"status": "ok", "models": sorted(engines.models())}
        if down:
            ok["down"] = down
        return json_response(ok)

    async def reload(self, request: web.Request) -> web.Response:
        """Re-read the configuration (as SIGHUP does); 400 and the running one stays
        when the new one is refused."""
        self._admin(request, changes_state=True)
        if self._reload is None:
            raise NeutrinoError(ErrorKind.NOT_FOUND, "reload is not available here")
        try:
            return json_response(await self._reload())
        except ConfigError as exc:
            raise NeutrinoError(
                ErrorKind.BAD_REQUEST,
                f"the configuration was not reloaded: {exc}; the running one stays",
                code="invalid_config",
            ) from None

    async def app_state(self, request: web.Request) -> web.Response:
        self._admin(request)
        orch = self.orch
        engines = orch.engines.snapshot()
        state = {
            "version": __version__,
            "uptime_s": round(time.time() - self._started, 3),
            "draining": orch.draining,
            "engines": engines,
            "connections": sum(_count(e.get("connections")) for e in engines),
            "queue_depth": orch.admission.queued,
            "queue_shed": orch.admission.shed,  # queued requests dropped for higher ones
            "fair_shares": orch.admission.usage(),  # each key's tokens lately, as weighed
            "rate_limits": orch.quotas.store.describe(),  # where the key's counters are
            "in_flight": orch.inflight,
            "capacity": orch.engines.capacity(),
            "requests": {"started": orch.started, "finished": dict(orch.finished)},
            "history_size": len(orch.history),
            "counters": orch.counters.snapshot(),
            "process": process_stats(),
        }
        state.update(await self._extra())
        return json_response(state)

    async def nodes(self, request: web.Request) -> web.Response:
        """The fleet: each node agent (up or down, its host, devices, memory, models) and
        the catalogue (where each model is placed)."""
        self._admin(request)
        if self._fleet is None:
            raise NeutrinoError(
                ErrorKind.NOT_FOUND, "no fleet is configured ([[nodes]] or [fleet] etcd)"
            )
        return json_response(self._fleet())

    async def history(self, request: web.Request) -> web.Response:
        self._admin(request)
        raw = request.query.get("limit", "50")
        try:
            limit = int(raw)
        except ValueError:
            return error_response(bad_request("limit must be an integer", "limit"))
        if limit < 0:
            return error_response(bad_request("limit must not be negative", "limit"))
        return json_response(
            {
                "object": "list",
                "data": self.orch.history.latest(limit),
                "total": self.orch.history.total,
            }
        )

    async def not_found(self, request: web.Request) -> web.Response:
        """No route for the request: a 405 naming the methods the path takes (RFC 9110's
        ``Allow``) where another method is served on it, else a 404."""
        allowed = await _methods_on(request)
        if not allowed:
            return error_response(
                NeutrinoError(ErrorKind.NOT_FOUND, f"no route for {request.method} {request.path}")
            )
        resp = error_response(
            NeutrinoError(
                ErrorKind.METHOD_NOT_ALLOWED,
                f"method {request.method} is not allowed on {request.path}",
            )
        )
        resp.headers["Allow"] = ", ".join(sorted(allowed))
        return resp


async def _methods_on(request: web.Request) -> set[str]:
    """The methods the listener's routes serve on the request's path (the catch-all
    route that sent it here aside)."""
    allowed: set[str] = set()
    for resource in request.app.router.resources():
        if resource.canonical == _CATCH_ALL:
            continue
        match, methods = await resource.resolve(request)
        if match is None:
            allowed |= methods
    return allowed


def _count(v: object) -> int:
    return v if isinstance(v, int) else 0
