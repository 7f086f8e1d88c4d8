"""Shared machinery for formats that put calls in blocks: ``OPEN body CLOSE``.

Used by ``hermes``, ``llama_nemotron_json``, ``glm45`` and ``qwen3_coder``. A subclass names
its two markers and parses a block's body into zero or more calls. Text outside the blocks is
content; whitespace-only runs next to a block are dropped. A body that does not parse is
content verbatim, markers included (after a call: dropped, as all text after a call is). A
block still open at the end of the stream is parsed as if closed where the subclass allows it
(``unclosed_calls``); otherwise, or if it does not parse, it is no call and its text,
markers included, is content (nothing the model wrote is lost; after a call: dropped).
"""

from __future__ import annotations

import abc
from typing import ClassVar

from neutrino.text.parsers.base import Call, Delta
from neutrino.text.parsers.segmented import SegmentedToolParser

__all__ = ["BlockToolParser"]

_TEXT, _BLOCK = 0, 1


class BlockToolParser(SegmentedToolParser):
    """Base for ``OPEN body CLOSE`` call blocks (see the module docstring)."""

    block_open: ClassVar[str]
    block_close: ClassVar[str]
    #: Whether a block still open at the end of the stream is parsed as if closed (vLLM's
    #: hermes and qwen3_coder parsers read it so); if not, or if it does not parse, it is
    #: dropped.
    unclosed_calls: ClassVar[bool] = True

    __slots__ = ()

    @abc.abstractmethod
    def _parse_block(self, body: str) -> list[Call] | None:
        """The calls in the text between the markers, or ``None`` if it is not a call block."""

    def _scan(self, out: Delta, buf: str) -> str:
        while buf:
            if self._state == _TEXT:
                buf, found = self._segments.until(out, buf, self.block_open)
                if not found:
                    break
                self._open_block()
                self._state = _BLOCK
                continue
            buf, found = self._take_until(buf, self.block_close)
            if not found:
                break
            self._close(out, self.block_close)
        return buf

    def _cut(self, out: Delta) -> None:
        raw = self._raw
        if raw and raw[-1] and self.block_close.startswith(raw[-1]):
            raw = raw[:-1]  # the start of the closing marker, held back when the stream ended
        calls = self._parse_block("".join(raw)) if self.unclosed_calls else None
        if calls is None:  # no call: the block as written is content, its marker too
            self._raw.insert(0, self.block_open)
            self._fail(out)
            return
        self._state = _TEXT
        self._end_block(out, calls)

    def _close(self, out: Delta, close: str) -> None:
        body = "".join(self._raw)
        self._state = _TEXT
        self._end_block(out, self._parse_block(body), (self.block_open, body, close))
