"""``kimi_k2``: Kimi K2 tool calls.

Source: Moonshot's "Tool Calling" guide (``MoonshotAI/Kimi-K2`` ``docs/tool_call_guidance.md``,
section "Manually Parsing Tool Calls"); vLLM's ``kimi_k2`` parser reads the same::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0
    <|tool_call_argument_begin|>{"city": "Beijing"}<|tool_call_end|><|tool_calls_section_end|>

(whitespace between the markers is allowed and ignored).

Calls are wrapped by ``<|tool_call_begin|>``/``<|tool_call_end|>`` inside the section; the tool
id ``functions.{name}:{idx}`` and the JSON arguments are separated by
``<|tool_call_argument_begin|>``. The name is the id without the ``functions.`` prefix and the
``:idx`` suffix (the model's own id is not used: ids are ``{id_prefix}{index}``). The singular
spelling ``<|tool_call_section_begin|>``/``…_end|>`` is accepted too. See
:mod:`neutrino.text.parsers.sectioned` for the handling of text and malformed calls.
"""

from __future__ import annotations

from typing import Any, Final

from neutrino.text.parsers.base import load_object
from neutrino.text.parsers.sectioned import SectionedToolParser

__all__ = [
    "ARG_BEGIN",
    "CALL_BEGIN",
    "CALL_END",
    "SECTION_BEGIN",
    "SECTION_END",
    "KimiK2ToolParser",
]

SECTION_BEGIN: Final = "<|tool_calls_section_begin|>"
SECTION_END: Final = "<|tool_calls_section_end|>"
CALL_BEGIN: Final = "<|tool_call_begin|>"
CALL_END: Final = "<|tool_call_end|>"
ARG_BEGIN: Final = "<|tool_call_argument_begin|>"


class KimiK2ToolParser(SectionedToolParser):
    """Kimi K2 tool calls (see the module docstring)."""

    section_begins = (SECTION_BEGIN, "<|tool_call_section_begin|>")
    section_ends = (SECTION_END, "<|tool_call_section_end|>")
    call_begin = CALL_BEGIN
    call_end = CALL_END

    __slots__ = ()

    def _parse_call(self, body: str) -> tuple[str, dict[str, Any]] | None:
        ident, sep, args_text = body.partition(ARG_BEGIN)
        if not sep:
            return None
        name = ident.strip()
        base, colon, idx = name.rpartition(":")
        if colon and idx.isdigit():
            name = base
        name = name.removeprefix("functions.")
        if not name:
            return None
        args = load_object(args_text)
        return None if args is None else (name, args)
