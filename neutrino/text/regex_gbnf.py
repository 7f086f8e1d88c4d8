"""A regular expression as a GBNF grammar whose language is the strings it matches whole.

The pattern is read by Python's own regex parser (``re._parser``), so what it accepts and
how it groups are Python's; the parse tree is then written as one GBNF rule. Literals,
classes (ranges, negation, ``\\d \\w \\s`` and their negations), ``.`` (any character but
a newline), alternation, groups and every repetition (greedy or lazy: for a whole match
the same language) are expressed. Anchors are allowed at the ends only; look-arounds,
back-references, conditionals, word boundaries and inline flags are refused.
"""

from __future__ import annotations

import re
from re import _constants as c  # type: ignore[attr-defined]
from re import _parser as sre  # type: ignore[attr-defined]
from typing import Any


class RegexUnsupported(ValueError):
    """A feature of the pattern that a grammar cannot express."""


_CATEGORIES = {
    c.CATEGORY_DIGIT: (False, "0-9"),
    c.CATEGORY_NOT_DIGIT: (True, "0-9"),
    c.CATEGORY_WORD: (False, "a-zA-Z0-9_"),
    c.CATEGORY_NOT_WORD: (True, "a-zA-Z0-9_"),
    c.CATEGORY_SPACE: (False, "\\x20\\t\\n\\r\\x0C\\x0B"),
    c.CATEGORY_NOT_SPACE: (True, "\\x20\\t\\n\\r\\x0C\\x0B"),
}
_STARTS = (c.AT_BEGINNING, c.AT_BEGINNING_STRING)
_ENDS = (c.AT_END, c.AT_END_STRING)
_NAMES = {
    c.ASSERT: "look-arounds",
    c.ASSERT_NOT: "look-arounds",
    c.GROUPREF: "back-references",
    c.GROUPREF_EXISTS: "conditionals",
    c.AT: "anchors inside the pattern and word boundaries",
    getattr(c, "ATOMIC_GROUP", c.ASSERT): "atomic groups",
}
_REPEATS = (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT))


def regex_grammar(pattern: str) -> str:
    """The GBNF grammar (rule ``root``) of the strings ``pattern`` matches whole."""
    try:
        tree = sre.parse(pattern)
    except re.error as exc:
        raise ValueError(f"the regular expression does not parse: {exc}") from None
    except RecursionError:
        raise RegexUnsupported("the regular expression is nested too deeply") from None
    if tree.state.flags & ~re.UNICODE:  # (?i), (?s), ... for the whole pattern
        raise RegexUnsupported("inline flags cannot be a grammar")
    items = list(tree)
    while items and items[0][0] is c.AT and items[0][1] in _STARTS:
        items.pop(0)
    while items and items[-1][0] is c.AT and items[-1][1] in _ENDS:
        items.pop()
    try:
        body = _sequence(items)
    except RecursionError:
        raise RegexUnsupported("the regular expression is nested too deeply") from None
    return "root ::= " + (body or '""') + "\n"


def _sequence(items: list[tuple[Any, Any]]) -> str:
    parts: list[str] = []
    text: list[str] = []
    for op, av in items:
        if op is c.LITERAL:
            text.append(chr(av))
            continue
        if text:
            parts.append(literal("".join(text)))
            text = []
        parts.append(_item(op, av))
    if text:
        parts.append(literal("".join(text)))
    return " ".join(p for p in parts if p)


def _item(op: Any, av: Any) -> str:
    if op is c.NOT_LITERAL:
        return f"[^{_class_char(av)}]"
    if op is c.ANY:
        return "[^\\n]"
    if op is c.IN:
        return _class(av)
    if op is c.CATEGORY:
        return _class([(c.CATEGORY, av)])
    if op is c.BRANCH:
        return "(" + " | ".join(_sequence(list(alt)) or '""' for alt in av[1]) + ")"
    if op is c.SUBPATTERN:
        _group, add_flags, del_flags, sub = av
        if add_flags or del_flags:
            raise RegexUnsupported("inline flags cannot be a grammar")
        return "(" + (_sequence(list(sub)) or '""') + ")"
    if op in _REPEATS:
        low, high, sub = av
        return _repeat(_sequence(list(sub)) or '""', low, high)
    what = _NAMES.get(op, str(op).lower())
    raise RegexUnsupported(f"{what} cannot be a grammar (a regular expression for guided decoding)")


def _repeat(inner: str, low: int, high: int) -> str:
    inner = f"({inner})"
    if high == c.MAXREPEAT:
        return {0: f"{inner}*", 1: f"{inner}+"}.get(low, f"{inner}{{{low},}}")
    if (low, high) == (0, 1):
        return f"{inner}?"
    if low == high:
        return f"{inner}{{{low}}}"
    return f"{inner}{{{low},{high}}}"


def _class(items: list[tuple[Any, Any]]) -> str:
    negate = False
    parts: list[str] = []
    negated_categories: list[str] = []
    for op, av in items:
        if op is c.NEGATE:
            negate = True
        elif op is c.LITERAL:
            parts.append(_class_char(av))
        elif op is c.RANGE:
            parts.append(f"{_class_char(av[0])}-{_class_char(av[1])}")
        elif op is c.CATEGORY and av in _CATEGORIES:
            neg, chars = _CATEGORIES[av]
            (negated_categories if neg else parts).append(chars)
        else:
            raise RegexUnsupported(f"{str(av).lower()} in a class cannot be a grammar")
    if negated_categories:
        if parts or negate or len(negated_categories) > 1:
            raise RegexUnsupported("a negated class shorthand mixed in a class")
        return f"[^{negated_categories[0]}]"
    return f"[{'^' if negate else ''}{''.join(parts)}]"


def _class_char(code: int) -> str:
    ch = chr(code)
    if ch.isascii() and ch.isalnum():
        return ch
    if code < 0x100:
        return f"\\x{code:02X}"
    if code < 0x10000:
        return f"\\u{code:04X}"
    return f"\\U{code:08X}"


def literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
