"""A deterministic text that matches a regular expression: the mock's 'regex decoding'.

Walks Python's parse of the pattern and takes the first way through each node:
literals as written, the first alternative, the smallest repeat count (at least one
where the pattern allows more), a class's first member. Lookarounds and
backreferences are beyond it: ``RegexTooHard`` says so.
"""

from __future__ import annotations

import re
from re import _constants as c  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any

_CATEGORY: dict[Any, str] = {
    c.CATEGORY_DIGIT: "0",
    c.CATEGORY_NOT_DIGIT: "a",
    c.CATEGORY_WORD: "a",
    c.CATEGORY_NOT_WORD: " ",
    c.CATEGORY_SPACE: " ",
    c.CATEGORY_NOT_SPACE: "a",
}


class RegexTooHard(ValueError):
    pass


def regex_instance(pattern: str) -> str:
    text = _walk(_parser.parse(pattern))
    if re.fullmatch(pattern, text) is None:
        raise RegexTooHard(f"cannot produce a text for {pattern!r}")
    return text


def _walk(items: Any) -> str:
    return "".join(_node(op, av) for op, av in items)


def _node(op: Any, av: Any) -> str:
    if op is c.LITERAL:
        return chr(av)
    if op is c.NOT_LITERAL:
        return "a" if av != ord("a") else "b"
    if op is c.ANY:
        return "a"
    if op is c.IN:
        return _member(av)
    if op is c.AT:
        return ""
    if op is c.SUBPATTERN:
        return _walk(av[-1])
    if op is c.BRANCH:
        return _walk(av[1][0])
    if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
        low, high, sub = av
        count: int = max(low, min(1, high))
        return _walk(sub) * count
    if op is c.ATOMIC_GROUP:
        return _walk(av)
    raise RegexTooHard(f"the mock cannot decode under {op} in a regex")


def _member(items: Any) -> str:
    if items and items[0][0] is c.NEGATE:
        raise RegexTooHard("the mock cannot decode under a negated class")
    op, av = items[0]
    if op is c.LITERAL:
        return chr(av)
    if op is c.RANGE:
        return chr(av[0])
    if op is c.CATEGORY and av in _CATEGORY:
        return str(_CATEGORY[av])
    raise RegexTooHard(f"the mock cannot decode under {op} in a class")
