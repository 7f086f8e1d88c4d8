"""Shared machinery for formats that wrap calls in a section: ``BEGIN (CALL … CALL_END)* END``.

Used by ``deepseek_v3`` and ``kimi_k2``. A subclass names its markers and parses one call
body. Text before the first call is content (outside sections, and stray text in a section);
text after a call is dropped (the README's rule); whitespace-only runs before calls are
dropped. A call body that does not parse is content verbatim (with its call markers; section
markers are never output), unless the subclass rejects it outright
(:meth:`SectionedToolParser._rejects`): then it is dropped, neither call nor content. A call
still open at the end of the stream is no call (vLLM's and SGLang's Kimi K2 and DeepSeek V3
parsers need the call's end marker), and its text is content as a malformed call's is.
"""

from __future__ import annotations

import abc
from typing import ClassVar

from neutrino.text.parsers.base import Call, Delta
from neutrino.text.parsers.segmented import SegmentedToolParser

__all__ = ["SectionedToolParser"]

_TEXT, _SECTION, _CALL = 0, 1, 2


class SectionedToolParser(SegmentedToolParser):
    """Base for section-wrapped call formats (see the module docstring)."""

    section_begins: ClassVar[tuple[str, ...]]
    section_ends: ClassVar[tuple[str, ...]]
    call_begin: ClassVar[str]
    call_end: ClassVar[str]

    __slots__ = ()

    @abc.abstractmethod
    def _parse_call(self, body: str) -> Call | None:
        """``(name, arguments)`` of the text between the call markers, or ``None``."""

    def _rejects(self, body: str) -> bool:
        """Whether the call ``body`` is dropped (neither call nor content); by default none."""
        return False

    def _scan(self, out: Delta, buf: str) -> str:
        seg = self._segments
        while buf:
            if self._state == _TEXT:
                buf, marker = seg.until_first(out, buf, self.section_begins)
                if marker is None:
                    break
                seg.open_block()
                self._state = _SECTION
            elif self._state == _SECTION:
                buf, marker = seg.until_first(out, buf, (self.call_begin, *self.section_ends))
                if marker is None:
                    break
                if marker == self.call_begin:
                    self._open_block()
                    self._state = _CALL
                else:
                    seg.open_block()
                    seg.block_done()
                    self._state = _TEXT
            else:
                buf, found = self._take_until(buf, self.call_end)
                if not found:
                    break
                self._close(out, self.call_end)
        return buf

    def _flush(self, out: Delta, buf: str) -> None:
        if self._state == _CALL:
            # A call still open: no call (vLLM's and SGLang's Kimi K2 and DeepSeek V3
            # parsers need the call's end marker); its text is content, as a malformed
            # call's is (nothing the model wrote is lost; after a call: dropped).
            self._raw.insert(0, self.call_begin)
            self._raw.append(buf)
            self._fail(out)
        else:
            self._segments.text(out, buf)
        self._state = _TEXT

    def _close(self, out: Delta, end: str) -> None:
        body = "".join(self._raw)
        self._state = _SECTION
        if self._rejects(body):
            self._end_block(out, [])
            return
        call = self._parse_call(body)
        self._end_block(out, None if call is None else [call], (self.call_begin, body, end))
