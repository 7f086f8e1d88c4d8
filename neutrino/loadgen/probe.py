"""One request's measurements as its answer arrives (sans-IO: the clock is given).

A protocol driver calls :meth:`Probe.chunk` for each piece of generated output it receives
(a streamed event that carries text, reasoning or tool-call arguments; the whole answer
when not streamed) and :meth:`Probe.usage` with the server's token counts.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

MAX_TEXT_CHARS = 1 << 20  # text kept for --show-output, per request


class Probe:
    """Times of a request's first and later output chunks, and its usage."""

    __slots__ = (
        "_keep",
        "_kept",
        "chunks",
        "clock",
        "first",
        "gaps",
        "last",
        "output_tokens",
        "parts",
        "prompt_tokens",
        "sent",
        "streamed",
    )

    def __init__(self, clock: Callable[[], float], *, keep_text: bool = False) -> None:
        self.clock = clock
        self.sent = clock()
        self.first: float | None = None
        self.last = self.sent
        self.gaps = array("d")  # seconds between consecutive chunks (streamed only)
        self.chunks = 0
        self.streamed = False
        self.prompt_tokens: int | None = None
        self.output_tokens: int | None = None
        self.parts: list[str] = []
        self._keep = keep_text
        self._kept = 0

    def chunk(self, text: str = "", *, output: bool = True) -> None:
        """A streamed chunk arrived; ``output``: it carries generated output (a chunk that
        only opens or closes the answer is not timed). ``text`` is kept for display."""
        if output:
            now = self.clock()
            if self.first is None:
                self.first = now
            else:
                self.gaps.append(now - self.last)
            self.last = now
            self.chunks += 1
            self.streamed = True
        self.keep(text)

    def keep(self, text: str) -> None:
        """Text to show with --show-output (bounded)."""
        if self._keep and text and self._kept < MAX_TEXT_CHARS:
            text = text[: MAX_TEXT_CHARS - self._kept]
            self.parts.append(text)
            self._kept += len(text)

    def usage(self, prompt_tokens: int | None, output_tokens: int | None) -> None:
        """The server's counts (a later report replaces an earlier one)."""
        if prompt_tokens is not None:
            self.prompt_tokens = prompt_tokens
        if output_tokens is not None:
            self.output_tokens = output_tokens

    @property
    def text(self) -> str:
        return "".join(self.parts)
