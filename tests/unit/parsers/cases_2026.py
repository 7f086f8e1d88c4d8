"""Raw outputs of the formats added for 2026's model families, with the parse each must
give (the streaming and API tests run them as they run ``cases.py``'s)."""

from __future__ import annotations

from neutrino.text.parsers import dsml, step3
from neutrino.text.parsers import gemma4 as g4
from neutrino.text.parsers import kimi_k2 as kimi
from neutrino.text.parsers import minimax_m2 as mm
from tests.unit.parsers.support import TYPED_TOOLS, Case

MM_MARKERS = (mm.BLOCK_OPEN, mm.BLOCK_CLOSE, mm.INVOKE, mm.INVOKE_END, mm.PARAMETER,
              mm.PARAMETER_END)  # fmt: skip


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
    # the block's closing tag inside a parameter's value is part of the value
    _tool(
        "close-tag-in-value",
        _mm(_mm_invoke("get_weather", ("city", f"a {mm.BLOCK_CLOSE} b"))),
        "",
        [("get_weather", {"city": f"a {mm.BLOCK_CLOSE} b"})],
    ),
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
        "a-cut-off-block-is-content",
        "Checking.\n" + mm.BLOCK_OPEN + '\n<invoke name="get_weather">\n<parameter name="ci',
        "Checking.\n" + mm.BLOCK_OPEN + '\n<invoke name="get_weather">\n<parameter name="ci',
        [],
        wellformed=False,
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

DSML_MARKERS = (dsml.BLOCK_OPEN, dsml.BLOCK_CLOSE, dsml.INVOKE, dsml.INVOKE_END, dsml.PARAMETER,
                dsml.PARAMETER_END, dsml.V4_BLOCK_OPEN, dsml.V4_BLOCK_CLOSE)  # fmt: skip


def _ds_invoke(name: str, *params: tuple[str, str, bool]) -> str:
    """One call as DeepSeek V3.2's encoding renders it (``True``: string="true")."""
    body = "".join(
        f'{dsml.PARAMETER}"{k}" string="{str(is_string).lower()}">{v}{dsml.PARAMETER_END}\n'
        for k, v, is_string in params
    )
    return f'{dsml.INVOKE}"{name}">\n{body}{dsml.INVOKE_END}\n'


def _ds(*invokes: str, v4: bool = False) -> str:
    opening, closing = (dsml.V4_BLOCK_OPEN, dsml.V4_BLOCK_CLOSE) if v4 else (
        dsml.BLOCK_OPEN, dsml.BLOCK_CLOSE)  # fmt: skip
    return f"{opening}\n{''.join(invokes)}{closing}"


def _dsml(id: str, text: str, content: str, calls: list[tuple[str, dict[str, object]]],
          parser: str = "deepseek_v32", **kw: object) -> Case:  # fmt: skip
    kw.setdefault("markers", DSML_MARKERS)
    kw.setdefault("tools", TYPED_TOOLS)
    return Case(id, "tool", parser, text, content, calls=calls, **kw)  # type: ignore[arg-type]


DEEPSEEK_V32 = [
    _dsml(
        "close-tag-in-value",
        _ds(_ds_invoke("get_weather", ("city", f"a {dsml.BLOCK_CLOSE} b", True))),
        "",
        [("get_weather", {"city": f"a {dsml.BLOCK_CLOSE} b"})],
    ),
    _dsml(
        "declared-types",
        "Let me check.\n\n"
        + _ds(
            _ds_invoke(
                "get_weather",
                ("city", "Hangzhou", True),
                ("days", "3", False),
                ("tags", '["a", {"b": null}]', False),
                ("zip", "007", True),
            )
        ),
        "Let me check.\n\n",
        [
            (
                "get_weather",
                {"city": "Hangzhou", "days": 3, "tags": ["a", {"b": None}], "zip": "007"},
            )
        ],
        reference="DeepSeek-V3.2 encoding/encoding_dsv32.py",
    ),
    _dsml(
        "a-declared-string-is-kept-exactly",
        _ds(_ds_invoke("run", ("code", "\n  x = 1 < 2\n", True))),
        "",
        [("run", {"code": "\n  x = 1 < 2\n"})],
    ),
    _dsml(
        "parallel",
        _ds(_ds_invoke("get_weather", ("city", "Rome", True)), _ds_invoke("now")),
        "",
        [("get_weather", {"city": "Rome"}), ("now", {})],
    ),
    _dsml(
        "undeclared-values-follow-the-schema",
        _ds(
            f'{dsml.INVOKE}"get_weather">{dsml.PARAMETER}"days">4{dsml.PARAMETER_END}'
            f'{dsml.PARAMETER}"city">4{dsml.PARAMETER_END}{dsml.INVOKE_END}'
        ),
        "",
        [("get_weather", {"days": 4, "city": "4"})],
    ),
    _dsml(
        "json-that-is-not-stays-text",
        _ds(_ds_invoke("get_weather", ("days", "three", False))),
        "",
        [("get_weather", {"days": "three"})],
    ),
    _dsml(
        "text-after-is-dropped",
        "Sure." + _ds(_ds_invoke("now")) + " Done.",
        "Sure.",
        [("now", {})],
    ),
    _dsml(
        "no-invoke-is-content",
        "See " + _ds("nothing here\n"),
        "See " + _ds("nothing here\n"),
        [],
        wellformed=False,
    ),
    _dsml(
        "a-cut-off-block-is-content",
        "Checking.\n" + dsml.BLOCK_OPEN + "\n" + dsml.INVOKE + '"now">\n',
        "Checking.\n" + dsml.BLOCK_OPEN + "\n" + dsml.INVOKE + '"now">\n',  # content
        [],
        wellformed=False,
    ),
    _dsml(
        "v4-spelling",
        "On it.\n" + _ds(_ds_invoke("get_weather", ("city", "Oslo", True)), v4=True),
        "On it.\n",
        [("get_weather", {"city": "Oslo"})],
        parser="deepseek_v4",
    ),
    _dsml(
        "v32-leaves-v4s-block-as-text",
        _ds(_ds_invoke("now"), v4=True),
        _ds(_ds_invoke("now"), v4=True),
        [],
        wellformed=False,
    ),
]

SEED_MARKERS = ("<seed:tool_call>", "</seed:tool_call>", "<function=", "</function>",
                "<parameter=", "</parameter>")  # fmt: skip
SEED_THINK = ("<seed:think>", "</seed:think>")


def _seed(name: str, *params: tuple[str, str]) -> str:
    """One call as Seed-OSS's template asks for it (values inline)."""
    body = "".join(f"<parameter={k}>{v}</parameter>\n" for k, v in params)
    return f"<seed:tool_call>\n<function={name}>\n{body}</function>\n</seed:tool_call>"


SEED_OSS = [
    Case(
        "typed",
        "tool",
        "seed_oss",
        "Checking.\n" + _seed("get_weather", ("city", "Barcelona, Spain"), ("days", "2")),
        "Checking.\n",
        calls=[("get_weather", {"city": "Barcelona, Spain", "days": 2})],
        tools=TYPED_TOOLS,
        markers=SEED_MARKERS,
    ),
    Case(
        "multiline-value",
        "tool",
        "seed_oss",
        _seed("run", ("code", "\nx = 1\nprint(x)\n")),
        "",
        calls=[("run", {"code": "x = 1\nprint(x)"})],
        tools=TYPED_TOOLS,
        markers=SEED_MARKERS,
    ),
    Case(
        "parallel",
        "tool",
        "seed_oss",
        _seed("now") + "\n" + _seed("now"),
        "",
        calls=[("now", {}), ("now", {})],
        markers=SEED_MARKERS,
    ),
    Case(
        "qwen-block-is-text",
        "tool",
        "seed_oss",
        "<tool_call>\n<function=now>\n</function>\n</tool_call>",
        "<tool_call>\n<function=now>\n</function>\n</tool_call>",
        wellformed=False,
    ),
    Case(
        "not-functions-is-content",
        "tool",
        "seed_oss",
        '<seed:tool_call>{"name": "now"}</seed:tool_call>',
        '<seed:tool_call>{"name": "now"}</seed:tool_call>',
        wellformed=False,
    ),
]

SEED_OSS_REASONING = [
    Case(
        "think-then-call",
        "reasoning",
        "seed_oss",
        "<seed:think>Weather, so a call.</seed:think>Checking.",
        "Checking.",
        "Weather, so a call.",
        markers=SEED_THINK,
    ),
    Case(
        "plain-think-is-content",
        "reasoning",
        "seed_oss",
        "<think>x</think>y",
        "<think>x</think>y",
        markers=SEED_THINK,
    ),
    Case(
        "unclosed",
        "reasoning",
        "seed_oss",
        "<seed:think>still going <seed:thi",
        "",
        "still going <seed:thi",
        markers=SEED_THINK,
    ),
]

_KIMI_CALL = (f"{kimi.SECTION_BEGIN}{kimi.CALL_BEGIN}functions.now:0{kimi.ARG_BEGIN}{{}}"
              f"{kimi.CALL_END}{kimi.SECTION_END}")  # fmt: skip
KIMI_REASONING = [
    Case(
        "think-then-answer",
        "reasoning",
        "kimi_k2",
        "<think>r</think>answer",
        "answer",
        "r",
        markers=("<think>", "</think>"),
    ),
    Case(
        "reasoning-ended-by-the-calls",
        "reasoning",
        "kimi_k2",
        "The user wants the time." + _KIMI_CALL,
        _KIMI_CALL,
        "The user wants the time.",
        kwargs={"starts_in_reasoning": True},
        markers=("<think>", "</think>"),
    ),
    Case(
        "calls-after-the-block",
        "reasoning",
        "kimi_k2",
        "<think>r</think>" + _KIMI_CALL,
        _KIMI_CALL,
        "r",
        markers=("<think>", "</think>"),
    ),
    Case(
        "a-section-before-reasoning-is-content",
        "reasoning",
        "kimi_k2",
        "Hi " + kimi.SECTION_BEGIN + " <think>r</think>",
        "Hi " + kimi.SECTION_BEGIN + " ",
        "r",
        markers=("<think>", "</think>"),
    ),
]
GLM45_REASONING = [
    Case(
        "written-by-the-model",
        "reasoning",
        "glm45",
        "<think>Paris is the capital.</think>\nParis.",
        "\nParis.",
        "Paris is the capital.",
        markers=("<think>", "</think>"),
    ),
]

LC = ("<longcat_tool_call>", "</longcat_tool_call>", "<longcat_arg_key>", "</longcat_arg_key>",
      "<longcat_arg_value>", "</longcat_arg_value>")  # fmt: skip
LONGCAT = [
    Case(
        "json",
        "tool",
        "longcat",
        'Let me search.<longcat_tool_call>\n{"name": "search", "arguments": {"q": "cats"}}\n'
        "</longcat_tool_call>",
        "Let me search.",
        calls=[("search", {"q": "cats"})],
        markers=LC,
    ),
    Case(
        "pairs-typed",
        "tool",
        "longcat",
        "<longcat_tool_call>get_weather\n<longcat_arg_key>city</longcat_arg_key>\n"
        "<longcat_arg_value>42</longcat_arg_value>\n<longcat_arg_key>days</longcat_arg_key>\n"
        "<longcat_arg_value>3</longcat_arg_value>\n</longcat_tool_call>",
        "",
        calls=[("get_weather", {"city": "42", "days": 3})],
        tools=TYPED_TOOLS,
        markers=LC,
    ),
    Case(
        "parallel-back-to-back",
        "tool",
        "longcat",
        '<longcat_tool_call>{"name": "a", "arguments": {}}</longcat_tool_call>'
        "<longcat_tool_call>b\n</longcat_tool_call>",
        "",
        calls=[("a", {}), ("b", {})],
        markers=LC,
    ),
    Case(
        "unclosed-json-is-a-call",
        "tool",
        "longcat",
        'Ok.<longcat_tool_call>{"name": "a", "arguments": {"x": 1}}',
        "Ok.",
        calls=[("a", {"x": 1})],
        markers=LC,
    ),
    Case(
        "garbage-is-content",
        "tool",
        "longcat",
        "<longcat_tool_call>not a call at all</longcat_tool_call>",
        "<longcat_tool_call>not a call at all</longcat_tool_call>",
        wellformed=False,
    ),
]
LONGCAT_REASONING = [
    Case(
        "opened-by-template",
        "reasoning",
        "longcat",
        "Cats are mammals.\n</longcat_think>\n Yes.",
        "\n Yes.",
        "Cats are mammals.\n",
        kwargs={"starts_in_reasoning": True},
        markers=("<longcat_think>", "</longcat_think>"),
    ),
]

STEP3_MARKERS = (step3.CALLS_BEGIN, step3.CALLS_END, step3.CALL_BEGIN, step3.CALL_END,
                 step3.SEP, step3.INVOKE, step3.INVOKE_END, step3.PARAMETER,
                 step3.PARAMETER_END)  # fmt: skip


def _step3(*calls: str) -> str:
    body = "".join(f"{step3.CALL_BEGIN}function{step3.SEP}{c}{step3.CALL_END}" for c in calls)
    return f"{step3.CALLS_BEGIN}{body}{step3.CALLS_END}"


def _step_invoke(name: str, *params: tuple[str, str]) -> str:
    ps = "".join(f'{step3.PARAMETER}"{k}">{v}{step3.PARAMETER_END}' for k, v in params)
    return f'{step3.INVOKE}"{name}">{ps}{step3.INVOKE_END}'


STEP3 = [
    Case(
        "typed",
        "tool",
        "step3",
        "I'll check." + _step3(_step_invoke("get_weather", ("city", " Paris "), ("days", "2"))),
        "I'll check.",
        calls=[("get_weather", {"city": "Paris", "days": 2})],
        tools=TYPED_TOOLS,
        markers=STEP3_MARKERS,
    ),
    Case(
        "value-with-lt",
        "tool",
        "step3",
        _step3(_step_invoke("run", ("code", "a < b"))),
        "",
        calls=[("run", {"code": "a < b"})],
        tools=TYPED_TOOLS,
        markers=STEP3_MARKERS,
    ),
    Case(
        "parallel",
        "tool",
        "step3",
        _step3(_step_invoke("now"), "\n" + _step_invoke("get_weather", ("city", "Rome"))),
        "",
        calls=[("now", {}), ("get_weather", {"city": "Rome"})],
        markers=STEP3_MARKERS,
    ),
    Case(
        "another-type-is-content",
        "tool",
        "step3",
        step3.CALLS_BEGIN + step3.CALL_BEGIN + "search" + step3.SEP + "x" + step3.CALL_END,
        step3.CALL_BEGIN + "search" + step3.SEP + "x" + step3.CALL_END,
        wellformed=False,
    ),
]

HUNYUAN = [
    Case(
        "in-the-answer",
        "tool",
        "hunyuan_a13b",
        '\n<tool_calls>[{"name": "get_weather", "arguments": {"city": "Boston"}}, '
        '{"name": "now", "arguments": {}}]</tool_calls>\n',
        "",
        calls=[("get_weather", {"city": "Boston"}), ("now", {})],
        markers=("<tool_calls>", "</tool_calls>"),
    ),
    Case(
        "text-then-call",
        "tool",
        "hunyuan_a13b",
        'Checking. <tool_calls>[{"name": "now", "arguments": {}}]</tool_calls>',
        "Checking. ",
        calls=[("now", {})],
        markers=("<tool_calls>", "</tool_calls>"),
    ),
    Case(
        "not-a-list-is-content",
        "tool",
        "hunyuan_a13b",
        "<tool_calls>nope</tool_calls>",
        "<tool_calls>nope</tool_calls>",
        wellformed=False,
    ),
]
HUNYUAN_REASONING = [
    Case(
        "think-and-answer",
        "reasoning",
        "hunyuan_a13b",
        "<think>\nNeed weather.\n</think>\n<answer>\nIt is sunny.\n</answer>",
        "\nIt is sunny.\n",
        "\nNeed weather.\n",
        markers=("<think>", "</think>", "<answer>", "</answer>"),
    ),
    Case(
        "thinking-off",
        "reasoning",
        "hunyuan_a13b",
        "<answer>\nHello.\n</answer>",
        "\nHello.\n",
        "",
        markers=("<answer>", "</answer>"),
    ),
]

_ACT = ("<|START_ACTION|>", "<|END_ACTION|>")
COHERE = [
    Case(
        "parallel-actions",
        "tool",
        "cohere_command4",
        '<|START_ACTION|>[\n{"tool_call_id": "0", "tool_name": "get_weather", "parameters": '
        '{"city": "Paris"}},\n{"tool_call_id": "1", "tool_name": "now"}\n]<|END_ACTION|>',
        "",
        calls=[("get_weather", {"city": "Paris"}), ("now", {})],
        markers=_ACT,
    ),
    Case(
        "openai-keys-are-not-actions",
        "tool",
        "cohere_command3",
        '<|START_ACTION|>[{"name": "now", "arguments": {}}]<|END_ACTION|>',
        '<|START_ACTION|>[{"name": "now", "arguments": {}}]<|END_ACTION|>',
        wellformed=False,
    ),
]
_THINK_C = ("<|START_THINKING|>", "<|END_THINKING|>")
COHERE_REASONING = [
    Case(
        "thinking-then-response",
        "reasoning",
        "cohere_command3",
        "<|START_THINKING|>Easy.<|END_THINKING|><|START_RESPONSE|>Hello!<|END_RESPONSE|>",
        "Hello!",
        "Easy.",
        markers=(*_THINK_C, "<|START_RESPONSE|>", "<|END_RESPONSE|>"),
    ),
    Case(
        "opened-then-text",
        "reasoning",
        "cohere_command4",
        "Plan: greet.<|END_THINKING|><|START_TEXT|>Hi.<|END_TEXT|>",
        "Hi.",
        "Plan: greet.",
        kwargs={"starts_in_reasoning": True},
        markers=(*_THINK_C, "<|START_TEXT|>", "<|END_TEXT|>"),
    ),
    Case(
        "thinking-then-action",
        "reasoning",
        "cohere_command4",
        "<|START_THINKING|>Call it.<|END_THINKING|><|START_ACTION|>[]<|END_ACTION|>",
        "<|START_ACTION|>[]<|END_ACTION|>",
        "Call it.",
        markers=_THINK_C,
    ),
]

_FC = ("<function_calls>", "</function_calls>")
OLMO3 = [
    Case(
        "lines",
        "tool",
        "olmo3",
        "I'll look.<function_calls>get_weather(city=\"Paris\", days=2)\nnow(tz='CET', "
        "dst=true)</function_calls>",
        "I'll look.",
        calls=[("get_weather", {"city": "Paris", "days": 2}), ("now", {"tz": "CET", "dst": True})],
        markers=_FC,
    ),
    Case(
        "a-string-over-lines",
        "tool",
        "olmo3",
        '<function_calls>\nrun(code="""a = 1\nb = 2""")\n</function_calls>',
        "",
        calls=[("run", {"code": "a = 1\nb = 2"})],
        markers=_FC,
    ),
    Case(
        "commas-on-a-line",
        "tool",
        "olmo3",
        "<function_calls>a(), b(x=None)</function_calls>",
        "",
        calls=[("a", {}), ("b", {"x": None})],
        markers=_FC,
    ),
    Case(
        "not-calls-is-content",
        "tool",
        "olmo3",
        "<function_calls>import os</function_calls>",
        "<function_calls>import os</function_calls>",
        wellformed=False,
    ),
    Case(
        "an-expression-is-not-a-literal",
        "tool",
        "olmo3",
        "<function_calls>f(x=1+1)</function_calls>",
        "<function_calls>f(x=1+1)</function_calls>",
        wellformed=False,
    ),
]

_Q = g4.QUOTE
_G4 = (g4.CALL_OPEN, g4.CALL_CLOSE, g4.QUOTE)
GEMMA4 = [
    Case(
        "typed-values",
        "tool",
        "gemma4",
        f"Checking.{g4.CALL_OPEN}call:get_weather{{city:{_Q}Tokyo, {{JP}}{_Q},days:3,"
        f"opts:{{deep:[1,2.5,true,null]}}}}{g4.CALL_CLOSE}<|tool_response>",
        "Checking.",
        calls=[
            (
                "get_weather",
                {"city": "Tokyo, {JP}", "days": 3, "opts": {"deep": [1, 2.5, True, None]}},
            )
        ],
        markers=_G4,
    ),
    Case(
        "parallel",
        "tool",
        "gemma4",
        f"{g4.CALL_OPEN}call:a{{}}{g4.CALL_CLOSE}{g4.CALL_OPEN}call:b{{x:{_Q}1{_Q}}}"
        f"{g4.CALL_CLOSE}",
        "",
        calls=[("a", {}), ("b", {"x": "1"})],
        markers=_G4,
    ),
    Case(
        "not-a-call-is-content",
        "tool",
        "gemma4",
        f"{g4.CALL_OPEN}hello{g4.CALL_CLOSE}",
        f"{g4.CALL_OPEN}hello{g4.CALL_CLOSE}",
        wellformed=False,
    ),
]
FUNCTIONGEMMA = [
    Case(
        "every-value-kept",
        "tool",
        "functiongemma",
        f"{g4.FG_CALL_OPEN}call:get_weather{{city:{g4.FG_QUOTE}London{g4.FG_QUOTE},days:2,"
        f"metric:false}}{g4.FG_CALL_CLOSE}",
        "",
        calls=[("get_weather", {"city": "London", "days": 2, "metric": False})],
        markers=(g4.FG_CALL_OPEN, g4.FG_CALL_CLOSE, g4.FG_QUOTE),
    ),
    Case(
        "unclosed-is-read-as-closed",
        "tool",
        "functiongemma",
        f"Sure.{g4.FG_CALL_OPEN}call:now{{}}",
        "Sure.",
        calls=[("now", {})],
        markers=(g4.FG_CALL_OPEN, g4.FG_CALL_CLOSE),
    ),
]
_G4_THINK = ("<|channel>thought\n", "<channel|>")
GEMMA4_REASONING = [
    Case(
        "thought-channel",
        "reasoning",
        "gemma4",
        "<|channel>thought\nNeed weather.<channel|>It is sunny.",
        "It is sunny.",
        "Need weather.",
        markers=_G4_THINK,
    ),
    Case(
        "ended-by-a-call",
        "reasoning",
        "gemma4",
        f"<|channel>thought\nCall it.{g4.CALL_OPEN}call:a{{}}{g4.CALL_CLOSE}",
        f"{g4.CALL_OPEN}call:a{{}}{g4.CALL_CLOSE}",
        "Call it.",
        markers=_G4_THINK,
    ),
]

_QCM = ("<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>")
QWEN3_CODER_BARE = [
    Case(
        "a-call-without-its-block",
        "tool",
        "qwen3_coder",
        "Checking.\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\n2\n</parameter>\n</function>",
        "Checking.\n",
        calls=[("get_weather", {"city": "Paris", "days": 2})],
        tools=TYPED_TOOLS,
        markers=_QCM,
    ),
    Case(
        "a-bare-call-then-a-block",
        "tool",
        "qwen3_coder",
        "<function=now>\n</function>\n<tool_call>\n<function=now>\n</function>\n</tool_call>",
        "",
        calls=[("now", {}), ("now", {})],
        markers=_QCM,
    ),
    Case(
        "a-bare-call-left-open",
        "tool",
        "qwen3_coder",
        "<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</func",
        "",
        calls=[("get_weather", {"city": "Oslo"})],
        tools=TYPED_TOOLS,
        markers=_QCM,
    ),
    Case(
        "a-bare-element-without-a-name-is-content",
        "tool",
        "qwen3_coder",
        "See <function=>x</function> here.",
        "See <function=>x</function> here.",
        wellformed=False,
    ),
]

ALL_2026: dict[str, list[Case]] = {
    "qwen3_coder-bare": QWEN3_CODER_BARE,
    "gemma4": GEMMA4,
    "functiongemma": FUNCTIONGEMMA,
    "gemma4-reasoning": GEMMA4_REASONING,
    "olmo3": OLMO3,
    "cohere": COHERE,
    "cohere-reasoning": COHERE_REASONING,
    "hunyuan_a13b": HUNYUAN,
    "hunyuan_a13b-reasoning": HUNYUAN_REASONING,
    "step3": STEP3,
    "longcat": LONGCAT,
    "longcat-reasoning": LONGCAT_REASONING,
    "kimi_k2-reasoning": KIMI_REASONING,
    "glm45-reasoning": GLM45_REASONING,
    "seed_oss": SEED_OSS,
    "seed_oss-reasoning": SEED_OSS_REASONING,
    "deepseek_v32": DEEPSEEK_V32,
    "minimax_m2": MINIMAX_M2,
    "minimax_m2-reasoning": MINIMAX_M2_REASONING,
}
