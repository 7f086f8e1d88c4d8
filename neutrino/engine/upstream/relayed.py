"""A passthrough upstream's answer, as the pipeline reads it (``engine.client.Relayed``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from neutrino.engine.client import lost_connection
from neutrino.engine.upstream.http1 import Response
from neutrino.errors import ErrorKind, NeutrinoError


class RelayedAnswer:
    """One upstream response with status 200, read once; ``close`` releases it (an
    unfinished body closes its connection: the upstream sees the client leave)."""

    __slots__ = ("_on_close", "_resp", "content_type")

    def __init__(self, resp: Response, on_close: Callable[[], None]) -> None:
        self._resp = resp
        self._on_close: Callable[[], None] | None = on_close
        self.content_type = resp.content_type

    def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive; NeutrinoError (engine disconnected) when the
        connection breaks before the body's end."""
        return self._resp.chunks(lost_connection)

    async def read(self, limit: int) -> bytes:
        try:
            body = await self._resp.read(limit)
        except OSError:
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
        self._resp.close()  # a body not read to its end drops the connection
        on_close()
