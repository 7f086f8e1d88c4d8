"""``pythonic``: a Python list of calls (Llama 3.2 / 3.3 zero-shot, Llama 4, ToolACE, …).

Source: Meta's Llama 3.2 / 3.3 prompt format ("you MUST put it in the format of
``[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]``");
Llama 4 may wrap the list in ``<|python_start|>``/``<|python_end|>``. vLLM's ``pythonic`` and
``llama4_pythonic`` parsers read the same::

    [get_weather(city="Paris", unit="c"), get_time()]
    <|python_start|>[get_weather(city='Paris')]<|python_end|>

The message must start (after whitespace) with the list (or the start tag). Its arguments are
keyword arguments whose values are Python literals — strings, numbers, ``True``/``False``/
``None`` (and JSON's ``true``/``false``/``null``), lists, tuples, dicts with string keys — read
from the syntax tree (:mod:`ast`), never evaluated. Text after the list is dropped (the
README's rule for text after calls). When the
request has tools, every name must be one of them. Anything else (positional arguments,
expressions, an unknown name, a message that does not start with ``[name(``) is content
verbatim; a message that starts like ``[link](…)`` is released as content as soon as that is
clear, but a real call list is held until the end of the stream (the list can only be parsed
whole), so the calls arrive with ``finish()``.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Mapping, Sequence
from typing import Final

from neutrino.text.parsers.arguments import literal
from neutrino.text.parsers.base import Call, CallIds, Delta
from neutrino.text.parsers.segmented import SegmentedToolParser

__all__ = ["PYTHON_END", "PYTHON_START", "PythonicToolParser", "dotted_name", "parse_call_list"]

PYTHON_START: Final = "<|python_start|>"
PYTHON_END: Final = "<|python_end|>"
NAME_LIMIT: Final = 256
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")

# states; _PROBE phases: before the name, in the name, after the name
_START, _AFTER_TAG, _PROBE, _LIST, _TEXT = range(5)
_BEFORE_NAME, _IN_NAME, _AFTER_NAME = range(3)


class PythonicToolParser(SegmentedToolParser):
    """Pythonic call lists (see the module docstring)."""

    __slots__ = ("_name_len", "_phase")

    def __init__(
        self, *, tools: Sequence[Mapping[str, object]] | None = None, id_prefix: CallIds = "call_"
    ) -> None:
        super().__init__(tools=tools, id_prefix=id_prefix)
        self._phase = _BEFORE_NAME
        self._name_len = 0

    def _scan(self, out: Delta, buf: str) -> str:
        while buf:
            state = self._state
            if state == _TEXT:
                self._segments.text(out, buf)
                buf = ""
            elif state == _LIST:
                self._raw.append(buf)
                buf = ""
            elif state == _PROBE:
                i = self._probe(buf)
                self._raw.append(buf[: i + 1] if i >= 0 else buf)
                if i == -1:  # undecided: all consumed
                    buf = ""
                elif self._state == _LIST:
                    buf = buf[i + 1 :]
                else:
                    buf = buf[i + 1 :]
                    self._fail(out)
            else:  # _START / _AFTER_TAG
                stripped = buf.lstrip()
                skipped = buf[: len(buf) - len(stripped)]
                if state == _START:
                    self._segments.text(out, skipped)
                else:
                    self._raw.append(skipped)
                buf = stripped
                if not buf:
                    break
                if buf[0] == "[":
                    if state == _START:
                        self._open_block()
                    self._raw.append("[")
                    buf = buf[1:]
                    self._phase, self._name_len = _BEFORE_NAME, 0
                    self._state = _PROBE
                elif state == _START and buf.startswith(PYTHON_START):
                    self._open_block(PYTHON_START)
                    buf = buf[len(PYTHON_START) :]
                    self._state = _AFTER_TAG
                elif state == _START and PYTHON_START.startswith(buf):
                    break  # the start tag may be arriving
                elif state == _START:
                    self._state = _TEXT
                else:
                    self._fail(out)
        return buf

    def _flush(self, out: Delta, buf: str) -> None:
        if self._state in (_START, _TEXT):
            self._segments.text(out, buf)
        elif self._state == _LIST:
            src = "".join(self._raw)
            parsed = parse_call_list(src)
            if parsed is None or not all(self._name_allowed(name) for name, _ in parsed[0]):
                self._end_block(out, None, (src,))
            else:
                self._end_block(out, parsed[0])
                self._segments.text(out, parsed[1])
        else:
            self._raw.append(buf)
            self._fail(out)
        self._state = _TEXT

    def _fail(self, out: Delta) -> None:
        """The text is not a call list: it is content, and so is everything after it."""
        self._end_block(out, None)
        self._state = _TEXT

    def _probe(self, buf: str) -> int:
        """Check ``[ name (``: the index of the deciding character, or -1 if undecided.

        Sets the state to ``_LIST`` when the ``(`` is reached; leaves it otherwise (the caller
        then fails the probe).
        """
        phase = self._phase
        for i, ch in enumerate(buf):
            if phase == _IN_NAME and ch in _NAME_CHARS:
                self._name_len += 1
                if self._name_len > NAME_LIMIT:
                    return i
            elif ch.isspace() and phase != _IN_NAME:
                continue
            elif phase == _BEFORE_NAME and ch in _NAME_CHARS and not ch.isdigit():
                phase, self._name_len = _IN_NAME, 1
            elif phase == _IN_NAME and ch.isspace():
                phase = _AFTER_NAME
            elif ch == "(" and phase != _BEFORE_NAME:
                self._state = _LIST
                return i
            else:
                return i
        self._phase = phase
        return -1


def parse_call_list(src: str) -> tuple[list[Call], str] | None:
    """``(calls, text after the list)`` of a pythonic call list, or ``None`` if it is not one."""
    if src.startswith(PYTHON_START):
        src = src[len(PYTHON_START) :].lstrip()
    end = _list_end(src)
    if end is None:  # no tokenizable list end: try the whole text as the list
        body = src.rstrip()
        body = body.removesuffix(PYTHON_END).rstrip()
        end = len(body)
    try:
        tree = ast.parse(src[:end], mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(tree.body, ast.List) or not tree.body.elts:
        return None
    calls: list[Call] = []
    try:
        for node in tree.body.elts:
            if not isinstance(node, ast.Call) or node.args:
                return None
            name = dotted_name(node.func)
            args: dict[str, object] = {}
            for kw in node.keywords:
                if kw.arg is None:
                    return None
                args[kw.arg] = literal(kw.value)
            calls.append((name, args))
    except (ValueError, RecursionError):
        return None
    rest = src[end:]
    if rest.lstrip().startswith(PYTHON_END):
        rest = rest.lstrip()[len(PYTHON_END) :]
    return calls, rest


def _list_end(src: str) -> int | None:
    """Index just past the ``]`` that closes the list opening ``src``, via the tokenizer."""
    line_starts = [0]
    depth = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type == tokenize.OP:
                if tok.string in ("(", "[", "{"):
                    depth += 1
                elif tok.string in (")", "]", "}"):
                    depth -= 1
                    if depth == 0:
                        row, col = tok.end
                        while len(line_starts) < row:
                            line_starts.append(src.index("\n", line_starts[-1]) + 1)
                        return line_starts[row - 1] + col
            elif tok.type in (tokenize.ERRORTOKEN, tokenize.ENDMARKER):
                return None
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return None


def dotted_name(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise ValueError("call of a non-name")
    parts.append(node.id)
    return ".".join(reversed(parts))
