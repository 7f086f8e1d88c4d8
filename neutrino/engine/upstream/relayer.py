"""Passthrough (any OpenAI-compatible server): the client's own body posted to the
upstream, its model renamed where ``upstream_names`` says so, and the answer handed
back as it comes (``relayed.RelayedAnswer``); an error status becomes the client's error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

import orjson

from neutrino.config import EngineConfig
from neutrino.engine.client import classify_engine_error, lost_connection
from neutrino.engine.upstream.errors import MAX_ERROR_BYTES, upstream_error
from neutrino.engine.upstream.http1 import Response
from neutrino.engine.upstream.relayed import RelayedAnswer

log = logging.getLogger("neutrino.engine")

# An HTTP request under the upstream's origin: (method, url, body, traceparent) -> Response.
Request = Callable[[str, str, bytes, str], Coroutine[Any, Any, Response]]


class Relayer:
    """The passthrough answers of one upstream, counted until each is closed."""

    def __init__(
        self, cfg: EngineConfig, name: str, request: Request, on_lost: Callable[[], None]
    ) -> None:
        self.cfg = cfg
        self.name = name
        self._base = cfg.url.rstrip("/")
        self._request = request
        self._on_lost = on_lost  # a request that did not reach the server: probe it now
        self.open = 0  # relayed answers not yet closed

    async def relay(
        self, path: str, doc: dict[str, object], raw: bytes, traceparent: str
    ) -> RelayedAnswer:
        """POST the client's body to ``path`` (under the base URL): ``raw`` as sent, or
        ``doc`` re-encoded with the upstream's name of its model; the answer when its
        status is 200, else the client's error for what the upstream answered."""
        model = doc.get("model")
        if isinstance(model, str) and model in self.cfg.upstream_names:
            raw = orjson.dumps({**doc, "model": self.cfg.upstream_names[model]})
        self.open += 1
        try:
            resp = await self._request("POST", self._base + path, raw, traceparent)
        except OSError as exc:
            self.open -= 1
            log.warning("upstream %s: request failed: %s", self.name, exc)
            self._on_lost()
            raise lost_connection() from None
        except BaseException:
            self.open -= 1
            raise
        if resp.status == 200:
            cfg = self.cfg
            idle, first = cfg.idle_timeout_s or None, cfg.first_byte_timeout_s or None
            return RelayedAnswer(resp, self._closed, idle, first)
        self.open -= 1
        try:
            body = (await resp.read(MAX_ERROR_BYTES))[:MAX_ERROR_BYTES]
        except OSError:
            body = b""
        finally:
            resp.close()
        raise classify_engine_error(upstream_error(resp.status, body), self.name)

    def _closed(self) -> None:
        self.open -= 1
