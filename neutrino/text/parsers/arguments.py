"""Call arguments written as text rather than JSON: Python literals, and parameter schemas.

Used by the ``pythonic`` parser (keyword arguments are Python literals) and by the XML-style
formats (``glm45``, ``qwen3_coder``, ``minimax_m2``, ``deepseek_v32``), whose values are
typed by the request's tool schemas and may be written as Python literals, and whose
``<invoke name="…">`` elements are read whole. Literals are read from the syntax tree, never
evaluated.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping, Sequence
from typing import Final

__all__ = ["attribute_value", "elements", "literal", "parameter_schemas", "python_literal"]

_JSON_NAMES: Final[Mapping[str, object]] = {"true": True, "false": False, "null": None}


# Each function's parameter properties, by function name.
Schemas = Mapping[str, Mapping[str, object]]


def parameter_schemas(
    tools: Sequence[Mapping[str, object]] | None,
) -> dict[str, Mapping[str, object]]:
    """``{function name: parameter properties}`` of OpenAI ``tools``."""
    schemas: dict[str, Mapping[str, object]] = {}
    for tool in tools or ():
        fn = tool.get("function", tool)
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            continue
        params = fn.get("parameters")
        props = params.get("properties") if isinstance(params, Mapping) else None
        schemas.setdefault(fn["name"], props if isinstance(props, Mapping) else {})
    return schemas


def python_literal(text: str, default: object) -> object:
    """The JSON value of ``text`` read as a Python literal, else ``default``."""
    try:
        return literal(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return default


def literal(node: ast.expr) -> object:
    """The JSON value of a literal expression; ``ValueError`` for anything else."""
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, bool | int | str):
            return value
        if isinstance(value, float) and math.isfinite(value):
            return value
    elif isinstance(node, ast.List | ast.Tuple):
        return [literal(e) for e in node.elts]
    elif isinstance(node, ast.Dict):
        result: dict[str, object] = {}
        for key, value_node in zip(node.keys, node.values, strict=True):
            if key is None:
                raise ValueError("** in a dict")
            k = literal(key)
            if not isinstance(k, str):
                raise ValueError("non-string key")
            result[k] = literal(value_node)
        return result
    elif (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub | ast.UAdd)
        and isinstance(node.operand, ast.Constant)
    ):
        number = node.operand.value
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise ValueError("sign of a non-number")
        if isinstance(number, float) and not math.isfinite(number):
            raise ValueError("non-finite number")
        return -number if isinstance(node.op, ast.USub) else number
    elif isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    raise ValueError(f"not a literal: {type(node).__name__}")


def elements(text: str, opening: str, closing: str) -> list[str]:
    """The text after ``opening`` of each whole ``opening … closing`` element in ``text``,
    in order (one left open ends the list)."""
    out: list[str] = []
    pos = 0
    while (start := text.find(opening, pos)) != -1:
        end = text.find(closing, start)
        if end == -1:
            break
        out.append(text[start + len(opening) : end])
        pos = end + len(closing)
    return out


def attribute_value(raw: str) -> str:
    """An attribute's value as written after ``name=``: spaces and quotes around it gone."""
    return raw.strip().strip("\"'").strip()
