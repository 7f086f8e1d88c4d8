"""What every group of HTTP routes is: the base of each API's and the admin routes.

A group serves requests through the pipeline (``orch``). It names its routes once: the
aiohttp handlers (``aiohttp_routes``: method, path, handler of an ``aiohttp`` request),
and the generation routes that answer on an :class:`Exchange` (``exchange_routes``: path,
handler), which the lean HTTP/1.1 server and HTTP/3 serve directly (``fast_routes``) and
aiohttp serves through an :class:`AiohttpExchange` when the fast path is off. Every
handler is wrapped by ``guarded`` on aiohttp.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from aiohttp import web

from neutrino.config import Config
from neutrino.frontends.http.exchange import AiohttpExchange, Exchange
from neutrino.frontends.http.guard import guarded
from neutrino.pipeline.orchestrator import Orchestrator

ExchangeHandler = Callable[[Exchange], Awaitable[None]]
AiohttpHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# The generation routes of every API, for the lean transports: path -> handler.
FastRoutes = dict[bytes, ExchangeHandler]


class RouteGroup:
    """One group of routes over the pipeline."""

    def __init__(self, orchestrator: Orchestrator) -> None:
        self.orch = orchestrator
        self._keepalive = orchestrator.cfg.http.sse_keepalive_s

    @property
    def cfg(self) -> Config:
        """The running configuration (the orchestrator's: a reload swaps it)."""
        return self.orch.cfg

    def aiohttp_routes(self) -> Sequence[tuple[str, str, AiohttpHandler]]:
        """Its routes that only aiohttp serves: (method, path, handler)."""
        return ()

    def exchange_routes(self) -> Mapping[str, ExchangeHandler]:
        """Its ``POST`` routes answered on an Exchange (every transport): path -> handler."""
        return {}

    def register(self, app: web.Application) -> None:
        router = app.router
        for path, on_exchange in self.exchange_routes().items():
            router.add_post(path, guarded(self._on_aiohttp(on_exchange)))
        for method, path, handler in self.aiohttp_routes():
            if method == "GET":  # with HEAD, as aiohttp's add_get has it
                router.add_get(path, guarded(handler))
            else:
                router.add_route(method, path, guarded(handler))

    def fast_routes(self) -> FastRoutes:
        """Its Exchange routes for the lean HTTP/1.1 server and HTTP/3."""
        return {path.encode(): h for path, h in self.exchange_routes().items()}

    def _on_aiohttp(self, handler: ExchangeHandler) -> AiohttpHandler:
        async def serve(request: web.Request) -> web.StreamResponse:
            ex = AiohttpExchange(request, self.cfg.limits.send_timeout_s)
            await handler(ex)
            assert ex.response is not None
            return ex.response

        return serve
