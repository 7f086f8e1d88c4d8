"""The aiohttp application and its runner."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web

from neutrino.config import Config
from neutrino.frontends.http.admin import AdminRoutes
from neutrino.frontends.http.audio import AudioRoutes
from neutrino.frontends.http.detect import DetectRoutes
from neutrino.frontends.http.embeddings import EmbeddingRoutes
from neutrino.frontends.http.openai import OpenAIRoutes
from neutrino.pipeline.orchestrator import Orchestrator

log = logging.getLogger("neutrino.http")


def build_app(
    cfg: Config, orchestrator: Orchestrator, extra_state: Callable[[], dict[str, Any]]
) -> web.Application:
    app = web.Application(client_max_size=cfg.limits.max_body_bytes)
    OpenAIRoutes(cfg, orchestrator).register(app)
    EmbeddingRoutes(cfg, orchestrator).register(app)
    AudioRoutes(cfg, orchestrator).register(app)
    DetectRoutes(cfg, orchestrator).register(app)
    AdminRoutes(orchestrator, extra_state).register(app)
    return app


class HttpServer:
    def __init__(self, cfg: Config, app: web.Application) -> None:
        self.cfg = cfg
        self.runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        self.port = cfg.server.http_port

    async def start(self) -> None:
        await self.runner.setup()
        site = web.TCPSite(
            self.runner, self.cfg.server.http_host, self.cfg.server.http_port, reuse_address=True
        )
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def stop(self) -> None:
        await self.runner.cleanup()
