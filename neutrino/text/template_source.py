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

Both are done in one walk over the source that reads it as jinja2's lexer does: text outside
tags, ``{% raw %}`` blocks and comments are copied as written; inside a tag, string literals are
read whole (a ``%}`` or ``{% for`` in a literal is not a tag end or a loop), and a tag ends at
its closing delimiter outside brackets.

A literal whose decoded value holds a surrogate: a high-low pair is the character it encodes
(as minijinja reads ``\\ud83d\\ude00``; jinja2's string keeps the two surrogates, which have no
UTF-8 form). A lone surrogate has no form in minijinja's strings at all: jinja2 loads such a
template and renders it wherever the literal is not evaluated, and so does Neutrino, but where
it is evaluated (where jinja2 would make a prompt that cannot be encoded) the template raises,
through its ``raise_exception`` global, a message naming the literal.
"""

from __future__ import annotations

import codecs
import re
import warnings
from dataclasses import dataclass

__all__ = ["NOT_ITERABLE", "Prepared", "decode_literal", "prepare"]

NOT_ITERABLE = "__neutrino_not_iterable"
# A global every chat template is given (as transformers gives it): raises with its message.
_RAISE = "raise_exception"

_NEWLINES = re.compile(r"\r\n?")
_OPEN = re.compile(r"\{\{|\{%|\{#")
_RAW = re.compile(r"\{%[-+]?\s*raw\s*[-+]?%\}")
_ENDRAW = re.compile(r"\{%[-+]?\s*endraw\s*[-+]?%\}")
_END_COMMENT = re.compile(r"#\}")
# jinja2's lexer's string token (a backslash escapes any character, newlines included).
_STRING = re.compile(r"'([^'\\]*(?:\\.[^'\\]*)*)'|\"([^\"\\]*(?:\\.[^\"\\]*)*)\"", re.DOTALL)
# The inside of a tag (after ``{%``): whitespace control, then ``for`` as a whole name.
_FOR_HEAD = re.compile(r"[-+]?\s*for(?!\w)")
_TAG_TAIL = re.compile(r"\s*[-+]?\Z")
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


def _is_surrogate(ch: str) -> bool:
    return "\ud800" <= ch <= "\udfff"


def _raises_lone_surrogate(literal: str, lone: list[str]) -> str:
    """An expression that raises, naming ``literal`` (as written) and its lone surrogates."""
    quote = literal[0]
    shown = literal if len(literal) <= 40 else literal[:36] + "..." + quote
    written = shown.replace("\\", "\\\\").replace('"', '\\"')
    codes = ", ".join(f"U+{ord(ch):04X}" for ch in lone[:3])
    return (
        f"{_RAISE}(\"the chat template's string literal {written} holds a lone surrogate "
        f'({codes}), which no prompt can contain")'
    )


def _rewrite_literal(literal: str) -> str:
    quote, body = literal[0], literal[1:-1]
    if "\\" not in body:
        return literal
    value = decode_literal(body)
    if any(_is_surrogate(ch) for ch in value):  # pairs -> the character they encode
        value = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        lone = [ch for ch in value if _is_surrogate(ch)]
        if lone:
            return _raises_lone_surrogate(literal, lone)
    escaped = value.replace("\\", "\\\\").replace(quote, "\\" + quote)
    return f"{quote}{escaped}{quote}"


def _tag_inside(source: str, start: int, closer: str) -> tuple[str, int]:
    """The inside of a tag from ``start`` with its literals rewritten, and the index of its
    closing delimiter (outside brackets and literals; -1 if it has none)."""
    out: list[str] = []
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
            return "".join(out), i
        if ch in "([{":
            depth += 1
        elif ch in ")]}" and depth > 0:
            depth -= 1
        out.append(ch)
        i += 1
    out.append(source[i:])
    return "".join(out), -1


def _top_level_word(text: str, word: str) -> tuple[int, int] | None:
    """Where the name ``word`` first is in ``text`` outside brackets and string literals."""
    depth = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "'\"":
            m = _STRING.match(text, i)
            if m is None:
                return None
            i = m.end()
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif (
            depth == 0
            and text.startswith(word, i)
            and not (i > 0 and _is_name_char(text[i - 1]))
            and not (i + len(word) < len(text) and _is_name_char(text[i + len(word)]))
        ):
            return i, i + len(word)
        i += 1
    return None


def _is_name_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _split_clauses(rest: str) -> tuple[str, str]:
    """A loop's text after ``in`` -> (the sequence, what follows it: `` if ...``,
    `` recursive``), the sequence's own trailing whitespace left with what follows."""
    end = len(rest)
    recursive = _top_level_word(rest, "recursive")
    if recursive is not None and not rest[recursive[1] :].strip():
        end = recursive[0]
    cond = _top_level_word(rest[:end], "if")
    if cond is not None:
        end = cond[0]
    seq = rest[:end].rstrip()
    return seq, rest[len(seq) :]


def _guard_loop(inside: str, loops: list[str]) -> str:
    """A ``{% ... %}`` tag's inside; a ``for`` loop's with its sequence guarded:
    ``(seq if (seq) is not none else NOT_ITERABLE(k))``.

    For ``x|items`` and ``x.items()`` the guard is on ``x`` (pairs of a none mapping fail in
    both renderers; the guard names what was none).
    """
    head = _FOR_HEAD.match(inside)
    if head is None:
        return inside
    tail = _TAG_TAIL.search(inside, head.end())
    body_end = len(inside) if tail is None else tail.start()
    body = inside[head.end() : body_end]
    at = _top_level_word(body, "in")
    if at is None:
        return inside
    rest = body[at[1] :]
    lead = rest[: len(rest) - len(rest.lstrip())]
    seq, clauses = _split_clauses(rest[len(lead) :])
    if not seq:
        return inside
    pairs = _ITEMS.match(seq)
    base, after = (pairs.group(1), pairs.group(2)) if pairs else (seq, "")
    guarded = f"({base} if ({base}) is not none else {NOT_ITERABLE}({len(loops)})){after}"
    loops.append(base)
    return f"{inside[: head.end()]}{body[: at[1]]}{lead}{guarded}{clauses}{inside[body_end:]}"


def _skip_end(source: str, m: re.Match[str]) -> int:
    """Where a comment or a raw block opened at ``m`` ends (0 if ``m`` opens neither)."""
    opener = m.group(0)
    if opener == "{#":
        end_re = _END_COMMENT
    elif opener == "{%" and _RAW.match(source, m.start()):
        end_re = _ENDRAW
    else:
        return 0
    end = end_re.search(source, m.end())
    return len(source) if end is None else end.end()


def _walk(source: str) -> Prepared:
    """``source`` with each literal inside a tag decoded and each loop's sequence guarded."""
    out: list[str] = []
    loops: list[str] = []
    pos = 0
    while (m := _OPEN.search(source, pos)) is not None:
        out.append(source[pos : m.start()])
        skip = _skip_end(source, m)
        if skip:
            out.append(source[m.start() : skip])
            pos = skip
            continue
        opener = m.group(0)
        closer = "}}" if opener == "{{" else "%}"
        inside, close = _tag_inside(source, m.end(), closer)
        if close < 0:
            out.append(opener + inside)
            pos = len(source)
            break
        if opener == "{%":
            inside = _guard_loop(inside, loops)
        out.append(opener + inside + closer)
        pos = close + len(closer)
    out.append(source[pos:])
    return Prepared("".join(out), tuple(loops))


def prepare(source: str) -> Prepared:
    """The template to compile: line endings as jinja2's lexer makes them (``\\n``), string
    literals decoded as jinja2 decodes them, loops over none refused. Raises
    :class:`LiteralError` for a literal jinja2 cannot decode."""
    return _walk(_NEWLINES.sub("\n", source))
