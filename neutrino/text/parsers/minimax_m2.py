"""``minimax_m2``: MiniMax M2's XML tool calls (M2, M2.1 and M2.5 write the same).

Format (MiniMax-M2's chat template and its published tool-calling guide; vLLM's and SGLang's
``minimax_m2`` parsers read the same)::

    Let me look it up.
    <minimax:tool_call>
    <invoke name="get_weather">
    <parameter name="city">Paris</parameter>
    <parameter name="days">3</parameter>
    </invoke>
    <invoke name="get_time">
    </invoke>
    </minimax:tool_call>

One block holds one or more ``<invoke>`` elements, each a call. A name (of a call or a
parameter) is what its ``name=`` attribute holds, spaces and quotes around it stripped. A
parameter's value is the text up to its ``</parameter>``, spaces around it stripped, typed
by the request's tool schema as ``qwen3_coder`` types its values (a string type stays a
string, ``null`` is ``None``, numbers, booleans, JSON; an unreadable value stays the text).
As the guide's own parser reads it, an ``<invoke>`` needs its ``</invoke>`` and a parameter
its ``</parameter>`` (one left open is no call / no parameter), text between the elements
of a block is ignored, and a block still open at the end of the stream is no call. A block
with no call in it is content verbatim, markers included (after a call: dropped, as all
text after a call is: the README's rule).

Reasoning (interleaved thinking) is ``<think>…</think>`` before the answer: the reasoning
parser of the same name is ``think``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from neutrino.text.parsers.arguments import Schemas, attribute_value, elements
from neutrino.text.parsers.base import Call
from neutrino.text.parsers.blocks import BlockToolParser
from neutrino.text.parsers.qwen3_coder import convert_value

__all__ = [
    "BLOCK_CLOSE",
    "BLOCK_OPEN",
    "INVOKE",
    "INVOKE_END",
    "PARAMETER",
    "PARAMETER_END",
    "MinimaxM2ToolParser",
    "invokes",
    "parse_block",
]

BLOCK_OPEN: Final = "<minimax:tool_call>"
BLOCK_CLOSE: Final = "</minimax:tool_call>"
INVOKE: Final = "<invoke name="
INVOKE_END: Final = "</invoke>"
PARAMETER: Final = "<parameter name="
PARAMETER_END: Final = "</parameter>"


class MinimaxM2ToolParser(BlockToolParser):
    """MiniMax M2 ``<minimax:tool_call>`` blocks (see the module docstring)."""

    block_open = BLOCK_OPEN
    block_close = BLOCK_CLOSE
    quoting = (PARAMETER, (PARAMETER_END, INVOKE_END))
    unclosed_calls = False  # the guide's parser needs the block's end

    __slots__ = ()

    def _parse_block(self, body: str) -> list[Call] | None:
        return parse_block(body, self.schemas)


def parse_block(body: str, schemas: Schemas) -> list[Call] | None:
    """The calls in one block's text, or ``None`` when it holds none."""
    return invokes(body, schemas, (INVOKE, INVOKE_END), (PARAMETER, PARAMETER_END))


def invokes(
    body: str, schemas: Schemas, invoke: tuple[str, str], parameter: tuple[str, str]
) -> list[Call] | None:
    """The ``<invoke name="F">…</invoke>`` calls in ``body`` with their whole
    ``<parameter name="P">…</parameter>`` values, spaces around each stripped and typed by
    ``schemas`` (``invoke`` and ``parameter``: the elements' markers, as a family spells
    them); ``None`` when there is none."""
    calls: list[Call] = []
    for element in elements(body, *invoke):
        gt = element.find(">")
        name = attribute_value(element[:gt]) if gt != -1 else ""
        if name:
            calls.append((name, _parameters(element[gt + 1 :], schemas.get(name, {}), parameter)))
    return calls or None


def _parameters(
    text: str, schema: Mapping[str, object], markers: tuple[str, str]
) -> dict[str, object]:
    arguments: dict[str, object] = {}
    for element in elements(text, *markers):
        gt = element.find(">")
        name = attribute_value(element[:gt]) if gt != -1 else ""
        if name:
            arguments[name] = convert_value(element[gt + 1 :].strip(), schema.get(name))
    return arguments
