"""Push-mode SSE output: events written from the engine callbacks, no task wake-ups.

Once the response headers are out, each batch of text becomes one piece of the body,
handed to the exchange's :class:`Body` (which frames it: chunked encoding over the
lean HTTP/1.1 server, aiohttp's own writer otherwise). The handler task sleeps until
the stream ends. What the client has not read is bounded: a client that stops
reading is dropped, and its engine requests cancelled, rather than letting output
pile up in memory. One keepalive timer serves the response from the moment it opens,
while the request waits in the queue as while it generates.

One :class:`SSEStream` serves a response; each choice (``n`` > 1 gives several)
writes through its own :class:`ChoiceWriter`. The stream ends with the usage chunk
and ``[DONE]`` once every choice has ended, or with an error event at the first error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

import orjson

from neutrino.errors import NeutrinoError
from neutrino.frontends.http.openai.render import SSE_DONE, SSE_KEEPALIVE, ChunkEncoder, sse_error
from neutrino.frontends.http.reset import reset
from neutrino.observability.counters import Counters
from neutrino.observability.logs import RateLimited
from neutrino.pipeline.assembler import Outcome
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.logprobs import TokenLogprob
from neutrino.running import running_loop
from neutrino.text.parsers import ToolCallDelta

log = logging.getLogger("neutrino.http")


_NOT_READING = RateLimited(log)


class SlowClient(ConnectionError):
    """A write that waited past the send timeout for the client to read."""


async def within(
    write: Awaitable[None], transport: asyncio.Transport | None, limit_s: float
) -> None:
    """Await a write to a client (aiohttp's waits for the client to read once its buffer
    is full); a client that reads nothing for ``limit_s`` has its connection reset and
    SlowClient raised (a write left waiting would hold the request forever)."""
    try:
        async with asyncio.timeout(limit_s):
            await write
    except TimeoutError:
        if transport is not None:
            reset(transport)
        raise SlowClient("client too slow") from None


class Body(Protocol):
    """A streamed response body, as the exchange that owns the connection writes it."""

    on_lost: Callable[[str], None] | None  # told why, when the body can take no more

    def write(self, data: bytes) -> int:
        """Queue ``data`` as the next piece of the body (never waits); the bytes the
        client has not taken yet, or -1 when it is gone (nothing was written)."""
        ...

    def pending(self) -> int:
        """Bytes written that the client has not taken yet."""
        ...

    def reset(self) -> None:
        """Abort the connection (a client that stopped reading)."""
        ...

    async def end(self) -> None:
        """End the body properly, once what is queued has been written."""
        ...

    def close(self) -> None:
        """Stop whatever the body runs (the response is over, however it ended)."""
        ...


class Closing(Protocol):
    """What ends a stream once every choice has ended (its protocol's last events)."""

    def closing(self, outcomes: list[Outcome]) -> bytes: ...


def openai_error_events(err: NeutrinoError) -> bytes:
    """An error in an OpenAI stream: the error object as an event, then ``[DONE]``."""
    return sse_error(err) + SSE_DONE


class SSEStream:
    """A streamed response's SSE body (the events themselves come from the protocol's
    encoder: OpenAI's chunks by default, Anthropic's or the Responses API's events)."""

    __slots__ = (
        "_counters",
        "_error_events",
        "_interval",
        "_limit",
        "_outcomes",
        "_quiet",
        "_remaining",
        "_request_id",
        "_timer",
        "body",
        "done",
        "gone",
    )

    def __init__(
        self,
        body: Body,
        choices: int,
        limit_bytes: int,
        request_id: str = "",
        counters: Counters | None = None,
        error_events: Callable[[NeutrinoError], bytes] = openai_error_events,
    ) -> None:
        self.body: Body | None = body
        self._error_events = error_events
        body.on_lost = self._lost
        self._limit = limit_bytes
        self._request_id = request_id
        self._counters = counters
        self._remaining = choices
        self._outcomes: list[Outcome | None] = [None] * choices
        self._timer: asyncio.TimerHandle | None = None
        self._interval = 0.0
        self._quiet = False
        self.done: asyncio.Future[None] = running_loop().create_future()
        self.gone: str | None = None  # why the client can no longer be written to

    def keep_alive(self, interval: float) -> None:
        """Write a comment after each ``interval`` in which nothing was written."""
        if interval > 0 and not self.done.done():
            self._interval = interval
            self._quiet = True
            self._timer = running_loop().call_later(interval, self._tick)

    def _tick(self) -> None:
        if self._quiet:
            self.write(SSE_KEEPALIVE)
        if self.done.done():
            return
        self._quiet = True
        self._timer = running_loop().call_later(self._interval, self._tick)

    def write(self, data: bytes) -> None:
        """Write one piece of the body."""
        self._quiet = False
        body = self.body
        if body is None:
            return
        pending = body.write(data)
        # What the client left unread before this write: one large event (a Responses
        # stream's closing events repeat the whole answer) is not a client not reading.
        if pending - len(data) > self._limit:
            self._drop_slow_reader(body)
        elif pending < 0:
            self._lost("client disconnected")

    def _drop_slow_reader(self, body: Body) -> None:
        """The client left ``limit`` bytes unread: abort its connection (a graceful close
        would wait, with the socket and its buffers, for a client that never reads)."""
        _NOT_READING.warning(
            "request %s: the client is not reading its stream (%d bytes unread); "
            "aborting its connection",
            self._request_id,
            body.pending(),
        )
        if self._counters is not None:
            self._counters.slow_readers_dropped += 1
        self._lost("client too slow")  # first: the handler learns why before it is cancelled
        body.reset()

    def fail(self, err: NeutrinoError) -> None:
        if not self.done.done():
            self.write(self._error_events(err))
            self._finish()

    def ended(self, index: int, outcome: Outcome, end: Closing) -> None:
        self._outcomes[index] = outcome
        self._remaining -= 1
        if self._remaining == 0 and not self.done.done():
            done = [o for o in self._outcomes if o is not None]
            self.write(end.closing(done))
            self._finish()

    def _lost(self, why: str) -> None:
        if self.gone is None:
            self.gone = why
        body, self.body = self.body, None
        self._finish()
        if body is not None:
            body.close()

    async def end(self) -> None:
        """End the body once the stream is done (not for a client that is gone)."""
        body = self.body
        if body is not None and self.gone is None:
            await body.end()

    def stop(self) -> None:
        """The response is over (also when its handler was cancelled: a client that
        left): no keepalive timer or writer outlives it."""
        self._finish()
        body, self.body = self.body, None
        if body is not None:
            body.close()

    def _finish(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.done.done():
            self.done.set_result(None)


class ChoiceWriter:
    """The push target of one choice's generation."""

    __slots__ = ("_enc", "_index", "_reasoning_field", "_stream")

    def __init__(
        self, stream: SSEStream, enc: ChunkEncoder, index: int, reasoning_field: str
    ) -> None:
        self._stream = stream
        self._enc = enc
        self._index = index
        self._reasoning_field = reasoning_field

    def on_parts(self, reasoning: str, tool_calls: list[ToolCallDelta]) -> None:
        self._stream.write(self._enc.parts(reasoning, tool_calls, self._reasoning_field))

    def on_text(self, text: str, tokens: int, logprobs: list[TokenLogprob] | None) -> None:
        enc = self._enc
        if logprobs is None:  # enc.text, inline on the per-token path
            self._stream.write(enc.text_before + orjson.dumps(text) + enc.text_after)
        else:
            self._stream.write(enc.text(text, logprobs))

    def on_end(self, gen: Generation) -> None:
        err = gen.error
        if err is not None:
            self._stream.fail(err)
        elif gen.outcome is not None:
            self._stream.write(self._enc.final(gen.outcome))
            self._stream.ended(self._index, gen.outcome, self._enc)
