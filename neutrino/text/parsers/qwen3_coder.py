"""``qwen3_coder``: Qwen3-Coder's XML tool calls (alias ``qwen3_xml``).

Format (Qwen3-Coder's published chat template, which renders past calls this way and asks the
model to "ONLY reply in the following format"; vLLM's ``qwen3_coder`` / ``qwen3_xml`` parsers
and SGLang's ``qwen3_coder`` detector read the same)::

    I will look it up.
    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    <parameter=days>
    3
    </parameter>
    </function>
    </tool_call>

One ``<tool_call>`` block per call (a block holding several ``<function=…>`` elements gives
several calls). A parameter's value is the text between ``<parameter=NAME>`` and
``</parameter>`` without one leading and one trailing newline; a value left unclosed ends at
the next ``<parameter=``, at ``</function>`` or at the end of the block, and a function left
unclosed ends with its block. Values are typed by the request's tool schema (the parameter's
``type`` in ``function.parameters.properties``), as vLLM and SGLang do:

* ``null`` (any case) is ``None`` whatever the type;
* string types (``string``, ``str``, ``text``, ``varchar``, ``char``, ``enum``), a parameter
  the schema does not list and one whose entry has no ``type`` stay strings;
* integer types (``integer``, ``int…``, ``uint…``, ``long``, ``short``, ``unsigned``) become
  an ``int``, number types (``number``, ``num…``, ``float…``) an ``int`` when written without a
  point or exponent, else a ``float``;
* ``boolean`` / ``bool`` / ``binary``: ``true`` / ``false`` in any case;
* anything else (``object``, ``array``, ``dict…``, ``list…``, unknown types) is read as JSON,
  else as a Python literal (``['a', 'b']``; never evaluated).

A list of types (``["integer", "null"]``) uses its first type other than ``null``, and so do
the alternatives of an ``anyOf`` or ``oneOf``. A value that does not read as its type stays
the string it was (vLLM and SGLang make an unreadable boolean ``false``; here it stays the
text). Text before the first call is content (a whitespace-only
run just before a call is dropped); text after a call is dropped (the README's rule). A block
that is not a sequence of functions (JSON, a bare text, a function without a name) is content
verbatim, markers included (after a call: dropped); a block still open at the end of the
stream is parsed as if closed, as vLLM's ``qwen3_coder`` parser reads it, and if it does not
parse it is no call and its text is content (after a call: dropped). A whole
``<function=…>…</function>`` written without its ``<tool_call>`` block is a call too (as
vLLM's parser reads it; models drop the wrapper now and then); one left open at the end of
the stream is read as if closed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import ClassVar, Final

from neutrino.text.parsers.arguments import Schemas, parameter_schemas, python_literal
from neutrino.text.parsers.base import Call, load_json
from neutrino.text.parsers.blocks import BlockToolParser
from neutrino.text.parsers.hermes import CLOSE, OPEN

__all__ = [
    "CLOSE",
    "FUNCTION",
    "FUNCTION_END",
    "OPEN",
    "PARAMETER",
    "PARAMETER_END",
    "Qwen3CoderToolParser",
    "parameter_schemas",
    "parse_block",
]

FUNCTION: Final = "<function="
FUNCTION_END: Final = "</function>"
PARAMETER: Final = "<parameter="
PARAMETER_END: Final = "</parameter>"

_STRING_TYPES: Final = frozenset({"string", "str", "text", "varchar", "char", "enum"})
_INT_PREFIXES: Final = ("int", "uint", "long", "short", "unsigned")
_NUMBER_PREFIXES: Final = ("num", "float")
_BOOL_TYPES: Final = frozenset({"boolean", "bool", "binary"})
_INT: Final = re.compile(r"[+-]?\d+")
_NUMBER: Final = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")

# Parameter schemas by function name: {name: {parameter: schema}}.


class Qwen3CoderToolParser(BlockToolParser):
    """Qwen3-Coder ``<tool_call><function=…>`` blocks (see the module docstring).

    The blocks are found as the ``hermes`` parser finds its ``<tool_call>`` blocks; only the
    body is read differently.
    """

    block_open = OPEN
    block_close = CLOSE
    quoting = (PARAMETER, (PARAMETER_END, FUNCTION_END))
    # A call written without its <tool_call> block.
    bare: ClassVar[tuple[str, str] | None] = (FUNCTION, FUNCTION_END)

    __slots__ = ()

    def _parse_block(self, body: str) -> list[Call] | None:
        return parse_block(body, self.schemas)


def parse_block(body: str, schemas: Schemas) -> list[Call] | None:
    """The calls in the text of one ``<tool_call>`` block, or ``None`` if it holds none or
    anything but functions and whitespace."""
    calls: list[Call] = []
    pos, n = 0, len(body)
    while True:
        pos = _skip_space(body, pos)
        if pos == n:
            return calls or None
        name, start = _tag(body, pos, FUNCTION)
        if name is None:
            return None
        end = body.find(FUNCTION_END, start)
        stop = n if end == -1 else end
        arguments = _parameters(body, start, stop, schemas.get(name, {}))
        if arguments is None:
            return None
        calls.append((name, arguments))
        pos = n if end == -1 else end + len(FUNCTION_END)


def _parameters(
    text: str, pos: int, stop: int, schema: Mapping[str, object]
) -> dict[str, object] | None:
    """The parameters in ``text[pos:stop]`` (a function's body), converted by ``schema``."""
    arguments: dict[str, object] = {}
    close = -2  # the next </parameter> at or after the cursor; -1: none left (searched once)
    while True:
        pos = _skip_space(text, pos, stop)
        if pos == stop:
            return arguments
        name, start = _tag(text, pos, PARAMETER, stop)
        if name is None:
            return None
        if close != -1 and close < start:
            close = text.find(PARAMETER_END, start, stop)
        following = text.find(PARAMETER, start, stop)
        if close != -1 and (following == -1 or close < following):
            end, pos = close, close + len(PARAMETER_END)
        else:
            end = pos = stop if following == -1 else following
        value = text[start:end].removeprefix("\n").removesuffix("\n")
        arguments[name] = convert_value(value, schema.get(name))


def _skip_space(text: str, pos: int, stop: int | None = None) -> int:
    stop = len(text) if stop is None else stop
    while pos < stop and text[pos].isspace():
        pos += 1
    return pos


def _tag(text: str, pos: int, prefix: str, stop: int | None = None) -> tuple[str | None, int]:
    """``(NAME, index after '>')`` for ``<prefixNAME>`` at ``pos``, else ``(None, pos)``."""
    stop = len(text) if stop is None else stop
    if not text.startswith(prefix, pos, stop):
        return None, pos
    start = pos + len(prefix)
    gt = text.find(">", start, stop)
    if gt == -1:
        return None, pos
    name = text[start:gt].strip()
    if not name or "<" in name or "\n" in name:
        return None, pos
    return name, gt + 1


def convert_value(value: str, schema: object) -> object:
    """``value`` typed by its parameter's JSON schema (see the module docstring)."""
    if value.strip().lower() == "null":
        return None
    kind = _schema_type(schema)
    if kind is None or kind in _STRING_TYPES:
        return value
    text = value.strip()
    if kind.startswith(_INT_PREFIXES):
        return _int(text, value) if _INT.fullmatch(text) else value
    if kind.startswith(_NUMBER_PREFIXES):
        if not _NUMBER.fullmatch(text):
            return value
        if not any(c in text for c in ".eE"):
            return _int(text, value)
        number = float(text)
        return number if number - number == 0 else value  # inf from a huge exponent
    if kind in _BOOL_TYPES:
        lowered = text.lower()
        return lowered == "true" if lowered in ("true", "false") else value
    ok, parsed = load_json(text)
    if ok and _json_safe(parsed):
        return parsed
    return python_literal(text, value)


def _int(text: str, value: str) -> int | str:
    try:
        return int(text)
    except ValueError:  # more digits than Python converts
        return value


def _schema_type(schema: object, depth: int = 0) -> str | None:
    """The lower-cased ``type`` of a parameter schema: the first non-null one of a list, or
    of the alternatives of an ``anyOf`` / ``oneOf`` (``{"anyOf": [{"type": "integer"},
    {"type": "null"}]}``, as Pydantic writes an optional field)."""
    if not isinstance(schema, Mapping) or depth > 8:
        return None
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if isinstance(k, str) and k.lower() != "null"), None)
    if isinstance(kind, str):
        return kind.strip().lower()
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            for option in options:
                found = _schema_type(option, depth + 1)
                if found is not None and found != "null":
                    return found
    return None


def _json_safe(value: object) -> bool:
    """False for a value JSON cannot hold (a float that overflowed to infinity)."""
    try:
        json.dumps(value, allow_nan=False)
    except (ValueError, RecursionError):
        return False
    return True
