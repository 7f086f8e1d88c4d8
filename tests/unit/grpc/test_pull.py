"""Pull: what a generation pushed, in batches that keep the order it came in."""

from __future__ import annotations

from typing import Any

from neutrino.pipeline.logprobs import TokenLogprob
from neutrino.pipeline.pull import Pull
from neutrino.text.parsers import ToolCallDelta


class FakeGen:
    """What Pull uses of a generation: push_to."""

    def __init__(self) -> None:
        self.target: Any = None

    def push_to(self, target: Any) -> None:
        self.target = target


def lp(token: str) -> TokenLogprob:
    return TokenLogprob(token, token.encode(), -1.0, [])


async def test_batches_keep_the_order_of_reasoning_calls_and_text() -> None:
    gen = FakeGen()
    woken: list[int] = []
    pull = Pull(gen, lambda: woken.append(1))  # type: ignore[arg-type]
    t = gen.target
    t.on_parts("think ", [])
    t.on_parts("more", [])
    t.on_text("A", 1, [lp("A")])
    t.on_text("B", 2, None)
    t.on_parts("", [ToolCallDelta(0, "id0", "f", "{}")])  # after text: a new batch
    t.on_text("", 0, [lp("")])  # logprobs of held-back text
    t.on_parts("late", [])
    batches = pull.take_batches()
    assert [(b.reasoning, [c.name for c in b.tool_calls], b.text, b.tokens) for b in batches] == [
        ("think more", [], "AB", 3),
        ("", ["f"], "", 0),
        ("late", [], "", 0),  # reasoning after a call: its own batch
    ]
    assert [e.token for e in batches[0].logprobs or []] == ["A"]
    assert [e.token for e in batches[1].logprobs or []] == [""]
    assert len(woken) == 7 and pull.take_batches() == []
    t.on_text("C", 1, None)
    assert pull.take() == ("C", 1)
    assert not pull.ended
    t.on_end(gen)
    assert pull.ended and pull.generation is gen
    await pull.wait()  # returns at once once ended
