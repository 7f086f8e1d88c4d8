"""Shared machinery for formats that put calls in blocks: ``OPEN body CLOSE``.

Used by ``hermes``, ``llama_nemotron_json``, ``glm45`` and ``qwen3_coder``. A subclass names
its two markers and parses a block's body into zero or more calls. Text outside the blocks is
content; whitespace-only runs next to a block are dropped. A body that does not parse is
content verbatim, markers included (after a call: dropped, as all text after a call is). A
block still open at the end of the stream is parsed as if closed where the subclass allows it
(``unclosed_calls``); otherwise, or if it does not parse, it is no call and its text,
markers included, is content (nothing the model wrote is lost; after a call: dropped).
A closing marker where an argument's value is still open is part of the value, not the
block's end (a call whose argument holds the text ``</tool_call>``; ``quoting``): in a JSON
body, inside one of its strings (the body so far has an odd number of unescaped quotes); in
an XML body, after a parameter's opening marker that no parameter or call end has followed.
"""

from __future__ import annotations

import abc
import re
from typing import ClassVar, Literal

from neutrino.text.parsers.base import Call, Delta
from neutrino.text.parsers.segmented import SegmentedToolParser

__all__ = ["BlockToolParser"]

_TEXT, _BLOCK, _BARE = 0, 1, 2
#: ``"json"``, or an XML value's opening marker and the markers that end it.
Quoting = Literal["json"] | tuple[str, tuple[str, ...]] | None
_ESCAPED = re.compile(r"\\.", re.DOTALL)


def _in_string(body: str) -> bool:
    """Whether JSON text ``body`` ends inside a string (outside strings, JSON has no
    backslashes, so each unescaped quote opens or closes one)."""
    return '"' in body and _ESCAPED.sub("", body).count('"') % 2 == 1


def _inside_value(body: str, quoting: Quoting) -> bool:
    """Whether ``body`` ends inside an argument's value (see the module docstring)."""
    if quoting is None:
        return False
    if quoting == "json":
        return _in_string(body)
    opening, ends = quoting
    return body.rfind(opening) > max(body.rfind(end) for end in ends)


class BlockToolParser(SegmentedToolParser):
    """Base for ``OPEN body CLOSE`` call blocks (see the module docstring)."""

    block_open: ClassVar[str]
    block_close: ClassVar[str]
    #: Whether a block still open at the end of the stream is parsed as if closed (vLLM's
    #: hermes and qwen3_coder parsers read it so); if not, or if it does not parse, its text
    #: is content.
    unclosed_calls: ClassVar[bool] = True
    #: An element that is a block's body by itself, written without the block's markers
    #: (``(open, close)``: Qwen3-Coder's ``<function=…>…</function>``); None: none is.
    bare: ClassVar[tuple[str, str] | None] = None
    #: Where a closing marker is part of an argument's value (see the module docstring).
    quoting: ClassVar[Quoting] = None

    __slots__ = ()

    @abc.abstractmethod
    def _parse_block(self, body: str) -> list[Call] | None:
        """The calls in the text between the markers, or ``None`` if it is not a call block."""

    def _scan(self, out: Delta, buf: str) -> str:
        while buf:
            if self._state == _TEXT:
                buf, found = self._open(out, buf)
                if not found:
                    break
                continue
            bare = self._state == _BARE
            closing = self.bare[1] if bare and self.bare is not None else self.block_close
            buf, found = self._take_until(buf, closing)
            if not found:
                break
            if not bare and _inside_value("".join(self._raw), self.quoting):
                self._raw.append(closing)  # inside a JSON string: part of the body
                continue
            if bare:
                self._raw.append(closing)
                body = "".join(self._raw)
                self._state = _TEXT
                self._end_block(out, self._parse_block(body), (body,))
            else:
                self._close(out, self.block_close)
        return buf

    def _open(self, out: Delta, buf: str) -> tuple[str, bool]:
        """Content up to the next block (or bare element), which is then open."""
        if self.bare is None:
            buf, found = self._segments.until(out, buf, self.block_open)
            if found:
                self._open_block()
                self._state = _BLOCK
            return buf, found
        buf, marker = self._segments.until_first(out, buf, (self.block_open, self.bare[0]))
        if marker == self.block_open:
            self._open_block()
            self._state = _BLOCK
        elif marker is not None:  # the element's own marker is part of its body
            self._open_block(marker)
            self._state = _BARE
        return buf, marker is not None

    def _cut(self, out: Delta) -> None:
        bare = self._state == _BARE
        closing = self.bare[1] if bare and self.bare is not None else self.block_close
        raw = self._raw
        if raw and raw[-1] and closing.startswith(raw[-1]):
            raw = raw[:-1]  # the start of the closing marker, held back when the stream ended
        calls = self._parse_block("".join(raw)) if self.unclosed_calls else None
        if calls is None:  # no call: the block as written is content, its marker too
            if not bare:
                self._raw.insert(0, self.block_open)
            self._fail(out)
            return
        self._state = _TEXT
        self._end_block(out, calls)

    def _close(self, out: Delta, close: str) -> None:
        body = "".join(self._raw)
        self._state = _TEXT
        self._end_block(out, self._parse_block(body), (self.block_open, body, close))
