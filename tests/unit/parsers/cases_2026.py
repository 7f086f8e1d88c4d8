"""Raw outputs of the formats added for 2026's model families, with the parse each must
give (the streaming and API tests run them as they run ``cases.py``'s)."""

from __future__ import annotations

from neutrino.text.parsers import minimax_m2 as mm
from tests.unit.parsers.support import Case

MM_MARKERS = (mm.BLOCK_OPEN, mm.BLOCK_CLOSE, mm.INVOKE, mm.INVOKE_END, mm.PARAMETER,
              mm.PARAMETER_END)  # fmt: skip
_PROPERTIES = {
    "city": {"type": "string"},
    "days": {"type": "integer"},
    "scale": {"type": "number"},
    "strict": {"type": "boolean"},
    "tags": {"type": "array"},
    "filter": {"type": "object"},
    "limit": {"type": ["integer", "null"]},
}
TYPED_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": _PROPERTIES},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}},
        },
    },
]


def _mm_invoke(name: str, *params: tuple[str, str]) -> str:
    """One call as MiniMax M2's chat template renders it."""
    body = "".join(f'<parameter name="{k}">{v}</parameter>\n' for k, v in params)
    return f'<invoke name="{name}">\n{body}</invoke>\n'


def _mm(*invokes: str) -> str:
    return f"{mm.BLOCK_OPEN}\n{''.join(invokes)}{mm.BLOCK_CLOSE}"


def _tool(id: str, text: str, content: str, calls: list[tuple[str, dict[str, object]]],
          **kw: object) -> Case:  # fmt: skip
    kw.setdefault("markers", MM_MARKERS)
    kw.setdefault("tools", TYPED_TOOLS)
    return Case(id, "tool", "minimax_m2", text, content, calls=calls, **kw)  # type: ignore[arg-type]


MINIMAX_M2 = [
    _tool(
        "typed-by-schema",
        "Let me look it up.\n"
        + _mm(
            _mm_invoke(
                "get_weather",
                ("city", "Zürich"),
                ("days", "3"),
                ("scale", "1.5"),
                ("strict", "true"),
                ("tags", '["a", 1]'),
                ("filter", '{"k": [null]}'),
                ("limit", "null"),
            )
        ),
        "Let me look it up.\n",
        [
            (
                "get_weather",
                {
                    "city": "Zürich",
                    "days": 3,
                    "scale": 1.5,
                    "strict": True,
                    "tags": ["a", 1],
                    "filter": {"k": [None]},
                    "limit": None,
                },
            )
        ],
        reference="MiniMax-M2 docs/tool_calling_guide.md",
    ),
    _tool(
        "parallel-in-one-block",
        _mm(
            _mm_invoke("get_weather", ("city", "Rome")), _mm_invoke("get_weather", ("city", "Oslo"))
        ),
        "",
        [("get_weather", {"city": "Rome"}), ("get_weather", {"city": "Oslo"})],
    ),
    _tool(
        "untyped-and-spaced",
        _mm("<invoke name=' now '>\n<parameter name=\"tz\">\n  UTC+1\n</parameter>\n</invoke>\n"),
        "",
        [("now", {"tz": "UTC+1"})],
        tools=None,
    ),
    _tool(
        "code-with-tags-inside",
        _mm(_mm_invoke("run", ("code", "if a < b:\n    print('<invoke name=x>')"))),
        "",
        [("run", {"code": "if a < b:\n    print('<invoke name=x>')"})],
    ),
    _tool(
        "text-after-is-dropped",
        "Sure.\n" + _mm(_mm_invoke("get_weather", ("city", "Paris"))) + "\nIt is sunny.",
        "Sure.\n",
        [("get_weather", {"city": "Paris"})],
    ),
    _tool(
        "a-number-that-is-not-one-stays-text",
        _mm(_mm_invoke("get_weather", ("days", "three"), ("strict", "maybe"))),
        "",
        [("get_weather", {"days": "three", "strict": "maybe"})],
    ),
    _tool(
        "no-invoke-is-content",
        "Look: " + _mm("just text\n"),
        "Look: " + _mm("just text\n"),
        [],
        wellformed=False,
    ),
    _tool(
        "an-open-invoke-is-no-call",
        _mm(_mm_invoke("get_weather", ("city", "Rome")), '<invoke name="now">\n'),
        "",
        [("get_weather", {"city": "Rome"})],
    ),
    _tool(
        "an-open-parameter-is-left-out",
        _mm('<invoke name="get_weather">\n<parameter name="city">Rome\n</invoke>\n'),
        "",
        [("get_weather", {})],
    ),
    _tool(
        "cut-off-block-is-no-call",
        "Checking.\n" + mm.BLOCK_OPEN + '\n<invoke name="get_weather">\n<parameter name="ci',
        "Checking.\n",
        [],
    ),
    _tool(
        "no-call-at-all",
        "Plain answer with <invoke> and </parameter> in it.",
        "Plain answer with <invoke> and </parameter> in it.",
        [],
        wellformed=False,
    ),
]

MINIMAX_M2_REASONING = [
    Case(
        "think-then-answer",
        "reasoning",
        "minimax_m2",
        "<think>\nThe user wants Paris.\n</think>\n\nParis.",
        "\n\nParis.",
        "\nThe user wants Paris.\n",
        markers=("<think>", "</think>"),
    ),
    Case(
        "opened-by-template",
        "reasoning",
        "minimax_m2",
        "The user wants Paris.\n</think>\n\nParis.",
        "\n\nParis.",
        "The user wants Paris.\n",
        kwargs={"starts_in_reasoning": True},
        markers=("<think>", "</think>"),
    ),
]

ALL_2026: dict[str, list[Case]] = {
    "minimax_m2": MINIMAX_M2,
    "minimax_m2-reasoning": MINIMAX_M2_REASONING,
}
