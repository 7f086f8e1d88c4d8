"""``hunyuan_a13b``: Tencent Hunyuan-A13B's tool calls and its think/answer reasoning.

Format (vLLM's ``hunyuan_a13b`` parsers and the model's tool template)::

    <think>
    The user wants the weather.
    </think>
    <answer>
    <tool_calls>[{"name": "get_weather", "arguments": {"city": "Boston"}}]</tool_calls>
    </answer>

Calls: one ``<tool_calls>`` block holding a JSON array of ``{"name", "arguments"}`` objects
(``llama_nemotron_json``'s rules with these markers: text before is content, text after a
call dropped, a block open at the end read as if closed). Reasoning: Granite 3.3's rules
with ``<answer>`` as the wrapper: the ``<think>`` block is the reasoning, the answer's
wrapper is taken off the content (text is kept verbatim, the newlines inside the markers
too). The "assistant:" prefix (in Chinese) that the tool template asks plain replies to
start with stays in the content.
"""

from __future__ import annotations

from typing import Final

from neutrino.text.parsers.base import Call, load_call_list
from neutrino.text.parsers.blocks import BlockToolParser
from neutrino.text.parsers.granite import GraniteReasoningParser
from neutrino.text.parsers.think import ThinkReasoningParser

__all__ = ["BLOCK_CLOSE", "BLOCK_OPEN", "HunyuanReasoningParser", "HunyuanToolParser"]

BLOCK_OPEN: Final = "<tool_calls>"
BLOCK_CLOSE: Final = "</tool_calls>"


class HunyuanToolParser(BlockToolParser):
    """``<tool_calls>[…]</tool_calls>`` (see the module docstring)."""

    block_open = BLOCK_OPEN
    block_close = BLOCK_CLOSE

    __slots__ = ()

    def _parse_block(self, body: str) -> list[Call] | None:
        return load_call_list(body)


class HunyuanReasoningParser(GraniteReasoningParser):
    """``<think>…</think><answer>…</answer>``."""

    response_open = "<answer>"
    response_close = "</answer>"
    think = ThinkReasoningParser  # not Granite 3.2's plain-text separators

    __slots__ = ()
