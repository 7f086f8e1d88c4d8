"""``olmo3``: AllenAI OLMo 3's tool calls, Python calls in a ``<function_calls>`` block.

Format (OLMo 3 Instruct's chat template and vLLM's ``olmo3`` parser)::

    I'll look.<function_calls>get_weather(city="Paris", units="celsius")
    get_time(tz="CET")</function_calls>

One call per line (calls separated by commas on a line are read too), each a function
called with keyword arguments whose values are literals (``pythonic``'s rules: Python's or
JSON's ``true``/``false``/``null``, read from the syntax tree, never evaluated). The block
is read as Python statements, so a string argument may span lines (vLLM joins the lines
with commas and loses such a call). A block that is not such calls is content verbatim; a
block open at the end of the stream is read as if closed; text after a call is dropped (the
README's rule). The Think models' reasoning is ``think``'s (their template opens it).
"""

from __future__ import annotations

import ast
from typing import Final

from neutrino.text.parsers.arguments import literal
from neutrino.text.parsers.base import Call
from neutrino.text.parsers.blocks import BlockToolParser
from neutrino.text.parsers.pythonic import dotted_name

__all__ = ["BLOCK_CLOSE", "BLOCK_OPEN", "Olmo3ToolParser", "parse_calls"]

BLOCK_OPEN: Final = "<function_calls>"
BLOCK_CLOSE: Final = "</function_calls>"


class Olmo3ToolParser(BlockToolParser):
    """``<function_calls>`` blocks of Python calls (see the module docstring)."""

    block_open = BLOCK_OPEN
    block_close = BLOCK_CLOSE

    __slots__ = ()

    def _parse_block(self, body: str) -> list[Call] | None:
        return parse_calls(body)


def parse_calls(body: str) -> list[Call] | None:
    """The calls of a block's Python statements, or ``None`` if it holds anything else."""
    try:
        tree = ast.parse(body.strip(), mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    nodes: list[ast.expr] = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            return None
        value = stmt.value
        nodes.extend(value.elts if isinstance(value, ast.Tuple) else [value])
    calls: list[Call] = []
    try:
        for node in nodes:
            if not isinstance(node, ast.Call) or node.args:
                return None
            arguments: dict[str, object] = {}
            for kw in node.keywords:
                if kw.arg is None:
                    return None
                arguments[kw.arg] = literal(kw.value)
            calls.append((dotted_name(node.func), arguments))
    except (ValueError, RecursionError):
        return None
    return calls or None
