"""A streamed call's messages: every choice's output, as it comes, written one by one.

Each choice's generation pushes into a :class:`Pull`; one loop takes what they pushed
and awaits each write, so a slow client holds the stream back (the call ends with
ClientTooSlow once it takes nothing for ``send_timeout_s``) instead of growing a buffer
in grpc. What piles up meanwhile is the generated output itself, bounded by max_tokens.
The caller closes every generation when this returns or raises (one engine cancel for
each that is still running).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from neutrino.frontends.grpc.calls import Context, send
from neutrino.frontends.grpc.render import Chunks
from neutrino.pipeline.assembler import Outcome
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.pull import Pull
from neutrino.running import running_loop


class _Signal:
    """A flag to wait for, set by any of several pulls (no wake-up is lost)."""

    __slots__ = ("_set", "_waiter")

    def __init__(self) -> None:
        self._set = False
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        self._set = True
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def wait(self) -> None:
        """Until set since the last wait."""
        if not self._set:
            self._waiter = running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        self._set = False


async def pump(context: Context, gens: Sequence[Generation], limit_s: float) -> None:
    """Write every choice of the request until each has ended; raises the first
    choice's error (after the text it made before it)."""
    chunks = Chunks(gens[0])
    for i, gen in enumerate(gens):  # a completion's echo: each choice's first message
        if gen.echo:
            await send(context, chunks.text(i, gen.echo), limit_s)
    signal = _Signal()
    pulls = [Pull(gen, signal.set) for gen in gens]
    outcomes: list[Outcome | None] = [None] * len(gens)
    left = len(gens)
    while left:
        await signal.wait()
        for i, pull in enumerate(pulls):
            if outcomes[i] is None and await _drain(context, chunks, i, pull, outcomes, limit_s):
                left -= 1


async def _drain(
    context: Context,
    chunks: Chunks,
    index: int,
    pull: Pull,
    outcomes: list[Outcome | None],
    limit_s: float,
) -> bool:
    """Write what choice ``index`` pushed; at its end, its last message (True)."""
    while True:
        batches = pull.take_batches()
        # Checked with no await since the take: nothing can have come after it.
        ended = pull.ended
        last = batches.pop() if ended and batches else None
        for b in batches:
            await send(context, chunks.batch(index, b), limit_s)
        if ended:
            break
        if not batches:
            return False
    gen = pull.generation
    err = gen.error
    if err is not None:
        if last is not None:
            await send(context, chunks.batch(index, last), limit_s)
        raise err.fresh()
    outcome = gen.outcome
    assert outcome is not None
    outcomes[index] = outcome
    done = [o for o in outcomes if o is not None]
    every = done if len(done) == len(outcomes) else None
    await send(context, chunks.final(index, last, outcome, every), limit_s)
    return True
