"""``deepseek_v3``: DeepSeek-V3 / R1 / V3.1 tool calls (both call syntaxes, detected per call).

The markers are written below with ``|`` and ``_`` for readability; the real ones use
FULLWIDTH VERTICAL LINE (U+FF5C) and LOWER ONE EIGHTH BLOCK (U+2581), e.g.
``<\uff5ctool\u2581calls\u2581begin\uff5c>``, as in the ``added_tokens`` of the DeepSeek-V3
tokenizer (checked against DeepSeek-V3's published ``tokenizer.json``).

DeepSeek-V3 / R1 (V3 chat template; vLLM ``deepseek_v3`` parser)::

    <|tool_calls_begin|><|tool_call_begin|>function<|tool_sep|>get_weather
    ```json
    {"city": "Paris"}
    ```<|tool_call_end|>
    <|tool_call_begin|>function<|tool_sep|>…<|tool_call_end|><|tool_calls_end|>

DeepSeek-V3.1 (V3.1 chat template: "<|tool_calls_begin|><|tool_call_begin|>tool_call_name
<|tool_sep|>tool_call_arguments<|tool_call_end|>…"; vLLM ``deepseek_v31``, SGLang PR 9446)::

    <|tool_calls_begin|><|tool_call_begin|>get_weather<|tool_sep|>{"city": "Paris"}
    <|tool_call_end|><|tool_calls_end|>

(without the line break). A call whose text after the separator starts with ``{`` is read as
V3.1 (the name is before the separator); otherwise as V3 (the name is the first line after the
separator, followed by the JSON arguments, optionally fenced in a ```` ```json ```` block). See
:mod:`neutrino.text.parsers.sectioned` for the handling of text and malformed calls.
"""

from __future__ import annotations

from typing import Final

from neutrino.text.parsers.base import load_object
from neutrino.text.parsers.sectioned import SectionedToolParser

__all__ = ["CALLS_BEGIN", "CALLS_END", "CALL_BEGIN", "CALL_END", "SEP", "DeepSeekV3ToolParser"]

_BAR: Final = "\uff5c"  # FULLWIDTH VERTICAL LINE
_SP: Final = "\u2581"  # LOWER ONE EIGHTH BLOCK


def _token(*words: str) -> str:
    return f"<{_BAR}{_SP.join(words)}{_BAR}>"


CALLS_BEGIN: Final = _token("tool", "calls", "begin")
CALLS_END: Final = _token("tool", "calls", "end")
CALL_BEGIN: Final = _token("tool", "call", "begin")
CALL_END: Final = _token("tool", "call", "end")
SEP: Final = _token("tool", "sep")


def _unfence(text: str) -> str:
    text = text.strip()
    if text.startswith("```"):
        text = text[3:]
        if text.startswith("json"):
            text = text[4:]
        if text.endswith("```"):
            text = text[:-3]
    return text


class DeepSeekV3ToolParser(SectionedToolParser):
    """DeepSeek V3/R1 and V3.1 tool calls (see the module docstring)."""

    section_begins = (CALLS_BEGIN,)
    section_ends = (CALLS_END,)
    call_begin = CALL_BEGIN
    call_end = CALL_END

    __slots__ = ()

    def _parse_call(self, body: str) -> tuple[str, dict[str, object]] | None:
        head, sep, rest = body.partition(SEP)
        if not sep:
            return None
        if rest.lstrip().startswith("{"):  # V3.1: NAME<sep>{…}
            name, args_text = head.strip(), rest
        else:  # V3: function<sep>NAME\n```json\n{…}\n```
            first, _, args_text = rest.partition("\n")
            name, args_text = first.strip(), _unfence(args_text)
        if not name:
            return None
        args = load_object(args_text)
        return None if args is None else (name, args)
