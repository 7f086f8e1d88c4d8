"""Pull adapters over a generation's push delivery, for consumers that await.

:func:`collect` runs a generation to its end (a non-streamed answer); :class:`Pull`
gives a consumer whose writes must be awaited (gRPC) what arrived since it last
looked, waking it at most once per batch of engine frames.
"""

from __future__ import annotations

import asyncio

from neutrino.pipeline.generation import Generation, Outcome
from neutrino.pipeline.logprobs import TokenLogprob
from neutrino.text.parsers import ToolCallDelta


class _Collector:
    __slots__ = ("done", "parts")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def on_text(self, text: str, tokens: int, logprobs: list[TokenLogprob] | None) -> None:
        if text:
            self.parts.append(text)

    def on_parts(self, reasoning: str, tool_calls: list[ToolCallDelta]) -> None:
        pass  # the outcome carries the whole reasoning and the calls

    def on_end(self, gen: Generation) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def collect(gen: Generation) -> tuple[str, Outcome]:
    """The whole text and the outcome; raises the request's error."""
    c = _Collector()
    gen.push_to(c)
    await c.done
    if gen.error is not None:
        raise gen.error.fresh()
    assert gen.outcome is not None
    return "".join(c.parts), gen.outcome


class Pull:
    """What a generation pushed, taken when the consumer is ready for it."""

    __slots__ = ("_ended", "_gen", "_text", "_tokens", "_waiter")

    def __init__(self, gen: Generation) -> None:
        self._gen = gen
        self._text: list[str] = []
        self._tokens = 0
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None
        gen.push_to(self)

    def on_text(self, text: str, tokens: int, logprobs: list[TokenLogprob] | None) -> None:
        if text:
            self._text.append(text)
            self._tokens += tokens
            self._wake()

    def on_parts(self, reasoning: str, tool_calls: list[ToolCallDelta]) -> None:
        pass  # not carried by the pull consumers yet (the outcome has them)

    def on_end(self, gen: Generation) -> None:
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def wait(self) -> None:
        """Until there is text or the generation ended."""
        if self._text or self._ended:
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiter = fut
        try:
            await fut
        finally:
            self._waiter = None

    def take(self) -> tuple[str, int]:
        """The text that came since the last call, and its token count."""
        text = "".join(self._text)
        self._text.clear()
        n, self._tokens = self._tokens, 0
        return text, n

    @property
    def ended(self) -> bool:
        return self._ended
