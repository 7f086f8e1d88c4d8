"""The aiohttp application and its runner."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from neutrino.config import Config
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.http.admin import AdminRoutes
from neutrino.frontends.http.openai import OpenAIRoutes, error_response
from neutrino.pipeline.orchestrator import Orchestrator

log = logging.getLogger("neutrino.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _last_resort(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Never send a stack trace: anything unexpected becomes a plain 500."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status == 413:
            return error_response(
                NeutrinoError(ErrorKind.PAYLOAD_TOO_LARGE, "the request body is too large")
            )
        raise
    except NeutrinoError as err:
        return error_response(err)
    except (ConnectionResetError, ConnectionError):
        raise
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(NeutrinoError(ErrorKind.INTERNAL, "internal server error"))


def build_app(
    cfg: Config, orchestrator: Orchestrator, extra_state: Callable[[], dict[str, Any]]
) -> web.Application:
    app = web.Application(
        client_max_size=cfg.limits.max_body_bytes, middlewares=[_last_resort]
    )
    OpenAIRoutes(cfg, orchestrator).register(app)
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
