"""``step3``: StepFun Step 3's tool calls.

Format (vLLM's and SGLang's ``step3`` parsers; the bars are U+FF5C, FULLWIDTH VERTICAL
LINE, written ``|`` here, and the underscores are ASCII)::

    I'll check.<|tool_calls_begin|><|tool_call_begin|>function<|tool_sep|><steptml:invoke
    name="get_weather"><steptml:parameter name="city">Paris</steptml:parameter>
    </steptml:invoke><|tool_call_end|><|tool_calls_end|>

A section of calls, each ``<|tool_call_begin|>`` … ``<|tool_call_end|>``: its type
(``function``), the separator, then one ``<steptml:invoke>`` whose parameters are read as
``minimax_m2`` reads its own (whole elements, spaces around a value stripped, typed by the
request's tool schema; a value may hold ``<``). A call of another type, or without an
invoke, is content verbatim; see :mod:`neutrino.text.parsers.sectioned` for text around
calls and a call left open at the end of the stream. The reasoning is ``think``'s (the
template opens ``<think>``; the model ends it with ``</think>``).
"""

from __future__ import annotations

from typing import Final

from neutrino.text.parsers.base import Call
from neutrino.text.parsers.minimax_m2 import invokes
from neutrino.text.parsers.sectioned import SectionedToolParser

__all__ = [
    "CALLS_BEGIN",
    "CALLS_END",
    "CALL_BEGIN",
    "CALL_END",
    "INVOKE",
    "INVOKE_END",
    "PARAMETER",
    "PARAMETER_END",
    "SEP",
    "Step3ToolParser",
]

_BAR: Final = "\uff5c"  # FULLWIDTH VERTICAL LINE
CALLS_BEGIN: Final = f"<{_BAR}tool_calls_begin{_BAR}>"
CALLS_END: Final = f"<{_BAR}tool_calls_end{_BAR}>"
CALL_BEGIN: Final = f"<{_BAR}tool_call_begin{_BAR}>"
CALL_END: Final = f"<{_BAR}tool_call_end{_BAR}>"
SEP: Final = f"<{_BAR}tool_sep{_BAR}>"
INVOKE: Final = "<steptml:invoke name="
INVOKE_END: Final = "</steptml:invoke>"
PARAMETER: Final = "<steptml:parameter name="
PARAMETER_END: Final = "</steptml:parameter>"


class Step3ToolParser(SectionedToolParser):
    """Step 3's sections of ``<steptml:invoke>`` calls (see the module docstring)."""

    section_begins = (CALLS_BEGIN,)
    section_ends = (CALLS_END,)
    call_begin = CALL_BEGIN
    call_end = CALL_END

    __slots__ = ()

    def _parse_call(self, body: str) -> Call | None:
        kind, sep, rest = body.partition(SEP)
        if not sep or kind.strip() != "function":
            return None
        calls = invokes(rest, self.schemas, (INVOKE, INVOKE_END), (PARAMETER, PARAMETER_END))
        return calls[0] if calls and len(calls) == 1 else None
