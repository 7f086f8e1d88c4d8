"""A passthrough upstream's answer, as the pipeline reads it (``engine.client.Relayed``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import aiohttp

from neutrino.engine.client import lost_connection
from neutrino.errors import ErrorKind, NeutrinoError


class RelayedAnswer:
    """One upstream response with status 200, read once; ``close`` releases it (an
    unfinished body closes its connection: the upstream sees the client leave)."""

    def __init__(self, resp: aiohttp.ClientResponse, on_close: Callable[[], None]) -> None:
        self._resp = resp
        self._on_close: Callable[[], None] | None = on_close
        self.content_type = resp.headers.get("Content-Type", "application/json")

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive; NeutrinoError (engine disconnected) when the
        connection breaks before the body's end."""
        try:
            async for chunk in self._resp.content.iter_any():
                yield chunk
        except (aiohttp.ClientError, OSError):
            raise lost_connection() from None

    async def read(self, limit: int) -> bytes:
        try:
            body = await self._resp.content.read(limit + 1)
        except (aiohttp.ClientError, OSError):
            raise lost_connection() from None
        if len(body) > limit:
            raise NeutrinoError(
                ErrorKind.ENGINE_ERROR, f"the upstream's answer is longer than {limit} bytes"
            )
        return body

    def close(self) -> None:
        if self._on_close is None:
            return
        on_close, self._on_close = self._on_close, None
        if not self._resp.content.is_eof():
            self._resp.close()  # not read to its end: drop the connection
        else:
            self._resp.release()
        on_close()
