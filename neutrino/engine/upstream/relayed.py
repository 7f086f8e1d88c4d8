"""A passthrough upstream's answer, as the pipeline reads it (``engine.client.Relayed``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from neutrino.engine.client import lost_connection
from neutrino.engine.upstream.http1 import Response
from neutrino.errors import ErrorKind, NeutrinoError


class RelayedAnswer:
    """One upstream response with status 200, read once; ``close`` releases it (an
    unfinished body closes its connection: the upstream sees the client leave)."""

    __slots__ = ("_first_s", "_idle_s", "_on_close", "_resp", "content_type")

    def __init__(
        self,
        resp: Response,
        on_close: Callable[[], None],
        idle_s: float | None = None,
        first_s: float | None = None,
    ) -> None:
        """``first_s``: the longest wait for the body's first bytes; ``idle_s``: for
        more of it, once it began (None: no bound but the request's deadline)."""
        self._resp = resp
        self._on_close: Callable[[], None] | None = on_close
        self._idle_s = idle_s
        self._first_s = first_s
        self.content_type = resp.content_type

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive; NeutrinoError when the connection breaks
        before the body's end (engine disconnected) or the upstream falls silent
        (timeout)."""
        try:
            async for chunk in self._resp.chunks(lost_connection, self._idle_s, self._first_s):
                yield chunk
        except TimeoutError:
            raise self._silent() from None

    def _silent(self) -> NeutrinoError:
        return NeutrinoError(ErrorKind.TIMEOUT, "the upstream stopped sending its answer")

    async def read(self, limit: int) -> bytes:
        try:
            body = await self._resp.read(limit, self._first_s)
        except TimeoutError:
            raise self._silent() from None
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
