"""A chat template's source, prepared once at load so that minijinja renders it as jinja2 does.

Two differences between the renderers change what published templates produce:

* **String literals.** jinja2 decodes a string literal with Python's ``unicode-escape`` codec
  (a backslash before a newline continues the line, ``\\101`` is octal, ``\\N{...}`` names a
  character, unknown escapes stay as written); minijinja knows fewer escapes. Every literal
  with a backslash in it is decoded as jinja2 decodes it and written back with only the
  escapes both renderers share (``\\\\`` and the quote).
* **Loops over none.** minijinja iterates over none as an empty sequence; jinja2 raises. Each
  ``{% for %}`` loop's sequence is guarded: a none sequence calls the global
  :data:`NOT_ITERABLE` with the loop's number, and :attr:`Prepared.loops` keeps each loop's
  sequence expression, so the caller can tell which field of the request was none.
"""

from __future__ import annotations

import codecs
import re
import warnings
from dataclasses import dataclass

__all__ = ["NOT_ITERABLE", "Prepared", "decode_literal", "prepare"]

NOT_ITERABLE = "__neutrino_not_iterable"

_NEWLINES = re.compile(r"\r\n?")
_OPEN = re.compile(r"\{\{|\{%|\{#")
_RAW = re.compile(r"\{%[-+]?\s*raw\s*[-+]?%\}")
_ENDRAW = re.compile(r"\{%[-+]?\s*endraw\s*[-+]?%\}")
# jinja2's lexer's string token (a backslash escapes any character, newlines included).
_STRING = re.compile(r"'([^'\\]*(?:\\.[^'\\]*)*)'|\"([^\"\\]*(?:\\.[^\"\\]*)*)\"", re.DOTALL)
_FOR = re.compile(r"(\{%-?\s*for\s+)(.*?)(\s*[-+]?%\})", re.DOTALL)
_ITEMS = re.compile(r"^(.*?)\s*(\|\s*items|\.items\(\))$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Prepared:
    """The source to compile, and the sequence expression of each guarded loop."""

    source: str
    loops: tuple[str, ...]


class LiteralError(ValueError):
    """A string literal that jinja2 refuses to decode (a bad escape)."""


def decode_literal(body: str) -> str:
    """A literal's value as jinja2 decodes it (``body`` is the text between the quotes)."""
    if "\\" not in body:
        return body
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # unknown escapes: kept as written
        try:
            return codecs.decode(body.encode("ascii", "backslashreplace"), "unicode-escape")
        except UnicodeDecodeError as e:
            raise LiteralError(f"bad escape in string literal: {e.reason}") from None


def _rewrite_literal(literal: str) -> str:
    quote, body = literal[0], literal[1:-1]
    if "\\" not in body:
        return literal
    value = decode_literal(body)
    if any("\ud800" <= ch <= "\udfff" for ch in value):
        return literal  # a lone surrogate cannot reach minijinja; leave the literal as written
    escaped = value.replace("\\", "\\\\").replace(quote, "\\" + quote)
    return f"{quote}{escaped}{quote}"


def _tag_end(source: str, start: int, closer: str, out: list[str]) -> int:
    """Copy the inside of a tag from ``start`` into ``out`` with its literals rewritten, and
    return the index after its closing delimiter (the end of ``source`` if it has none)."""
    depth = 0
    i = start
    n = len(source)
    while i < n:
        ch = source[i]
        if ch in "'\"":
            m = _STRING.match(source, i)
            if m is None:
                break
            out.append(_rewrite_literal(m.group(0)))
            i = m.end()
            continue
        if depth == 0 and source.startswith(closer, i):
            out.append(closer)
            return i + len(closer)
        if ch in "([{":
            depth += 1
        elif ch in ")]}" and depth > 0:
            depth -= 1
        out.append(ch)
        i += 1
    out.append(source[i:])
    return n


def _decode_literals(source: str) -> str:
    """``source`` with each string literal inside a tag decoded as jinja2 decodes it."""
    if "\\" not in source:
        return source
    out: list[str] = []
    pos = 0
    while (m := _OPEN.search(source, pos)) is not None:
        out.append(source[pos : m.start()])
        opener = m.group(0)
        if opener == "{#" or (opener == "{%" and _RAW.match(source, m.start())):
            end_re = re.compile(r"#\}") if opener == "{#" else _ENDRAW
            end = end_re.search(source, m.end())
            stop = len(source) if end is None else end.end()
            out.append(source[m.start() : stop])
            pos = stop
            continue
        out.append(opener)
        pos = _tag_end(source, m.end(), "}}" if opener == "{{" else "%}", out)
    out.append(source[pos:])
    return "".join(out)


def _top_level_split(text: str, word: str) -> int:
    """Index of `` word `` in ``text`` outside brackets and string literals, or -1."""
    depth = 0
    quote = ""
    i = 0
    needle = f" {word} "
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(needle, i):
            return i
        i += 1
    return -1


def _strict_loops(source: str) -> Prepared:
    """Guard each loop's sequence: ``(seq if (seq) is not none else NOT_ITERABLE(k))``.

    For ``x|items`` and ``x.items()`` the guard is on ``x`` (pairs of a none mapping fail in
    both renderers; the guard names what was none).
    """
    loops: list[str] = []

    def rewrite(m: re.Match[str]) -> str:
        head, body, tail = m.group(1), m.group(2), m.group(3)
        at = _top_level_split(body, "in")
        if at < 0:
            return m.group(0)
        target, rest = body[:at], body[at + 4 :]
        suffix = ""
        if rest.endswith(" recursive"):
            rest, suffix = rest[: -len(" recursive")], " recursive"
        cond = _top_level_split(rest, "if")
        if cond >= 0:
            rest, suffix = rest[:cond], rest[cond:] + suffix
        seq = rest.strip()
        pairs = _ITEMS.match(seq)
        base, after = (pairs.group(1), pairs.group(2)) if pairs else (seq, "")
        guarded = f"({base} if ({base}) is not none else {NOT_ITERABLE}({len(loops)})){after}"
        loops.append(base)
        return f"{head}{target} in {guarded}{suffix}{tail}"

    return Prepared(_FOR.sub(rewrite, source), tuple(loops))


def prepare(source: str) -> Prepared:
    """The template to compile: line endings as jinja2's lexer makes them (``\\n``), string
    literals decoded as jinja2 decodes them, loops over none refused. Raises
    :class:`LiteralError` for a literal jinja2 cannot decode."""
    return _strict_loops(_decode_literals(_NEWLINES.sub("\n", source)))
