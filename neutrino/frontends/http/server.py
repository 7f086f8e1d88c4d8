"""The aiohttp application and its runner."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from neutrino.config import Config
from neutrino.config.checks import split_address
from neutrino.errors import NeutrinoError, StartupError, os_reason
from neutrino.frontends.common import client_request_id
from neutrino.frontends.http.admin import AdminRoutes, ExtraState, FleetState, Reload
from neutrino.frontends.http.anthropic.routes import AnthropicRoutes
from neutrino.frontends.http.guard import REFUSALS
from neutrino.frontends.http.h1 import server as h1
from neutrino.frontends.http.h1 import wire as h1_wire
from neutrino.frontends.http.h1.clock import Timeouts
from neutrino.frontends.http.modal.audio import AudioRoutes
from neutrino.frontends.http.modal.detect import DetectRoutes
from neutrino.frontends.http.modal.embeddings import EmbeddingRoutes
from neutrino.frontends.http.openai.routes import OpenAIRoutes
from neutrino.frontends.http.responses.routes import ResponsesRoutes
from neutrino.frontends.http.routes import FastRoutes
from neutrino.observability.counters import Counters
from neutrino.observability.logs import ClientErrorsQuiet
from neutrino.pipeline.auth import KeyRing
from neutrino.pipeline.orchestrator import Orchestrator

log = logging.getLogger("neutrino.http")


_FAST_ROUTES = web.AppKey("fast_routes", dict)
_HANDLERS_AT_STOP_S = 1.0


def build_admin_app(
    orchestrator: Orchestrator,
    extra_state: ExtraState,
    reload: Reload | None,
    fleet: FleetState | None = None,
) -> web.Application:
    """The admin listener's application ([admin] address): status, state, history, reload."""
    app = web.Application(client_max_size=1024 * 1024)
    routes = AdminRoutes(orchestrator, extra_state, admin_listener=True, reload=reload, fleet=fleet)
    routes.register(app)
    return app


def build_app(
    cfg: Config,
    orchestrator: Orchestrator,
    extra_state: ExtraState,
    reload: Reload | None = None,
    fleet: FleetState | None = None,
) -> web.Application:
    app = web.Application(client_max_size=cfg.limits.max_body_bytes)
    app[REFUSALS] = orchestrator.observe.refused
    app.on_response_prepare.append(_echo_request_id)
    app.on_response_prepare.append(_advertise_h3)
    fast: FastRoutes = {}
    # The generation routes of each API: served by the lean HTTP/1.1 server (and
    # HTTP/3) through their Exchange handlers, by aiohttp when the fast path is off.
    for api in (
        OpenAIRoutes(orchestrator),
        AnthropicRoutes(orchestrator),
        ResponsesRoutes(orchestrator),
    ):
        api.register(app)
        fast.update(api.fast_routes())
    app[_FAST_ROUTES] = fast
    EmbeddingRoutes(orchestrator).register(app)
    AudioRoutes(orchestrator).register(app)
    DetectRoutes(orchestrator).register(app)
    AdminRoutes(orchestrator, extra_state, reload=reload, fleet=fleet).register(app)
    return app


async def _echo_request_id(request: web.Request, response: web.StreamResponse) -> None:
    """A client's X-Request-Id comes back on every answer (the generation routes set
    their own: the request's id when the client sent none)."""
    if "X-Request-Id" not in response.headers:
        rid = client_request_id(request.headers.get("X-Request-Id", ""))
        if rid:
            response.headers["X-Request-Id"] = rid


async def _advertise_h3(request: web.Request, response: web.StreamResponse) -> None:
    """Alt-Svc on every answer while the HTTP/3 listener is on (as the lean server's)."""
    value = h1_wire.alt_svc()
    if value:
        response.headers["Alt-Svc"] = value


def fast_routes(app: web.Application) -> FastRoutes:
    """The generation routes' Exchange handlers (path -> handler), for HTTP/3."""
    routes: FastRoutes = app[_FAST_ROUTES]
    return routes


def _key_check(keys: KeyRing) -> h1.AdmitHead:
    """The API key check of a fast route's request head (the route checks it again)."""

    def check(headers: dict[bytes, bytes]) -> NeutrinoError | None:
        try:
            keys.authenticate(
                headers.get(b"authorization", b"").decode("latin-1"),
                headers.get(b"x-api-key", b"").decode("latin-1"),
            )
        except NeutrinoError as err:
            return err
        return None

    return check


class HttpServer:
    """The lean HTTP/1.1 server (generation routes) in front of the aiohttp app (the rest).

    With ``[http] fast_path = false`` every request is relayed to aiohttp.
    """

    def __init__(
        self,
        cfg: Config,
        app: web.Application,
        counters: Counters | None = None,
        admin_app: web.Application | None = None,
        keys: KeyRing | None = None,
    ) -> None:
        self.cfg = cfg
        self.app = app
        self.counters = counters
        self.keys = keys
        self.admin_runner = (
            web.AppRunner(admin_app, access_log=None, shutdown_timeout=_HANDLERS_AT_STOP_S)
            if admin_app is not None
            else None
        )
        self.admin_port = 0
        self.runner = web.AppRunner(
            app,
            handler_cancellation=True,
            access_log=None,
            keepalive_timeout=cfg.http.keepalive_timeout_s,
            # At stop, requests have had the shutdown's grace and been ended already:
            # what is left (an upload still dribbling in, a write waiting on a client
            # that reads nothing) is cancelled after this, not after aiohttp's 60 s.
            shutdown_timeout=_HANDLERS_AT_STOP_S,
        )
        self.port = cfg.server.http_port
        self._server: asyncio.Server | None = None
        self._connections: set[h1.H1Protocol] = set()

    async def start(self) -> None:
        quiet = logging.getLogger("aiohttp.server")
        if not any(isinstance(f, ClientErrorsQuiet) for f in quiet.filters):
            quiet.addFilter(ClientErrorsQuiet())
        await self.runner.setup()
        host, port = self.cfg.server.http_host, self.cfg.server.http_port
        http = self.cfg.http
        # Without the fast path every request is relayed to aiohttp, through the same
        # connection handling (its head, body and keep-alive timeouts).
        routes = self.app[_FAST_ROUTES] if http.fast_path else {}
        timeouts = Timeouts(
            http.header_timeout_s,
            http.body_timeout_s,
            http.keepalive_timeout_s,
            self.cfg.limits.send_timeout_s,
            http.min_body_rate,
            http.body_grace_s,
        )
        keys = self.keys
        admit_head = _key_check(keys) if keys is not None and keys.enabled else None
        relay = self.runner.server
        assert relay is not None
        try:
            self._server, self._connections = await h1.serve(
                host,
                port,
                routes,
                relay,
                self.cfg.limits.max_body_bytes,
                timeouts,
                self.counters,
                admit_head,
                reuse_port=self.cfg.worker.active,  # shared by the workers of --workers
                backlog=self.cfg.server.listen_backlog,
            )
            sockets = list(self._server.sockets)
        except OSError as exc:
            raise StartupError(
                f"cannot listen for HTTP on {host}:{port}: {os_reason(exc)} "
                "(set [server] http_host and http_port, or --http-address)"
            ) from exc
        if sockets:
            self.port = sockets[0].getsockname()[1]
        if self.admin_runner is not None:
            await self._start_admin(self.admin_runner)

    async def _start_admin(self, runner: web.AppRunner) -> None:
        address = self.cfg.admin.address
        host, port = split_address(address, "[admin] address")
        await runner.setup()
        site = web.TCPSite(
            runner,
            host,
            port,
            reuse_address=True,
            reuse_port=self.cfg.worker.active,
            backlog=self.cfg.server.listen_backlog,
        )
        try:
            await site.start()
        except OSError as exc:
            raise StartupError(
                f"cannot listen for the admin routes on {address}: {os_reason(exc)} "
                "(set [admin] address)"
            ) from exc
        server = getattr(site, "_server", None)
        sockets = list(getattr(server, "sockets", None) or [])
        if sockets:
            self.admin_port = sockets[0].getsockname()[1]
        log.info("admin routes listening on %s:%d", host, self.admin_port)

    @property
    def busy(self) -> int:
        """Connections of the lean server still answering a request."""
        return sum(1 for c in self._connections if c.busy)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            h1.close_idle(self._connections)
        if self.admin_runner is not None and self.admin_runner.server is not None:
            await self.admin_runner.cleanup()
        if self.runner.server is not None:  # set up by start()
            await self.runner.cleanup()  # relayed connections, and aiohttp's own
        h1.abort_all(self._connections)
