"""The Prometheus listener: ``GET /metrics`` on its own address (``[metrics] address``).

A scrape builds the exposition from this process's tallies and live values, or, under
``--workers``, from every worker's (``gather``: the workers' raws, merged)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, ProcessCollector

from neutrino.config.checks import split_address
from neutrino.errors import StartupError, os_reason
from neutrino.observability.metrics import Raw, exposition, merge

log = logging.getLogger("neutrino.metrics")


class MetricsServer:
    """Serves ``/metrics``. ``local`` gives this process's raw; ``gather``, when set,
    the raws of every worker (this one's included), which are merged."""

    def __init__(
        self,
        address: str,
        local: Callable[[], Raw],
        gather: Callable[[], Awaitable[list[Raw]]] | None = None,
        reuse_port: bool = False,
        backlog: int = 511,
    ) -> None:
        self.host, self.port = split_address(address, "[metrics] address")
        self._backlog = backlog
        self._local = local
        self._gather = gather
        self._reuse_port = reuse_port
        self._runner: web.AppRunner | None = None
        # Process figures (CPU, memory, descriptors) are this process's: shown alone.
        self._process = [ProcessCollector(registry=None)] if gather is None else []

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(
            runner,
            self.host,
            self.port,
            reuse_address=True,
            reuse_port=self._reuse_port,
            backlog=self._backlog,
        )
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise StartupError(
                f"cannot listen for metrics on {self.host}:{self.port}: {os_reason(exc)} "
                '(set [metrics] address or --metrics-address; "" turns it off)'
            ) from exc
        self._runner = runner
        server = site._server
        if self.port == 0 and isinstance(server, asyncio.Server) and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    async def _metrics(self, _request: web.Request) -> web.Response:
        raw = merge(await self._gather()) if self._gather is not None else self._local()
        body = exposition(raw, self._process)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
