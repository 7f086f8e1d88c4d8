"""Registry, convenience functions, ids, and streaming latency of the parsers."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neutrino.text.parsers import (
    Delta,
    ReasoningParser,
    ToolCall,
    ToolCallDelta,
    ToolParser,
    UnknownParser,
    dsml,
    parse_reasoning,
    parse_tools,
    reasoning_parser,
    reasoning_parser_names,
    tool_parser,
    tool_parser_names,
)
from neutrino.text.parsers import deepseek as ds
from neutrino.text.parsers import kimi_k2 as kimi
from neutrino.text.parsers.harmony import MARKERS as HARMONY_MARKERS
from tests.unit.parsers.cases import HARMONY_REASONING, HARMONY_TOOLS
from tests.unit.parsers.support import merge, split_at


def test_names() -> None:
    assert {"think", "harmony", "mistral"} <= set(reasoning_parser_names())
    assert {
        "hermes",
        "llama3_json",
        "pythonic",
        "mistral",
        "deepseek_v3",
        "kimi_k2",
        "harmony",
    } <= set(tool_parser_names())
    for name in reasoning_parser_names():
        assert issubclass(reasoning_parser(name), ReasoningParser)
    for name in tool_parser_names():
        assert issubclass(tool_parser(name), ToolParser)


def test_unknown_name() -> None:
    with pytest.raises(UnknownParser) as err:
        tool_parser("nope")
    assert isinstance(err.value, KeyError)
    assert "nope" in str(err.value) and "hermes" in str(err.value)
    with pytest.raises(KeyError, match="think"):
        reasoning_parser("hermes")


def test_lazy_import() -> None:
    code = (
        "import sys, neutrino.text.parsers as p\n"
        "mods = [m for m in sys.modules if m.startswith('neutrino.text.parsers.')]\n"
        "expected = ['neutrino.text.parsers.base', 'neutrino.text.parsers.registry']\n"
        "assert sorted(mods) == expected, mods\n"
        "p.tool_parser('hermes')\n"
        "assert 'neutrino.text.parsers.hermes' in sys.modules\n"
        "assert 'neutrino.text.parsers.harmony' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_convenience_functions() -> None:
    d = parse_reasoning("think", "r</think>c", starts_in_reasoning=True)
    assert d == Delta(content="c", reasoning="r")
    content, calls = parse_tools(
        "hermes", 'a<tool_call>{"name": "f", "arguments": {"x": "é"}}</tool_call>', None
    )
    assert content == "a"
    assert calls == [ToolCall(id="call_0", name="f", arguments='{"x": "é"}')]


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        ("hermes", '<tool_call>{"name": "f", "arguments": {"x": "\\ud800 é"}}</tool_call>'),
        ("llama3_json", '{"name": "f", "parameters": {"x": "\\ud800 é"}}'),
        ("mistral", '[TOOL_CALLS][{"name": "f", "arguments": {"x": "\\ud800 é"}}]'),
    ],
)
def test_arguments_with_a_lone_surrogate_stay_valid_utf8(parser: str, text: str) -> None:
    """A model can write a lone surrogate escape; the arguments must still have a UTF-8
    form (the answer is JSON on the wire), and still decode to what the model wrote."""
    _, calls = parse_tools(parser, text, None)
    (call,) = calls
    call.arguments.encode()  # raises UnicodeEncodeError on a bare surrogate
    assert json.loads(call.arguments) == {"x": "\ud800 é"}


def test_ids_use_prefix_and_index() -> None:
    text = '<tool_call>{"name": "f"}</tool_call><tool_call>{"name": "g"}</tool_call>'
    _, calls = parse_tools("hermes", text, None, id_prefix="call_abc_")
    assert [c.id for c in calls] == ["call_abc_0", "call_abc_1"]


def test_call_emitted_as_soon_as_complete() -> None:
    p = tool_parser("hermes")(tools=None)
    assert p.feed("Let me check.\n<tool_") == Delta(content="Let me check.\n")
    assert p.feed('call>{"name": "f", "arguments": {"a": 1}}') == Delta()
    d = p.feed("</tool_call>\n")
    assert d.tool_calls == [ToolCallDelta(index=0, id="call_0", name="f", arguments='{"a": 1}')]
    assert p.calls == [ToolCall("call_0", "f", '{"a": 1}')]
    p.calls.clear()  # a copy
    assert len(p.calls) == 1
    assert p.finish() == Delta()


@pytest.mark.parametrize(
    ("parser", "chunk", "released"),
    [
        ("hermes", "Hello <b>wor", "Hello <b>wor"),
        ("hermes", "Hello <tool_ca", "Hello "),
        ("llama3_json", "Sure, here {it is", "Sure, here {it is"),
        ("pythonic", "Sure [f(", "Sure [f("),
        ("pythonic", "[link](x", "[link](x"),
        ("mistral", "Hi [TOOL", "Hi "),
        ("deepseek_v3", "Hi <", "Hi "),
        ("kimi_k2", "Hi <|tool_calls_sec", "Hi "),
        ("harmony", "<|channel|>final<|message|>Hi <|e", "Hi "),
        ("llama_nemotron_json", "Hi <TOOL", "Hi "),
        ("llama_nemotron_json", "a <TOOLS> [b]", "a <TOOLS> [b]"),
    ],
)
def test_content_is_not_held_back(parser: str, chunk: str, released: str) -> None:
    assert tool_parser(parser)(tools=None).feed(chunk).content == released


@pytest.mark.parametrize(
    ("parser", "kwargs", "chunk", "expected"),
    [
        ("think", {}, "<think>abc </thi", Delta(reasoning="abc ")),
        ("think", {"starts_in_reasoning": True}, "abc", Delta(reasoning="abc")),
        ("think", {}, "no think <", Delta(content="no think ")),
        ("harmony", {}, "<|channel|>analysis<|message|>abc<|", Delta(reasoning="abc")),
    ],
)
def test_reasoning_is_not_held_back(
    parser: str, kwargs: dict[str, bool], chunk: str, expected: Delta
) -> None:
    assert reasoning_parser(parser)(**kwargs).feed(chunk) == expected


def _pipeline(chunks: list[str]) -> tuple[str, str, list[tuple[str | None, str | None, str]]]:
    """harmony reasoning parser, then the harmony tool parser on its content, chunk by chunk."""
    rp = reasoning_parser("harmony")()
    tp = tool_parser("harmony")(tools=None)
    deltas: list[Delta] = []
    for c in [*chunks, None]:
        d = rp.feed(c) if c is not None else rp.finish()
        t = tp.feed(d.content)
        if c is None:
            last = tp.finish()
            t = Delta(
                t.content + last.content,
                t.reasoning + last.reasoning,
                t.tool_calls + last.tool_calls,
            )
        deltas.append(
            Delta(content=t.content, reasoning=d.reasoning + t.reasoning, tool_calls=t.tool_calls)
        )
    return merge(deltas)


_HARMONY_TEXTS = [
    c.text for c in HARMONY_REASONING + HARMONY_TOOLS if c.wellformed or "passthrough" in c.id
]


@pytest.mark.parametrize("text", _HARMONY_TEXTS)
def test_harmony_pipeline_matches_tool_parser_alone(text: str) -> None:
    content, reasoning, calls = _pipeline([text])
    alone = tool_parser("harmony")(tools=None)
    merged = merge([alone.feed(text), alone.finish()])
    assert (content, reasoning, calls) == merged
    for marker in HARMONY_MARKERS:
        assert marker not in content and marker not in reasoning


@settings(max_examples=80, deadline=None)
@given(text=st.sampled_from(_HARMONY_TEXTS), data=st.data())
def test_harmony_pipeline_streams(text: str, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=20))
    assert _pipeline(split_at(text, cuts)) == _pipeline([text])


def test_arguments_are_canonical_json() -> None:
    raw = '{"b":1,"a":"\\u00e9\\n","c":[1.0,1e2]}'
    texts = {
        "hermes": f'<tool_call>{{"name":"f","arguments":{raw}}}</tool_call>',
        "llama3_json": f'{{"name":"f","parameters":{raw}}}',
        "mistral": f"[TOOL_CALLS]f[ARGS]{raw}",
        "deepseek_v3": f"{ds.CALLS_BEGIN}{ds.CALL_BEGIN}f{ds.SEP}{raw}{ds.CALL_END}{ds.CALLS_END}",
        "kimi_k2": f"{kimi.SECTION_BEGIN}{kimi.CALL_BEGIN}functions.f:0{kimi.ARG_BEGIN}{raw}"
        f"{kimi.CALL_END}{kimi.SECTION_END}",
        "harmony": f"<|channel|>commentary to=functions.f<|message|>{raw}<|call|>",
        "llama_nemotron_json": f'<TOOLCALL>[{{"name":"f","arguments":{raw}}}]</TOOLCALL>',
    }
    expected = json.dumps(json.loads(raw), ensure_ascii=False)
    for name, text in texts.items():
        call_id = "functions.f:0" if name == "kimi_k2" else "call_0"  # Kimi K2: the model's
        assert parse_tools(name, text, None)[1] == [ToolCall(call_id, "f", expected)], name


def test_nan_is_not_json() -> None:
    text = '<tool_call>{"name": "f", "arguments": {"x": NaN}}</tool_call>'
    assert parse_tools("hermes", text, None) == (text, [])
    assert parse_tools("pythonic", "[f(x=float('nan'))]", None)[1] == []


def _big(n: int) -> dict[str, tuple[str, str]]:
    args = json.dumps({"code": ('if (a) { b["}"] = "\\\\"; }\n' * (n // 25 + 1))[:n]})
    return {
        "think": ("r", "<think>" + "x < y " * (n // 6) + "</think>answer"),
        "harmony-r": ("r", "<|channel|>analysis<|message|>" + "a <| b " * (n // 7) + "<|end|>"),
        "harmony": ("t", f"<|channel|>commentary to=functions.w<|message|>{args}<|call|>"),
        "hermes": ("t", '<tool_call>{"name": "w", "arguments": ' + args + "}</tool_call>"),
        "llama3_json": ("t", '{"name": "w", "parameters": ' + args + "}"),
        "pythonic": ("t", f"[w(code={args!r})]"),
        "mistral": ("t", f"[TOOL_CALLS]w[ARGS]{args}"),
        "deepseek_v3": ("t", f"{ds.CALLS_BEGIN}{ds.CALL_BEGIN}w{ds.SEP}{args}{ds.CALL_END}"),
        "kimi_k2": ("t", f"{kimi.SECTION_BEGIN}{kimi.CALL_BEGIN}w:0{kimi.ARG_BEGIN}{args}"),
        "llama_nemotron_json": (
            "t",
            '<TOOLCALL>[{"name": "w", "arguments": ' + args + "}]</TOOLCALL>",
        ),
        # Degenerate outputs: a run of whitespace where Granite's <response> may begin, and
        # parameters whose close tags never come.
        "granite-r": ("r", "<think>a</think>" + " " * n),
        "qwen3_coder": (
            "t",
            "<tool_call>\n<function=w>\n" + "<parameter=p>x\n" * (n // 15) + "</function>",
        ),
        "deepseek_v32": (
            "t",
            f'{dsml.BLOCK_OPEN}{dsml.INVOKE}"w">{dsml.PARAMETER}"c" '
            f'string="false">{args}{dsml.PARAMETER_END}{dsml.INVOKE_END}'
            f"{dsml.BLOCK_CLOSE}",
        ),
        "gemma4": ("t", f'<|tool_call>call:w{{code:<|"|>{args}<|"|>}}<tool_call|>'),
        "olmo3": ("t", f"<function_calls>w(code={args!r})</function_calls>"),
        "cohere_command4": (
            "t",
            f'<|START_ACTION|>[{{"tool_name": "w", "parameters": {args}}}]<|END_ACTION|>',
        ),
        "minimax_m2": (
            "t",
            '<minimax:tool_call>\n<invoke name="w">\n'
            + '<parameter name="p">x\n' * (n // 22)
            + "</invoke>\n</minimax:tool_call>",
        ),
    }


def _stream_time(kind: str, name: str, text: str) -> float:
    name = name.removesuffix("-r")
    best = float("inf")
    for _ in range(2):
        p: ReasoningParser | ToolParser = (
            reasoning_parser(name)() if kind == "r" else tool_parser(name)(tools=None)
        )
        t = time.perf_counter()
        for i in range(0, len(text), 3):
            p.feed(text[i : i + 3])
        p.finish()
        best = min(best, time.perf_counter() - t)
    return best


def test_streaming_cost_is_linear() -> None:
    """A 4x longer output streamed in 3-character chunks costs about 4x, not 16x."""
    small, large = _big(20_000), _big(80_000)
    for name, (kind, text) in small.items():
        t_small = _stream_time(kind, name, text)
        t_large = _stream_time(kind, name, large[name][1])
        assert t_large < 9 * t_small + 0.02, (name, t_small, t_large)


@pytest.mark.parametrize(
    ("name", "opening"),
    [("think", "<think>"), ("seed_oss", "<seed:think>"), ("longcat", "<longcat_think>"),
     ("cohere_command4", "<|START_THINKING|>"), ("gemma4", "<|channel>thought"),
     ("granite", "<think>"), ("hunyuan_a13b", "<think>"), ("mistral", "[THINK]"),
     ("harmony", None)],
)  # fmt: skip
def test_each_reasoning_format_names_the_opening_a_template_may_write(
    name: str, opening: str | None
) -> None:
    assert reasoning_parser(name).opening() == opening
