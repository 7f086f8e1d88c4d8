r"""``kimi_k2``: Kimi K2 tool calls.

Source: Moonshot's "Tool Calling" guide (``MoonshotAI/Kimi-K2`` ``docs/tool_call_guidance.md``,
section "Manually Parsing Tool Calls"); vLLM's ``kimi_k2`` parser reads the same::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0
    <|tool_call_argument_begin|>{"city": "Beijing"}<|tool_call_end|><|tool_calls_section_end|>

(whitespace between the markers is allowed and ignored).

Calls are wrapped by ``<|tool_call_begin|>``/``<|tool_call_end|>`` inside the section; the tool
id ``functions.{name}:{idx}`` and the JSON arguments are separated by
``<|tool_call_argument_begin|>``. The name is the id without the ``functions.`` prefix and the
``:idx`` suffix. The singular spelling ``<|tool_call_section_begin|>``/``…_end|>`` is accepted
too. See :mod:`neutrino.text.parsers.sectioned` for the handling of text and malformed calls.

Ids, as vLLM's ``kimi_k2`` parser and SGLang's ``KimiK2Detector`` read them (both match the id
against ``[\w.]+:\d+``):

* a call whose id lacks the ``:{idx}`` suffix (``functions.get_weather.0``) is dropped, streamed
  or not; the other calls of the section are kept. Neutrino also accepts ``-`` in the name
  (OpenAI's function names may hold one, and both references would drop such a call).
* the call's id in the answer is the model's own (``functions.get_weather:0``), as vLLM
  returns it: Kimi K2's chat template writes an assistant turn's calls back with their ids, and
  the model was trained on ids of that form.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from neutrino.text.parsers.base import CallIds, load_object
from neutrino.text.parsers.sectioned import SectionedToolParser
from neutrino.text.parsers.think import ThinkReasoningParser

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
# functions.NAME:IDX (the prefix optional). NAME is all between them, dots included (vLLM
# keeps its last dotted segment, SGLang its first: they agree on names without a dot).
_ID = re.compile(r"(?:functions\.)?([\w.\-]+):\d+")


class KimiK2ToolParser(SectionedToolParser):
    """Kimi K2 tool calls (see the module docstring)."""

    section_begins = (SECTION_BEGIN, "<|tool_call_section_begin|>")
    section_ends = (SECTION_END, "<|tool_call_section_end|>")
    call_begin = CALL_BEGIN
    call_end = CALL_END

    __slots__ = ("_ids",)

    def __init__(
        self, *, tools: Sequence[Mapping[str, object]] | None = None, id_prefix: CallIds = "call_"
    ) -> None:
        # The model's own ids, in call order (``id_prefix`` is not used: see the docstring).
        self._ids: list[str] = []
        super().__init__(tools=tools, id_prefix=self._ids.__getitem__)

    def _rejects(self, body: str) -> bool:
        ident, sep, _ = body.partition(ARG_BEGIN)
        return bool(sep) and _ID.fullmatch(ident.strip()) is None

    def _parse_call(self, body: str) -> tuple[str, dict[str, object]] | None:
        ident, sep, args_text = body.partition(ARG_BEGIN)
        if not sep:
            return None
        ident = ident.strip()
        m = _ID.fullmatch(ident)
        args = load_object(args_text)
        if m is None or args is None:
            return None
        self._ids.append(ident)
        return m.group(1), args


class KimiK2ReasoningParser(ThinkReasoningParser):
    """Kimi K2 Thinking's and K2.5's reasoning: ``<think>…</think>``, also ended by the
    tool-call section (the model may go from its reasoning straight into its calls, as
    vLLM's ``kimi_k2`` reasoning parser reads it); the section is content, for the tool
    parser."""

    ends_with = (SECTION_BEGIN, "<|tool_call_section_begin|>")

    __slots__ = ()
