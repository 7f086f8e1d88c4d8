"""Pull adapters over a generation's push delivery, for consumers that await.

:func:`collect` runs a generation to its end (a non-streamed answer); :class:`Pull`
gives a consumer whose writes must be awaited (gRPC) what arrived since it last
looked, waking it at most once per batch of engine frames: text with its logprobs,
reasoning and tool-call deltas, in the order they were pushed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from neutrino.pipeline.assembler import Outcome
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.logprobs import TokenLogprob
from neutrino.running import running_loop
from neutrino.text.parsers import ToolCallDelta


class _Collector:
    __slots__ = ("done", "parts")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.done: asyncio.Future[None] = running_loop().create_future()

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


@dataclass(slots=True)
class Batch:
    """What a generation pushed between two takes, in its order: ``reasoning``, then
    ``tool_calls``, then ``text`` (with its ``tokens`` and ``logprobs`` entries)."""

    reasoning: str = ""
    tool_calls: list[ToolCallDelta] = field(default_factory=list)
    text: str = ""
    tokens: int = 0
    logprobs: list[TokenLogprob] | None = None


@dataclass(slots=True)
class _Pending:
    """A batch being filled (strings joined once, when taken)."""

    reasoning: list[str] = field(default_factory=list)
    tool_calls: list[ToolCallDelta] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    tokens: int = 0
    logprobs: list[TokenLogprob] | None = None

    def batch(self) -> Batch:
        return Batch(
            "".join(self.reasoning), self.tool_calls, "".join(self.text), self.tokens, self.logprobs
        )


class Pull:
    """What a generation pushed, taken when the consumer is ready for it.

    Pushes are merged into :class:`Batch` es; a new batch starts where merging would
    change the order (reasoning or calls after text, reasoning after calls), so a
    consumer that renders each batch as reasoning, calls, text shows them in the order
    the model produced them. ``notify``, when given, is also called on each push (one
    waiter over many pulls).
    """

    __slots__ = ("_ended", "_gen", "_notify", "_pending", "_waiter")

    def __init__(self, gen: Generation, notify: Callable[[], None] | None = None) -> None:
        self._gen = gen
        self._pending: list[_Pending] = []
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None
        self._notify = notify
        gen.push_to(self)

    def _open(self, reasoning: bool = False, parts: bool = False) -> _Pending:
        """The batch to add to: a new one where adding would reorder."""
        pending = self._pending
        if not pending or (parts and pending[-1].text) or (reasoning and pending[-1].tool_calls):
            pending.append(_Pending())
        return pending[-1]

    def on_text(self, text: str, tokens: int, logprobs: list[TokenLogprob] | None) -> None:
        if not text and not logprobs:
            return
        b = self._open()
        if text:
            b.text.append(text)
        b.tokens += tokens
        if logprobs is not None:
            if b.logprobs is None:
                b.logprobs = []
            b.logprobs += logprobs
        self._wake()

    def on_parts(self, reasoning: str, tool_calls: list[ToolCallDelta]) -> None:
        if not reasoning and not tool_calls:
            return
        b = self._open(bool(reasoning), parts=True)
        if reasoning:
            b.reasoning.append(reasoning)
        b.tool_calls += tool_calls
        self._wake()

    def on_end(self, gen: Generation) -> None:
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)
        if self._notify is not None:
            self._notify()

    async def wait(self) -> None:
        """Until something was pushed or the generation ended."""
        if self._pending or self._ended:
            return
        fut = running_loop().create_future()
        self._waiter = fut
        try:
            await fut
        finally:
            self._waiter = None

    def take_batches(self) -> list[Batch]:
        """What came since the last take, in order (empty: nothing new)."""
        pending, self._pending = self._pending, []
        return [p.batch() for p in pending]

    def take(self) -> tuple[str, int]:
        """The text that came since the last call, and its token count (what else came,
        reasoning, calls and logprobs, is taken too: for consumers of text only)."""
        batches = self.take_batches()
        return "".join(b.text for b in batches), sum(b.tokens for b in batches)

    @property
    def generation(self) -> Generation:
        return self._gen

    @property
    def ended(self) -> bool:
        """The generation ended (what it pushed before may still be untaken)."""
        return self._ended
