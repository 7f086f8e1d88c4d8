"""``cohere_command3`` / ``cohere_command4``: Cohere Command A's actions and thinking.

Format (Cohere's Command A templates; vLLM's and SGLang's ``cohere_command`` parsers)::

    <|START_THINKING|>I need the weather.<|END_THINKING|><|START_ACTION|>[
        {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}}
    ]<|END_ACTION|>

    <|START_THINKING|>Easy.<|END_THINKING|><|START_RESPONSE|>Hello!<|END_RESPONSE|>

Calls: one ``<|START_ACTION|>`` block holding a JSON array of ``{"tool_name",
"parameters"}`` objects (``tool_call_id`` is the model's own counter and is not kept;
missing parameters mean ``{}``); ``llama_nemotron_json``'s rules with these markers. An
element that is not such an object makes the block content. Reasoning: Granite 3.3's rules
with ``<|START_THINKING|>`` … ``<|END_THINKING|>`` as the think block and the text's wrapper
taken off: ``<|START_RESPONSE|>`` … ``<|END_RESPONSE|>`` for ``cohere_command3`` (Command R7B
and Command A), ``<|START_TEXT|>`` … ``<|END_TEXT|>`` for ``cohere_command4`` (the 2026
Command A templates, which open the thinking block in the prompt).
"""

from __future__ import annotations

from typing import Final

from neutrino.text.parsers.base import Call, call_from_object, load_json
from neutrino.text.parsers.blocks import BlockToolParser
from neutrino.text.parsers.granite import GraniteReasoningParser
from neutrino.text.parsers.think import ThinkReasoningParser

__all__ = [
    "ACTION_CLOSE",
    "ACTION_OPEN",
    "CohereCommand3ReasoningParser",
    "CohereCommand4ReasoningParser",
    "CohereToolParser",
    "parse_actions",
]

ACTION_OPEN: Final = "<|START_ACTION|>"
ACTION_CLOSE: Final = "<|END_ACTION|>"


def parse_actions(body: str) -> list[Call] | None:
    """The calls of an action block's JSON array, or ``None`` if it is not one."""
    ok, value = load_json(body)
    if not ok or not isinstance(value, list):
        return None
    calls: list[Call] = []
    for item in value:
        if not isinstance(item, dict):
            return None
        as_call = {"name": item.get("tool_name"), "arguments": item.get("parameters", {})}
        call = call_from_object(as_call)
        if call is None:
            return None
        calls.append(call)
    return calls


class CohereToolParser(BlockToolParser):
    """``<|START_ACTION|>[…]<|END_ACTION|>`` (see the module docstring)."""

    block_open = ACTION_OPEN
    block_close = ACTION_CLOSE

    __slots__ = ()

    def _parse_block(self, body: str) -> list[Call] | None:
        return parse_actions(body)


class _CohereThinking(ThinkReasoningParser):
    open_marker = "<|START_THINKING|>"
    close_marker = "<|END_THINKING|>"

    __slots__ = ()


class CohereCommand3ReasoningParser(GraniteReasoningParser):
    """Thinking, then the text in ``<|START_RESPONSE|>``."""

    response_open = "<|START_RESPONSE|>"
    response_close = "<|END_RESPONSE|>"
    think = _CohereThinking

    __slots__ = ()


class CohereCommand4ReasoningParser(GraniteReasoningParser):
    """Thinking, then the text in ``<|START_TEXT|>``."""

    response_open = "<|START_TEXT|>"
    response_close = "<|END_TEXT|>"
    think = _CohereThinking

    __slots__ = ()
