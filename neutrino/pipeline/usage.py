"""What a response cost, whatever protocol reports it: the prompt once, the completions
of every choice summed, the phases of the slowest choice."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from neutrino.pipeline.assembler import Outcome


class Usage(msgspec.Struct, frozen=True, gc=False):
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    reasoning_tokens: int | None = None  # None: reasoning was not split out
    timings: Mapping[str, float] = {}  # queue_time, prompt_time ... (seconds)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def usage_of(outcomes: Sequence[Outcome]) -> Usage:
    """The usage of a response of one or more choices (``n``)."""
    first = outcomes[0]
    if len(outcomes) == 1:
        return Usage(
            first.prompt_tokens,
            first.completion_tokens,
            first.cached_tokens,
            first.reasoning_tokens,
            first.timings,
        )
    reasoning = [o.reasoning_tokens for o in outcomes if o.reasoning_tokens is not None]
    return Usage(
        first.prompt_tokens,
        sum(o.completion_tokens for o in outcomes),
        first.cached_tokens,
        sum(reasoning) if reasoning else None,
        {key: max(o.timings.get(key, 0.0) for o in outcomes) for key in first.timings},
    )
