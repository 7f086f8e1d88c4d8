"""Which field of a request a chat template could not iterate (sans-IO).

A prepared template (``template_source``) fails on a loop over none with the loop's sequence
expression, e.g. ``message['content']`` or ``tool.parameters.properties``. The expression's
attribute path is looked for in what the template was given (messages, tools, template
variables): the nodes where that path ends in a none are the candidates, named as a client
names them (``messages[2].content``, ``tools[0].function.parameters.properties``,
``chat_template_kwargs.documents``). Where several are, the first one the template reaches is
found by rendering with only a prefix of them left none (a bisection: a few renders, on the
error path only).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "Path",
    "attribute_path",
    "client_name",
    "first_reached",
    "format_path",
    "none_fields",
]

Path = tuple[str | int, ...]

_ROOT = re.compile(r"\s*([A-Za-z_]\w*)")
_STEP = re.compile(r"\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*(?:'([^'\\]*)'|\"([^\"\\]*)\"|(\d+))\s*\])")
# Template variables as a client names them (the rest come from chat_template_kwargs).
_VARIABLES = {"messages": "messages", "tools": "tools"}
_MAX_NODES = 100_000


def attribute_path(expression: str) -> tuple[str, tuple[str | int, ...]] | None:
    """``message['content']`` -> ``("message", ("content",))``; None for anything that is
    not a variable followed by attribute and item lookups."""
    m = _ROOT.match(expression)
    if m is None:
        return None
    root, pos, steps = m.group(1), m.end(), []
    while pos < len(expression.rstrip()):
        s = _STEP.match(expression, pos)
        if s is None:
            return None
        name, single, double, index = s.groups()
        steps.append(int(index) if index is not None else name or single or double or "")
        pos = s.end()
    return root, tuple(steps)


def format_path(path: Path) -> str:
    """``("messages", 2, "content")`` -> ``messages[2].content``."""
    out = str(path[0])
    for step in path[1:]:
        out += f"[{step}]" if isinstance(step, int) else f".{step}"
    return out


def _lookup(node: Any, steps: tuple[str | int, ...]) -> tuple[bool, Any]:
    """(found, value) of ``steps`` below ``node``; a missing key is not found (undefined)."""
    for step in steps:
        if isinstance(step, int):
            if not isinstance(node, list | tuple) or not -len(node) <= step < len(node):
                return False, None
            node = node[step]
        elif isinstance(node, Mapping) and step in node:
            node = node[step]
        else:
            return False, None
    return True, node


def _walk(value: Any, path: Path, out: list[Path], budget: list[int]) -> None:
    """Every mapping below ``value`` (depth first, in order), by its path."""
    budget[0] -= 1
    if budget[0] < 0:
        return
    if isinstance(value, Mapping):
        out.append(path)
        for key, item in value.items():
            if isinstance(item, Mapping | list | tuple):
                _walk(item, (*path, key), out, budget)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            if isinstance(item, Mapping | list | tuple):
                _walk(item, (*path, i), out, budget)


def _client_path(path: Path) -> Path:
    head = path[0]
    if isinstance(head, str) and head in _VARIABLES:
        return (_VARIABLES[head], *path[1:])
    return ("chat_template_kwargs", *path)


def none_fields(expression: str, context: Mapping[str, object]) -> list[Path]:
    """Where in ``context`` the loop sequence ``expression`` may have been none, in order."""
    parsed = attribute_path(expression)
    if parsed is None:
        return []
    root, steps = parsed
    if root in context:
        found, value = _lookup(context[root], steps)
        return [(root, *steps)] if found and value is None else []
    if not steps:
        return []  # a loop or `set` variable of the template's own: nothing to name
    nodes: list[Path] = []
    budget = [_MAX_NODES]
    for name in ("messages", "tools", *sorted(k for k in context if k not in _VARIABLES)):
        if isinstance(context.get(name), Mapping | list | tuple):
            _walk(context[name], (name,), nodes, budget)
    out = []
    for node in nodes:
        found, value = _lookup(_lookup(context, node)[1], steps)
        if found and value is None:
            out.append((*node, *steps))
    return out


def _set(root: Any, path: Path, value: Any) -> Any:
    """A copy of ``root`` with ``path`` set to ``value`` (only the spine is copied)."""
    if not path:
        return value
    step, rest = path[0], path[1:]
    copy: Any = list(root) if isinstance(root, list | tuple) else dict(root)
    copy[step] = _set(root[step], rest, value)
    return copy


def first_reached(
    candidates: list[Path], context: Mapping[str, object], fails: Callable[[dict[str, Any]], bool]
) -> Path:
    """The candidate the template reaches first: the shortest prefix of ``candidates`` that
    still ``fails`` when all the later ones are given an empty list, by bisection."""
    lo, hi = 1, len(candidates)
    while lo < hi:
        mid = (lo + hi) // 2
        trial: dict[str, Any] = dict(context)
        for path in candidates[mid:]:
            trial = _set(trial, path, [])
        if fails(trial):
            hi = mid
        else:
            lo = mid + 1
    return candidates[lo - 1]


def client_name(path: Path) -> str:
    """The request field for a context path (template variables from chat_template_kwargs)."""
    return format_path(_client_path(path))
