"""``longcat``: Meituan LongCat Flash's tool calls and its ``<longcat_think>`` reasoning.

Format: one ``<longcat_tool_call>`` block per call, in either of the two spellings the
family's checkpoints write (vLLM's ``longcat`` parser reads the first, mlx-lm's and
Ollama's both)::

    <longcat_tool_call>
    {"name": "search", "arguments": {"q": "cats"}}
    </longcat_tool_call>

    <longcat_tool_call>search
    <longcat_arg_key>q</longcat_arg_key>
    <longcat_arg_value>cats</longcat_arg_value>
    </longcat_tool_call>

LongCat-Flash-Chat writes the JSON object (``hermes``'s rules); Flash-Lite and the Thinking
checkpoints write GLM-4.5's pairs with their own markers (``glm45``'s rules: a value is JSON
or a Python literal unless the tool's schema types it a string). A block still open at the
end of the stream is read as if closed, as vLLM's parser reads it; a block that is neither
is content verbatim (after a call: dropped). The reasoning is ``think``'s rules with
``<longcat_think>`` and ``</longcat_think>`` (the Thinking checkpoints' template opens it).
"""

from __future__ import annotations

from typing import Final

from neutrino.text.parsers.base import Call, call_from_object, load_object
from neutrino.text.parsers.blocks import BlockToolParser
from neutrino.text.parsers.glm45 import parse_call, string_parameters
from neutrino.text.parsers.think import ThinkReasoningParser

__all__ = [
    "ARG_KEY",
    "ARG_KEY_END",
    "ARG_VALUE",
    "ARG_VALUE_END",
    "BLOCK_CLOSE",
    "BLOCK_OPEN",
    "LongcatReasoningParser",
    "LongcatToolParser",
]

BLOCK_OPEN: Final = "<longcat_tool_call>"
BLOCK_CLOSE: Final = "</longcat_tool_call>"
ARG_KEY: Final = "<longcat_arg_key>"
ARG_KEY_END: Final = "</longcat_arg_key>"
ARG_VALUE: Final = "<longcat_arg_value>"
ARG_VALUE_END: Final = "</longcat_arg_value>"


class LongcatToolParser(BlockToolParser):
    """``<longcat_tool_call>`` blocks, JSON or key/value pairs (see the module docstring)."""

    block_open = BLOCK_OPEN
    block_close = BLOCK_CLOSE

    __slots__ = ()

    def _parse_block(self, body: str) -> list[Call] | None:
        if body.lstrip().startswith("{"):
            call = call_from_object(load_object(body))
        else:
            call = parse_call(
                body,
                string_parameters(self.schemas),
                (ARG_KEY, ARG_KEY_END),
                (ARG_VALUE, ARG_VALUE_END),
            )
        return None if call is None else [call]


class LongcatReasoningParser(ThinkReasoningParser):
    """``<longcat_think>…</longcat_think>``."""

    open_marker = "<longcat_think>"
    close_marker = "</longcat_think>"

    __slots__ = ()
