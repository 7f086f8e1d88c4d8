"""``think``: reasoning in ``<think>…</think>`` (DeepSeek-R1, Qwen3, QwQ, Kimi-K2-Thinking, …).

Format (DeepSeek-R1 / Qwen3 model cards and chat templates; vLLM's ``deepseek_r1`` and
``qwen3`` reasoning parsers describe the same split)::

    <think>
    chain of thought
    </think>

    answer

Some templates end the prompt with ``<think>\\n`` (DeepSeek-R1-0528, Qwen3-*-Thinking-2507),
so the output starts inside the block and only ``</think>`` appears: construct the parser with
``starts_in_reasoning=True`` then.

Rules:

* text before a ``<think>`` is content (and so is all the text if ``<think>`` never comes);
* everything up to ``</think>`` is reasoning; a block still open at the end is reasoning;
* after ``</think>`` everything is content, passed through untouched (no more scanning);
* markers never reach the output: a repeated ``<think>`` inside the block and a stray
  ``</think>`` before any ``<think>`` are dropped.
Text is kept verbatim (the newlines around the markers are not stripped).

A subclass may name markers that also end the reasoning (``ends_with``: Kimi K2 Thinking
goes from its reasoning straight into its tool-call section): one found inside the block
ends it, and it and all after it are content. It may also name more spellings of the
opening and the close that are plain words (``word_opens`` / ``word_closes``: Granite 3.2's
"Here is my thought process:" … "Here is my response:"): such a phrase where it opens or
closes the block is a marker; anywhere else (a close before any opening, an opening inside
the block) it is text, kept where it stands.
"""

from __future__ import annotations

from typing import ClassVar

from neutrino.text.parsers.base import Delta, ReasoningParser, find_first

__all__ = ["ThinkReasoningParser"]

_BEFORE, _INSIDE, _AFTER = 0, 1, 2


class ThinkReasoningParser(ReasoningParser):
    """``<think>…</think>`` reasoning split (see the module docstring)."""

    open_marker: ClassVar[str] = "<think>"
    close_marker: ClassVar[str] = "</think>"
    ends_with: ClassVar[tuple[str, ...]] = ()  # more markers that end the reasoning, kept
    word_opens: ClassVar[tuple[str, ...]] = ()  # more openings, plain words
    word_closes: ClassVar[tuple[str, ...]] = ()  # more closes, plain words

    __slots__ = ("_buf", "_markers", "_state")

    @classmethod
    def opening(cls) -> str | None:
        return cls.open_marker.strip()

    def __init__(self, *, starts_in_reasoning: bool = False) -> None:
        super().__init__(starts_in_reasoning=starts_in_reasoning)
        self._state = _INSIDE if starts_in_reasoning else _BEFORE
        self._buf = ""
        self._markers = (
            self.open_marker,
            self.close_marker,
            *self.ends_with,
            *self.word_opens,
            *self.word_closes,
        )

    def feed(self, text: str) -> Delta:
        out = Delta()
        if self._state == _AFTER:
            out.content = text
            return out
        buf = self._buf + text if self._buf else text
        while True:
            at, marker = find_first(buf, self._markers)
            before = buf[:at]
            if self._state == _BEFORE:
                out.content += before
            else:
                out.reasoning += before
            if marker is None:
                self._buf = buf[at:]
                return out
            if marker in self.ends_with:
                if self._state == _INSIDE:  # the reasoning ends; the marker is content
                    return self._after(out, buf[at:])
                out.content += marker  # outside the block: plain content
                buf = buf[at + len(marker) :]
                continue
            buf = buf[at + len(marker) :]
            closes = marker == self.close_marker or marker in self.word_closes
            if closes != (self._state == _INSIDE) and (
                marker in self.word_opens or marker in self.word_closes
            ):  # a phrase out of place is text
                if self._state == _INSIDE:
                    out.reasoning += marker
                else:
                    out.content += marker
                continue
            if closes:
                return self._after(out, buf)
            self._state = _INSIDE

    def _after(self, out: Delta, rest: str) -> Delta:
        self._state = _AFTER
        self._buf = ""
        out.content += rest
        return out

    def finish(self) -> Delta:
        out = Delta()
        if self._state == _INSIDE:
            out.reasoning = self._buf
        else:
            out.content = self._buf
        self._buf = ""
        return out
