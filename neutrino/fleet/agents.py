"""The client of one node agent's HTTP API (``neutrino/node/server.py``), with its
bearer token. A call that does not get an answer (refused, timed out, the agent gone)
raises :class:`AgentDown`; an answer that refuses raises :class:`AgentRefused` with the
agent's error type and message."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from neutrino.config import CatalogueEntry


class AgentDown(Exception):
    """The agent did not answer."""


class AgentRefused(Exception):
    """The agent answered with an error."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.status = status
        self.kind = kind
        self.message = message


class AgentClient:
    def __init__(self, name: str, endpoint: str, token: str, timeout_s: float) -> None:
        self.name = name
        self.base = endpoint.rstrip("/")
        self.token = token
        self._timeout = timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def _call(
        self, method: str, path: str, body: dict[str, Any] | None = None, timeout: float = 0
    ) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers={"Authorization": f"Bearer {self.token}"},
                connector=aiohttp.TCPConnector(limit=8),
            )
        limit = aiohttp.ClientTimeout(total=timeout or self._timeout)
        try:
            async with self._session.request(
                method, self.base + path, json=body, timeout=limit
            ) as r:
                doc = await r.json(content_type=None)
                if r.status >= 400:
                    error = doc.get("error", {}) if isinstance(doc, dict) else {}
                    raise AgentRefused(
                        r.status, str(error.get("type", "error")), str(error.get("message", ""))
                    )
                return doc
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            raise AgentDown(f"{self.name} ({self.base}): {type(exc).__name__} {exc}") from None

    async def discovery(self) -> dict[str, Any]:
        doc: dict[str, Any] = await self._call("GET", "/discovery")
        return doc

    async def health(self) -> dict[str, Any]:
        doc: dict[str, Any] = await self._call("GET", "/health")
        return doc

    async def models(self) -> list[dict[str, Any]]:
        doc = await self._call("GET", "/models")
        models: list[dict[str, Any]] = doc["models"]
        return models

    async def load(self, entry: CatalogueEntry, devices: tuple[int, ...], timeout: float) -> Any:
        """Load ``entry`` (waiting for it, at most ``timeout`` seconds)."""
        body: dict[str, Any] = {
            "model": entry.id, "harness": entry.harness, "file": entry.file,
            "quant": entry.quant, "memory_mb": entry.memory_mb, "vram_mb": entry.vram_mb,
            "context_length": entry.context_length, "slots": entry.slots,
            "wait": True, "timeout_s": timeout,
        }  # fmt: skip
        if entry.gpu:
            body["tensor_parallel"] = entry.min_devices
            if devices:
                body["devices"] = list(devices)
        return await self._call("POST", "/models/load", body, timeout=timeout + 5)

    async def unload(self, model: str) -> Any:
        return await self._call("POST", "/models/unload", {"model": model}, timeout=60)

    async def endpoint(self, model: str) -> dict[str, Any]:
        doc: dict[str, Any] = await self._call("GET", f"/models/{model}/endpoint")
        return doc

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()
            await asyncio.sleep(0)
