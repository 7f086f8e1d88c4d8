"""Push-mode SSE output: events written from the engine callbacks, no task wake-ups.

Once the response headers are out (chunked transfer encoding), each batch of text
becomes one chunk written straight to the client's transport. The handler task
sleeps until the stream ends. The transport's write buffer is bounded: a client
that stops reading is dropped, and its engine request cancelled, rather than
letting output pile up in memory.
"""

from __future__ import annotations

import asyncio
import logging

from neutrino.frontends.http.render import SSE_DONE, SSE_KEEPALIVE, ChunkEncoder, sse_error
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.logprobs import TokenLogprob

log = logging.getLogger("neutrino.http")


class SSEPushWriter:
    __slots__ = ("_enc", "_limit", "_transport", "done", "gone")

    def __init__(
        self, transport: asyncio.Transport, encoder: ChunkEncoder, limit_bytes: int
    ) -> None:
        self._transport: asyncio.Transport | None = transport
        self._enc = encoder
        self._limit = limit_bytes
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.gone: str | None = None  # why the client can no longer be written to

    def on_text(self, text: str, tokens: int, logprobs: list[TokenLogprob] | None) -> None:
        self.write(self._enc.text(text, logprobs))

    def on_keepalive(self) -> None:
        self.write(SSE_KEEPALIVE)

    def on_end(self, gen: Generation) -> None:
        err = gen.error
        if err is not None:
            self.write(sse_error(err) + SSE_DONE)
        elif gen.outcome is not None:
            self.write(self._enc.final(gen.outcome) + SSE_DONE)
        self._finish()

    def write(self, data: bytes) -> None:
        """Write one chunk of the chunked response body."""
        t = self._transport
        if t is None:
            return
        if t.is_closing():
            self._lost("client disconnected")
            return
        t.write(b"%x\r\n%b\r\n" % (len(data), data))
        if t.get_write_buffer_size() > self._limit:
            log.warning("client is not reading its stream; dropping it")
            self._lost("client too slow")

    def _lost(self, why: str) -> None:
        self.gone = why
        self._transport = None
        self._finish()

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)
