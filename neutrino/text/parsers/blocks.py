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
_QUOTE_OR_ESCAPE = re.compile(r'\\.?|"', re.DOTALL)


class _ValueWatch:
    """Whether the block's text so far ends inside an argument's value, kept up to date
    piece by piece (each piece is read once, so a block costs linear time however many
    closing markers stand in its values)."""

    __slots__ = ("_escaped", "_inside", "_quoting", "_seen", "_tail")

    def __init__(self, quoting: Quoting) -> None:
        self._quoting = quoting
        self._seen = 0  # pieces of the block's text read so far
        self._inside = False
        self._escaped = False  # JSON: the last piece ended in a lone backslash
        self._tail = ""  # XML: the end of the text read, where a marker may have begun

    def inside(self, raw: list[str]) -> bool:
        new = "".join(raw[self._seen :])
        self._seen = len(raw)
        if self._quoting == "json":
            self._json(new)
        elif self._quoting is not None:
            self._xml(new, *self._quoting)
        return self._inside

    def _json(self, text: str) -> None:
        """Outside strings JSON has no backslashes: each unescaped quote opens or closes one."""
        if self._escaped and text:
            text, self._escaped = text[1:], False
        for match in _QUOTE_OR_ESCAPE.finditer(text):
            token = match.group()
            if token == '"':
                self._inside = not self._inside
            elif len(token) == 1:  # a backslash at the end: it escapes the next piece's start
                self._escaped = True

    def _xml(self, text: str, opening: str, ends: tuple[str, ...]) -> None:
        """Inside after a value's opening marker that no end has followed."""
        text = self._tail + text
        last_open = text.rfind(opening)
        last_end = max(text.rfind(end) for end in ends)
        if last_open != last_end:  # both -1: no marker here, the state stands
            self._inside = last_open > last_end
        longest = max(len(opening), *map(len, ends))
        self._tail = text[-(longest - 1) :]


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

    __slots__ = ("_watch",)

    @abc.abstractmethod
    def _parse_block(self, body: str) -> list[Call] | None:
        """The calls in the text between the markers, or ``None`` if it is not a call block."""

    def _open_block(self, *raw: str) -> None:
        super()._open_block(*raw)
        self._watch = _ValueWatch(self.quoting)

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
            if not bare and self.quoting is not None and self._watch.inside(self._raw):
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
