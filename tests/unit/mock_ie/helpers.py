"""Shared helpers for the mock_ie tests."""

from __future__ import annotations

from collections.abc import Sequence

from mocks.mock_ie.core import Fault, MockGeneration
from neutrino.engine.messages import FinishReason, TextResult


class ByteTokenizer:
    """A tiny stand-in tokenizer: one id per UTF-8 byte."""

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


def drain(gen: MockGeneration) -> list[TextResult]:
    """Every frame of ``gen`` up to and including the final one (no faults expected)."""
    frames: list[TextResult] = []
    while not gen.done:
        item = gen.next()
        assert not isinstance(item, Fault), item
        frames.append(item)
    assert frames[-1].finish_reason != FinishReason.NONE
    assert all(f.finish_reason == FinishReason.NONE for f in frames[:-1])
    return frames


def all_tokens(frames: Sequence[TextResult]) -> list[int]:
    return [t for f in frames for t in f.tokens]
