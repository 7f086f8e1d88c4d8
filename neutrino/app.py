"""Wires configuration, engines, pipeline and front ends into one process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import replace
from typing import Any

from neutrino.config import Config, EngineConfig
from neutrino.engine.router import EngineRouter
from neutrino.frontends.http.server import HttpServer, build_app
from neutrino.pipeline.history import History
from neutrino.pipeline.models import ModelTexts
from neutrino.pipeline.orchestrator import Orchestrator
from neutrino.supervisor import MockSupervisor

log = logging.getLogger("neutrino")


class Neutrino:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.mock: MockSupervisor | None = MockSupervisor(cfg.mock) if cfg.embedded_mock else None
        engines = cfg.engines
        if self.mock is not None:
            engines = (EngineConfig(socket=self.mock.socket, name="embedded-mock"),)
            self.cfg = cfg = replace(cfg, engines=engines)
        self.router = EngineRouter(engines, cfg.engine_link)
        self.texts = ModelTexts(cfg.model)
        self.history = History(cfg.limits.history_size)
        self.orchestrator = Orchestrator(cfg, self.router, self.texts, self.history)
        self.http = HttpServer(cfg, build_app(cfg, self.orchestrator, self._extra_state))
        self.router.listeners.append(self._engines_changed)
        self._warming: set[str] = set()

    def _extra_state(self) -> dict[str, Any]:
        if self.mock is None:
            return {}
        return {"embedded_mock": {"pid": self.mock.pid, "restarts": self.mock.restarts}}

    def _engines_changed(self) -> None:
        self.orchestrator.admission.wake()
        loop = asyncio.get_running_loop()
        for name in self.router.models():
            if name not in self._warming and self.texts.cached(name) is None:
                self._warming.add(name)
                loop.run_in_executor(None, self._warm, name)

    def _warm(self, name: str) -> None:
        with contextlib.suppress(Exception):
            self.texts.get(name)

    async def start(self, wait_engine_s: float = 10.0) -> None:
        t0 = time.monotonic()
        if self.mock is not None:
            await self.mock.start()
        await self.router.start()
        await self.http.start()
        if await self.router.wait_ready(wait_engine_s):
            log.info("engine ready after %.2fs", time.monotonic() - t0)
        else:
            log.warning("no engine connected yet; serving 503 until one is")
        log.info("Neutrino listening on http://%s:%d", self.cfg.server.http_host, self.http.port)

    async def stop(self) -> None:
        orch = self.orchestrator
        orch.draining = True
        deadline = time.monotonic() + self.cfg.shutdown.grace_s
        while orch.inflight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await self.http.stop()
        await self.router.close()
        if self.mock is not None:
            await self.mock.stop()
