"""Placeholder: the routes of this API are being written (issue 17)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from neutrino.config import Config
from neutrino.pipeline.orchestrator import Orchestrator


class AnthropicRoutes:
    def __init__(self, cfg: Config, orchestrator: Orchestrator) -> None:
        self.orch = orchestrator

    def register(self, app: web.Application) -> None:
        pass

    def fast_routes(self) -> dict[bytes, Callable[[Any], Awaitable[None]]]:
        return {}
