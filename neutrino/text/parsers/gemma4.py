"""``gemma4`` / ``functiongemma``: Google Gemma 4's and FunctionGemma's tool calls.

Format (the models' chat templates, which declare tools and render past calls this way;
vLLM's ``gemma4`` and ``functiongemma`` parsers read the same)::

    <|tool_call>call:get_weather{city:<|"|>Tokyo<|"|>,days:3}<tool_call|>
    <start_function_call>call:get_weather{city:<escape>London<escape>}<end_function_call>

One block per call: ``call:NAME`` and the arguments in Gemma's own object syntax: bare keys,
strings between two string delimiters (``<|"|>`` in Gemma 4, ``<escape>`` in FunctionGemma),
bare numbers, ``true``/``false``/``null``, nested ``{…}`` and ``[…]``, no spaces needed. A bare
value that is no number or keyword is a string. Every value is kept (vLLM's functiongemma
parser keeps only the delimited strings). A block that is not one such call is content
verbatim; a block open at the end of the stream is read as if closed, as vLLM's parsers read
an unclosed FunctionGemma call; text after a call is dropped (the README's rule).

Gemma 4's reasoning (``gemma4``): ``<|channel>thought`` and a newline open it, ``<channel|>``
ends it, and so does a tool call (``think``'s rules with these markers).
"""

from __future__ import annotations

import re
from typing import ClassVar, Final

from neutrino.text.parsers.base import Call
from neutrino.text.parsers.blocks import BlockToolParser
from neutrino.text.parsers.think import ThinkReasoningParser

__all__ = [
    "CALL_CLOSE",
    "CALL_OPEN",
    "FG_CALL_CLOSE",
    "FG_CALL_OPEN",
    "FG_QUOTE",
    "QUOTE",
    "FunctionGemmaToolParser",
    "Gemma4ReasoningParser",
    "Gemma4ToolParser",
    "parse_call",
]

CALL_OPEN: Final = "<|tool_call>"
CALL_CLOSE: Final = "<tool_call|>"
QUOTE: Final = '<|"|>'
FG_CALL_OPEN: Final = "<start_function_call>"
FG_CALL_CLOSE: Final = "<end_function_call>"
FG_QUOTE: Final = "<escape>"

_NAME: Final = re.compile(r"[\w.\-]+")
_INT: Final = re.compile(r"-?\d+")
_NUMBER: Final = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_KEYWORDS: Final = {"true": True, "false": False, "null": None}
_MAX_DEPTH: Final = 64


class Gemma4ToolParser(BlockToolParser):
    """``<|tool_call>call:NAME{…}<tool_call|>`` (see the module docstring)."""

    block_open = CALL_OPEN
    block_close = CALL_CLOSE
    quote: ClassVar[str] = QUOTE

    __slots__ = ()

    def _parse_block(self, body: str) -> list[Call] | None:
        call = parse_call(body, self.quote)
        return None if call is None else [call]


class FunctionGemmaToolParser(Gemma4ToolParser):
    """``<start_function_call>call:NAME{…}<end_function_call>``."""

    block_open = FG_CALL_OPEN
    block_close = FG_CALL_CLOSE
    quote = FG_QUOTE

    __slots__ = ()


class Gemma4ReasoningParser(ThinkReasoningParser):
    """``<|channel>thought\\n…<channel|>``, also ended by a tool call."""

    open_marker = "<|channel>thought\n"
    close_marker = "<channel|>"
    ends_with = (CALL_OPEN,)

    __slots__ = ()


def parse_call(body: str, quote: str) -> Call | None:
    """``(name, arguments)`` of ``call:NAME{…}``, or ``None`` if ``body`` is not one."""
    text = body.strip()
    if not text.startswith("call:"):
        return None
    brace = text.find("{")
    if brace == -1 or not _NAME.fullmatch(text[5:brace]):
        return None
    try:
        arguments, end = _Reader(text, quote).mapping(brace, 0)
    except ValueError:
        return None
    if end != len(text):
        return None
    return text[5:brace], arguments


class _Reader:
    """Gemma's object syntax, read from ``text`` (raises ValueError where it is not)."""

    __slots__ = ("quote", "text")

    def __init__(self, text: str, quote: str) -> None:
        self.text, self.quote = text, quote

    def value(self, pos: int, depth: int) -> tuple[object, int]:
        text = self.text
        if depth > _MAX_DEPTH:
            raise ValueError("too deep")
        if text.startswith(self.quote, pos):
            start = pos + len(self.quote)
            end = text.find(self.quote, start)
            if end == -1:
                raise ValueError("an unclosed string")
            return text[start:end], end + len(self.quote)
        if text.startswith("{", pos):
            return self.mapping(pos, depth + 1)
        if text.startswith("[", pos):
            return self.array(pos, depth + 1)
        end = pos
        while end < len(text) and text[end] not in ",}]":
            end += 1
        return _bare(text[pos:end].strip()), end

    def mapping(self, pos: int, depth: int) -> tuple[dict[str, object], int]:
        text = self.text
        out: dict[str, object] = {}
        pos += 1  # {
        while True:
            pos = _space(text, pos)
            if text.startswith("}", pos):
                return out, pos + 1
            colon = text.find(":", pos)
            if colon == -1:
                raise ValueError("a key without a value")
            key = text[pos:colon].strip()
            if key.startswith(self.quote) and key.endswith(self.quote):
                key = key[len(self.quote) : -len(self.quote)]
            if not key:
                raise ValueError("an empty key")
            out[key], pos = self.value(_space(text, colon + 1), depth)
            pos = self._after_item(pos, "}")

    def array(self, pos: int, depth: int) -> tuple[list[object], int]:
        text = self.text
        out: list[object] = []
        pos = _space(text, pos + 1)
        if text.startswith("]", pos):
            return out, pos + 1
        while True:
            item, pos = self.value(_space(text, pos), depth)
            out.append(item)
            pos = _space(text, pos)
            if text.startswith("]", pos):
                return out, pos + 1
            if not text.startswith(",", pos):
                raise ValueError("no comma between items")
            pos += 1

    def _after_item(self, pos: int, close: str) -> int:
        pos = _space(self.text, pos)
        if self.text.startswith(",", pos):
            return pos + 1
        if self.text.startswith(close, pos):
            return pos
        raise ValueError("no comma between items")


def _space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _bare(word: str) -> object:
    if word in _KEYWORDS:
        return _KEYWORDS[word]
    if _INT.fullmatch(word):
        return int(word)
    if _NUMBER.fullmatch(word):
        number = float(word)
        return number if number - number == 0 else word
    if not word:
        raise ValueError("an empty value")
    return word
