"""Qwen3-Coder's XML tool calls: values typed by the tool schema, and when calls are emitted.

The shared cases (``cases.py``, ``qwen3_coder``) cover parsing and streaming; these check what
equality of parsed JSON cannot see (``2`` vs ``2.0``, ``True`` vs ``"true"``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from neutrino.text.parsers import parse_tools, tool_parser
from neutrino.text.parsers.qwen3_coder import convert_value, parameter_schemas
from tests.unit.parsers.cases import QWEN3_CODER_TOOLS


@pytest.mark.parametrize(
    ("value", "schema", "expected"),
    [
        ("Paris", {"type": "string"}, "Paris"),
        ("  42 ", {"type": "string"}, "  42 "),
        ("42", None, "42"),  # not in the schema
        ("42", {"description": "no type"}, "42"),
        ("42", {"type": "integer"}, 42),
        (" -7\n", {"type": "int64"}, -7),
        ("4.0", {"type": "integer"}, "4.0"),
        ("9" * 5000, {"type": "integer"}, "9" * 5000),  # more digits than int() takes
        ("2", {"type": "number"}, 2),
        ("2.0", {"type": "number"}, 2.0),
        ("1e3", {"type": "float"}, 1000.0),
        ("-.5", {"type": "number"}, -0.5),
        ("nan", {"type": "number"}, "nan"),
        ("1e999", {"type": "number"}, "1e999"),
        ("TRUE", {"type": "boolean"}, True),
        ("false", {"type": "bool"}, False),
        ("yes", {"type": "boolean"}, "yes"),
        ("NULL", {"type": "string"}, None),
        ("null", {"type": "integer"}, None),
        ("5", {"type": ["null", "integer"]}, 5),
        ("5", {"type": ["string", "null"]}, "5"),
        ('{"a": [1, 2.5]}', {"type": "object"}, {"a": [1, 2.5]}),
        ("[1, 'b', None, True]", {"type": "array"}, [1, "b", None, True]),
        ("[1e999]", {"type": "array"}, "[1e999]"),
        ("__import__('os')", {"type": "object"}, "__import__('os')"),
        ("[1, 2", {"type": "array"}, "[1, 2"),
        ("7", {"type": "SomethingElse"}, 7),
        ("5", {"anyOf": [{"type": "integer"}, {"type": "null"}]}, 5),  # Pydantic's Optional
        ("5", {"anyOf": [{"type": "null"}, {"type": "string"}]}, "5"),
        ("[1]", {"oneOf": [{"type": "array", "items": {"type": "integer"}}]}, [1]),
        ("2.5", {"anyOf": [{"anyOf": [{"type": "number"}]}]}, 2.5),
        ("x", {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "x"),
        ("5", {"type": "integer", "nullable": True}, 5),
    ],
)
def test_convert_value(value: str, schema: Any, expected: Any) -> None:
    got = convert_value(value, schema)
    assert got == expected
    assert type(got) is type(expected)


def test_parameter_schemas() -> None:
    schemas = parameter_schemas(
        [
            *QWEN3_CODER_TOOLS,
            {"type": "function", "function": {"name": "bare"}},
            {"type": "function", "function": {"parameters": {}}},
        ]
    )
    assert set(schemas) == {"get_weather", "run", "bare"}
    assert schemas["run"] == {"code": {"type": "string"}}
    assert schemas["bare"] == {}
    assert parameter_schemas(None) == {}


def test_arguments_keep_their_json_types() -> None:
    text = (
        "<tool_call>\n<function=get_weather>\n<parameter=days>\n2\n</parameter>\n"
        "<parameter=scale>\n2.0\n</parameter>\n<parameter=city>\n2\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    content, calls = parse_tools("qwen3_coder", text, QWEN3_CODER_TOOLS)
    assert content == ""
    assert calls[0].arguments == '{"days": 2, "scale": 2.0, "city": "2"}'
    _, untyped = parse_tools("qwen3_xml", text, None)
    assert json.loads(untyped[0].arguments) == {"days": "2", "scale": "2.0", "city": "2"}


def test_call_is_emitted_when_its_block_closes() -> None:
    parser = tool_parser("qwen3_coder")(tools=QWEN3_CODER_TOOLS)
    first = parser.feed("Checking.\n<tool_call>\n<function=run>\n<parameter=code>\nls\n")
    assert first.content == "Checking.\n" and not first.tool_calls
    assert parser.feed("</parameter>\n</function>\n").tool_calls == []
    closed = parser.feed("</tool_call>")
    assert [(c.index, c.id, c.name, c.arguments) for c in closed.tool_calls] == [
        (0, "call_0", "run", '{"code": "ls"}')
    ]
    assert parser.finish().content == ""


def test_marker_prefix_is_held_back() -> None:
    parser = tool_parser("qwen3_coder")(tools=None)
    assert parser.feed("a <tool_c").content == "a "
    assert parser.feed("ar").content == "<tool_car"
    assert parser.finish().content == ""
