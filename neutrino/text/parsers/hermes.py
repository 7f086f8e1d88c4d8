"""``hermes``: ``<tool_call>{json}</tool_call>`` blocks (Hermes 2 Pro / 3, Qwen2.5, Qwen3).

Format (Qwen2.5 / Qwen3 chat templates, NousResearch Hermes-Function-Calling; vLLM's
``hermes`` tool parser reads the same)::

    Let me check.
    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>
    <tool_call>
    {"name": "get_time", "arguments": {}}
    </tool_call>

Each block holds one JSON object with ``name`` and ``arguments`` (``parameters`` is accepted
too; arguments given as a JSON string are decoded). Text before the first call is content
(a whitespace-only run just before a call is dropped); text after a call, and between calls,
is dropped (the README's rule, as vLLM's and SGLang's non-streamed parsers answer). A block
that is not such an object is content verbatim, markers included (after a call: dropped). A
block still open at the end of the stream is parsed as if closed, as vLLM's ``hermes`` parser
reads it (a held-back start of ``</tool_call>`` is not part of its body); if it does not parse,
it is no call and its text is content, verbatim (before a call; after one, dropped).
"""

from __future__ import annotations

from typing import Final

from neutrino.text.parsers.base import Call, call_from_object, load_object
from neutrino.text.parsers.blocks import BlockToolParser

__all__ = ["HermesToolParser"]

OPEN: Final = "<tool_call>"
CLOSE: Final = "</tool_call>"


class HermesToolParser(BlockToolParser):
    """``<tool_call>`` JSON blocks (see the module docstring)."""

    block_open = OPEN
    block_close = CLOSE
    quoting = "json"

    __slots__ = ()

    def _parse_block(self, body: str) -> list[Call] | None:
        call = call_from_object(load_object(body))
        return None if call is None else [call]
