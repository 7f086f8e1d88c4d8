"""``deepseek_v32``: DeepSeek V3.2's DSML tool calls (``deepseek_v4``: V4's spelling).

Written here with ``|`` for the FULLWIDTH VERTICAL LINE around ``DSML``, as the model
writes it.

Format (DeepSeek-V3.2's published encoding, ``encoding_dsv32.py``, which renders past calls
this way; vLLM's and SGLang's ``deepseek_v32`` parsers read the same)::

    Let me check.

    <|DSML|function_calls>
    <|DSML|invoke name="get_weather">
    <|DSML|parameter name="city" string="true">Hangzhou</|DSML|parameter>
    <|DSML|parameter name="days" string="false">3</|DSML|parameter>
    </|DSML|invoke>
    </|DSML|function_calls>

DeepSeek V4 writes the block as ``<|DSML|tool_calls>`` … ``</|DSML|tool_calls>``, the
rest alike. A block holds one or more ``<|DSML|invoke>`` elements, each a call. A parameter
that says ``string="true"`` is its text exactly as written; ``string="false"`` is a JSON
value (text that is not JSON stays the text); without the attribute the value is typed by
the request's tool schema as ``qwen3_coder`` types its values. An invoke needs its
``</|DSML|invoke>`` and a parameter its ``</|DSML|parameter>`` (one left open is no
call / no parameter), text between the elements is ignored, and a block still open at the end of
the stream is no call (the encoding's parser matches whole elements). A block with no
call in it is content verbatim, markers included (after a call: dropped, as all text after
a call is: the README's rule).

Reasoning is ``<think>…</think>`` (the thinking mode's template opens it): ``think``'s,
also under vLLM's name ``deepseek_v3``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from neutrino.text.parsers.arguments import Schemas, attribute_value, elements
from neutrino.text.parsers.base import Call, load_json
from neutrino.text.parsers.blocks import BlockToolParser
from neutrino.text.parsers.qwen3_coder import convert_value

__all__ = [
    "BLOCK_CLOSE",
    "BLOCK_OPEN",
    "INVOKE",
    "INVOKE_END",
    "PARAMETER",
    "PARAMETER_END",
    "V4_BLOCK_CLOSE",
    "V4_BLOCK_OPEN",
    "DeepSeekV4ToolParser",
    "DeepSeekV32ToolParser",
    "parse_block",
]

DSML: Final = "\uff5cDSML\uff5c"  # FULLWIDTH VERTICAL LINEs around DSML
BLOCK_OPEN: Final = f"<{DSML}function_calls>"
BLOCK_CLOSE: Final = f"</{DSML}function_calls>"
V4_BLOCK_OPEN: Final = f"<{DSML}tool_calls>"
V4_BLOCK_CLOSE: Final = f"</{DSML}tool_calls>"
INVOKE: Final = f"<{DSML}invoke name="
INVOKE_END: Final = f"</{DSML}invoke>"
PARAMETER: Final = f"<{DSML}parameter name="
PARAMETER_END: Final = f"</{DSML}parameter>"

# A parameter's head: name="N" then an optional string="true|false".
_HEAD: Final = re.compile(
    r"""\s*["']?([^"'\s>]+)["']?(?:\s+string\s*=\s*["'](true|false)["'])?\s*"""
)


class DeepSeekV32ToolParser(BlockToolParser):
    """DeepSeek V3.2 ``<|DSML|function_calls>`` blocks (see the module docstring)."""

    block_open = BLOCK_OPEN
    block_close = BLOCK_CLOSE
    quoting = (PARAMETER, (PARAMETER_END, INVOKE_END))
    unclosed_calls = False  # the encoding's parser matches whole elements

    __slots__ = ()

    def _parse_block(self, body: str) -> list[Call] | None:
        return parse_block(body, self.schemas)


class DeepSeekV4ToolParser(DeepSeekV32ToolParser):
    """DeepSeek V4's ``<|DSML|tool_calls>`` blocks."""

    block_open = V4_BLOCK_OPEN
    block_close = V4_BLOCK_CLOSE

    __slots__ = ()


def parse_block(body: str, schemas: Schemas) -> list[Call] | None:
    """The calls in one block's text, or ``None`` when it holds none."""
    calls: list[Call] = []
    for element in elements(body, INVOKE, INVOKE_END):
        gt = element.find(">")
        name = attribute_value(element[:gt]) if gt != -1 else ""
        if name:
            calls.append((name, _parameters(element[gt + 1 :], schemas.get(name, {}))))
    return calls or None


def _parameters(text: str, schema: Mapping[str, object]) -> dict[str, object]:
    arguments: dict[str, object] = {}
    for element in elements(text, PARAMETER, PARAMETER_END):
        gt = element.find(">")
        head = _HEAD.fullmatch(element[:gt]) if gt != -1 else None
        if head is None:
            continue
        name, declared, value = head.group(1), head.group(2), element[gt + 1 :]
        if declared == "true":
            arguments[name] = value
        elif declared == "false":
            ok, parsed = load_json(value.strip())
            arguments[name] = parsed if ok else value
        else:
            arguments[name] = convert_value(value, schema.get(name))
    return arguments
