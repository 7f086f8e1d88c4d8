"""``glm45``: GLM-4.5's ``<tool_call>`` blocks with ``<arg_key>``/``<arg_value>`` pairs
(alias ``glm4_moe``, vLLM's module name).

Format (GLM-4.5's published chat template, which asks for it and renders past calls this way;
vLLM's ``glm45`` tool parser and SGLang's ``glm45`` detector read the same)::

    Let me check.
    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Zürich</arg_value>
    <arg_key>days</arg_key>
    <arg_value>3</arg_value>
    </tool_call>
    <tool_call>now
    </tool_call>

The function name comes first, up to the end of its line or the first ``<arg_key>`` (GLM-4.7
writes no newline there); then key/value pairs, with only whitespace around them. Keys and
values are stripped of surrounding whitespace, as vLLM and SGLang do. A value stays the raw
text when the request's tool schema gives that parameter ``"type": "string"`` (the template
writes strings unquoted); any other value is read as JSON (the template writes non-strings
with ``tojson``), else as a Python literal (``True``, ``['a']``; never evaluated), else it
stays the text, as in vLLM and SGLang. Without tools every value is read that way.

Text before the first call is content; text after a call is dropped (the README's rule);
whitespace-only runs before calls are dropped. A block that is not a name followed by pairs (a
name with spaces in it, text between the pairs, a pair left unclosed, JSON) is content
verbatim, markers included. A block still open at the end of the stream is no call (vLLM's
``glm4_moe`` parser and SGLang's detector both need the closing tag), and content as such.
Calls are found as the ``hermes`` parser finds its ``<tool_call>`` blocks; only the body is
read differently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from neutrino.text.parsers.arguments import Schemas, python_literal
from neutrino.text.parsers.base import Call, _finite, load_json
from neutrino.text.parsers.blocks import BlockToolParser
from neutrino.text.parsers.hermes import CLOSE, OPEN

__all__ = [
    "ARG_KEY",
    "ARG_KEY_END",
    "ARG_VALUE",
    "ARG_VALUE_END",
    "CLOSE",
    "OPEN",
    "Glm45ToolParser",
    "parse_call",
    "string_parameters",
]

ARG_KEY: Final = "<arg_key>"
ARG_KEY_END: Final = "</arg_key>"
ARG_VALUE: Final = "<arg_value>"
ARG_VALUE_END: Final = "</arg_value>"

_SPACE: Final = re.compile(r"\s*")
_NAME: Final = re.compile(r"[^\s<>]+")

# Parameters whose schema type is "string", by function name.
StringParameters = Mapping[str, frozenset[str]]


class Glm45ToolParser(BlockToolParser):
    """GLM-4.5 ``<tool_call>`` blocks (see the module docstring)."""

    block_open = OPEN
    block_close = CLOSE
    # vLLM's glm4_moe parser and SGLang's glm4_moe detector find calls only as
    # <tool_call>…</tool_call> (their regexes need the closing tag): an unclosed one is none.
    unclosed_calls = False

    __slots__ = ()

    def _parse_block(self, body: str) -> list[Call] | None:
        call = parse_call(body, string_parameters(self.schemas))
        return None if call is None else [call]


def string_parameters(schemas: Schemas) -> dict[str, frozenset[str]]:
    """``{function name: names of its parameters typed "string"}`` of the offered tools'
    parameter ``schemas``."""
    return {
        name: frozenset(
            key
            for key, schema in props.items()
            if isinstance(schema, Mapping) and schema.get("type") == "string"
        )
        for name, props in schemas.items()
    }


def parse_call(
    body: str,
    strings: StringParameters,
    keys: tuple[str, str] = (ARG_KEY, ARG_KEY_END),
    values: tuple[str, str] = (ARG_VALUE, ARG_VALUE_END),
) -> Call | None:
    """``(name, arguments)`` of the text inside one ``<tool_call>`` block, or ``None``
    (``keys`` and ``values``: the pairs' markers, as another family spells them)."""
    first = body.find(keys[0])
    head = body if first == -1 else body[:first]
    name = head.strip()
    if not _NAME.fullmatch(name):
        return None
    typed_as_string = strings.get(name, frozenset())
    arguments: dict[str, object] = {}
    pos = _skip(body, len(head))
    while pos < len(body):
        key, pos = _element(body, pos, *keys)
        if key is None:
            return None
        value, pos = _element(body, _skip(body, pos), *values)
        if value is None or not key:
            return None
        arguments[key] = value if key in typed_as_string else _typed(value)
        pos = _skip(body, pos)
    return name, arguments


def _skip(text: str, pos: int) -> int:
    m = _SPACE.match(text, pos)
    return pos if m is None else m.end()


def _element(text: str, pos: int, start: str, end: str) -> tuple[str | None, int]:
    """The stripped text of ``start…end`` at ``pos`` and the index after it, or ``None``."""
    if not text.startswith(start, pos):
        return None, pos
    stop = text.find(end, pos + len(start))
    if stop == -1:
        return None, pos
    return text[pos + len(start) : stop].strip(), stop + len(end)


def _typed(value: str) -> object:
    """A non-string value: JSON, else a Python literal, else the text itself."""
    ok, parsed = load_json(value)
    if ok and _finite(parsed):
        return parsed
    return python_literal(value, value)
