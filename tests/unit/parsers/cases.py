"""Realistic raw outputs per parser, with the parse each must give."""

from __future__ import annotations

from neutrino.text.parsers import deepseek as ds
from neutrino.text.parsers import glm45 as glm
from neutrino.text.parsers import harmony as hm
from neutrino.text.parsers import kimi_k2 as kimi
from neutrino.text.parsers import qwen3_coder as qc
from tests.unit.parsers.cases_2026 import ALL_2026
from tests.unit.parsers.cases_after_calls import AFTER_CALLS
from tests.unit.parsers.support import TYPED_TOOLS, Case, tools

THINK_MARKERS = ("<think>", "</think>")
HERMES_MARKERS = ("<tool_call>", "</tool_call>")
LLAMA_MARKERS = ("<|python_tag|>",)
PYTHONIC_MARKERS = ("<|python_start|>", "<|python_end|>")
MISTRAL_MARKERS = ("[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]")
DEEPSEEK_MARKERS = (ds.CALLS_BEGIN, ds.CALLS_END, ds.CALL_BEGIN, ds.CALL_END, ds.SEP)
KIMI_MARKERS = (
    kimi.SECTION_BEGIN,
    kimi.SECTION_END,
    kimi.CALL_BEGIN,
    kimi.CALL_END,
    kimi.ARG_BEGIN,
)
HARMONY_MARKERS = hm.MARKERS

NESTED = {
    "q": 'naïve 日本 "quoted" {braces} [brackets] </tool and <|tag',
    "nested": {"list": [1, 2.5, -3, True, None], "empty": {}, "s": "a\\b\nc\t/"},
    "emoji": "🙂",
}
NESTED_JSON = (
    '{"q": "na\\u00efve 日本 \\"quoted\\" {braces} [brackets] </tool and <|tag", '
    '"nested": {"list": [1, 2.5, -3, true, null], "empty": {}, "s": "a\\\\b\\nc\\t\\/"}, '
    '"emoji": "\\ud83d\\ude42"}'
)
PARIS = {"city": "Paris"}


def _r(id: str, parser: str, text: str, content: str, reasoning: str, **kw: object) -> Case:
    markers = {"think": THINK_MARKERS, "mistral": MISTRAL_MARKERS}.get(parser, HARMONY_MARKERS)
    return Case(id, "reasoning", parser, text, content, reasoning, markers=markers, **kw)  # type: ignore[arg-type]


THINK = [
    _r(
        "r1",
        "think",
        "<think>\nLet me add 2+2.\n</think>\n\nIt is 4.",
        "\n\nIt is 4.",
        "\nLet me add 2+2.\n",
    ),
    _r(
        "opened-by-template",
        "think",
        "Okay, so <b>bold</b> < 3 and <thinking>.\n</think>\n\nAnswer: <thin",
        "\n\nAnswer: <thin",
        "Okay, so <b>bold</b> < 3 and <thinking>.\n",
        kwargs={"starts_in_reasoning": True},
    ),
    _r(
        "opened-twice",
        "think",
        "<think>\nr\n</think>\nc",
        "\nc",
        "\nr\n",
        kwargs={"starts_in_reasoning": True},
    ),
    _r(
        "no-think",
        "think",
        "Just an answer, with a < sign and </thin.",
        "Just an answer, with a < sign and </thin.",
        "",
    ),
    _r("unclosed", "think", "<think>still thinking <thi", "", "still thinking <thi"),
    _r("content-before", "think", "Hmm. <think>r</think>c", "Hmm. c", "r"),
    _r("stray-close", "think", "abc</think>def", "abcdef", ""),
    _r("empty-think", "think", "<think>\n\n</think>\n\nHi", "\n\nHi", "\n\n"),
    _r("empty", "think", "", "", ""),
    _r(
        "mistral-think",
        "mistral",
        "[THINK]I should call [x].[/THINK]Answer",
        "Answer",
        "I should call [x].",
    ),
    _r("mistral-no-think", "mistral", "[THINK is not a marker]", "[THINK is not a marker]", ""),
]

_CALL = (
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"location":"SF"}<|call|>'
)
HARMONY_REASONING = [
    _r(
        "cookbook",
        "harmony",
        '<|channel|>analysis<|message|>User asks: "What is 2 + 2?" Simple arithmetic.<|end|>'
        "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>",
        "2 + 2 = 4.",
        'User asks: "What is 2 + 2?" Simple arithmetic.',
    ),
    _r(
        "tool-call-passthrough",
        "harmony",
        "<|channel|>analysis<|message|>Need to use function get_weather.<|end|>" + _CALL,
        _CALL,
        "Need to use function get_weather.",
        wellformed=False,  # the call message is passed on verbatim, for the tool parser
    ),
    _r(
        "no-return-token",
        "harmony",
        "<|channel|>analysis<|message|>think <b>\n<|end|>"
        "<|start|>assistant<|channel|>final<|message|>A <|b|> c",
        "A <|b|> c",
        "think <b>\n",
    ),
    _r(
        "builtin-browser",
        "harmony",
        '<|channel|>analysis to=browser.search<|message|>{"query":"x"}<|end|>'
        "<|start|>assistant<|channel|>final<|message|>done<|return|>",
        "done",
        '{"query":"x"}',
    ),
    _r("plain", "harmony", "Hello there <| not a marker", "Hello there <| not a marker", ""),
    _r(
        "truncated-analysis",
        "harmony",
        "<|channel|>analysis<|message|>thinking...",
        "",
        "thinking...",
    ),
    _r(
        "truncated-header",
        "harmony",
        "<|channel|>analysis<|message|>a<|end|><|start|>assis",
        "",
        "a",
    ),
    _r(
        "preamble",
        "harmony",
        "<|channel|>analysis<|message|>plan<|end|><|start|>assistant<|channel|>commentary<|message|>"
        "**Action plan**: 1. file<|end|>",
        "**Action plan**: 1. file",
        "plan",
    ),
]

_BAD_CALL = (
    "<|start|>assistant<|channel|>commentary to=functions.a <|constrain|>json"
    "<|message|>{not json}<|call|>"
)
HARMONY_TOOLS = [
    Case(
        "cookbook-call",
        "tool",
        "harmony",
        "<|channel|>analysis<|message|>Need to use function get_weather.<|end|>" + _CALL,
        "",
        "Need to use function get_weather.",
        [("get_weather", {"location": "SF"})],
        markers=HARMONY_MARKERS,
    ),
    Case(
        "pipeline-content",
        "tool",
        "harmony",
        _CALL,
        "",
        calls=[("get_weather", {"location": "SF"})],
        markers=HARMONY_MARKERS,
    ),
    Case(
        "preamble-then-call",
        "tool",
        "harmony",
        "<|channel|>analysis<|message|>plan<|end|><|start|>assistant<|channel|>commentary<|message|>"
        "Will start.<|end|><|start|>assistant<|channel|>commentary to=functions.generate_file"
        '<|constrain|>json<|message|>{"template": "basic_html", "path": "index.html"}<|call|>',
        "Will start.",
        "plan",
        [("generate_file", {"template": "basic_html", "path": "index.html"})],
        markers=HARMONY_MARKERS,
    ),
    Case(
        "recipient-in-role",
        "tool",
        "harmony",
        "<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>"
        + NESTED_JSON
        + "<|call|>",
        "",
        calls=[("lookup", NESTED)],
        markers=HARMONY_MARKERS,
    ),
    Case(
        "two-calls-and-empty-args",
        "tool",
        "harmony",
        "<|start|>assistant<|channel|>commentary to=functions.a <|constrain|>json"
        "<|message|>{}<|call|>"
        "<|start|>assistant<|channel|>commentary to=functions.b <|constrain|>json"
        "<|message|><|call|>",
        "",
        calls=[("a", {}), ("b", {})],
        markers=HARMONY_MARKERS,
    ),
    Case(
        "final-answer-only",
        "tool",
        "harmony",
        "<|channel|>final<|message|>Paris is sunny.<|return|>",
        "Paris is sunny.",
        markers=HARMONY_MARKERS,
    ),
    # Text after a call: a final-channel message after it is the answer's content (vLLM's
    # openai_tool_parser.py takes content from the final channel wherever it comes), and so
    # is text outside any message (the parser's rule for stray text), kept.
    Case(
        "final-after-call",
        "tool",
        "harmony",
        "<|channel|>analysis<|message|>plan<|end|>"
        + _CALL
        + "<|start|>assistant<|channel|>final<|message|>Looked it up: sunny.<|return|>",
        "Looked it up: sunny.",
        "plan",
        [("get_weather", {"location": "SF"})],
        markers=HARMONY_MARKERS,
    ),
    Case(
        "text-outside-after-call",
        "tool",
        "harmony",
        _CALL + "Trailing words.",
        "Trailing words.",
        calls=[("get_weather", {"location": "SF"})],
        markers=HARMONY_MARKERS,
    ),
    Case(
        "malformed-body",
        "tool",
        "harmony",
        _BAD_CALL,
        _BAD_CALL,
        wellformed=False,
    ),
]

HERMES = [
    # A closing tag inside an argument string is text (the JSON string is still open there);
    # the first unquoted one ends the block.
    Case(
        "close-tag-in-string",
        "tool",
        "hermes",
        '<tool_call>\n{"name": "write", "arguments": {"text": "end with </tool_call> \\" ok"}}'
        "\n</tool_call>",
        "",
        calls=[("write", {"text": 'end with </tool_call> " ok'})],
    ),
    Case(
        "single",
        "tool",
        "hermes",
        "I will check.\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        "I will check.\n",
        calls=[("get_weather", PARIS)],
        markers=HERMES_MARKERS,
    ),
    Case(
        "parallel",
        "tool",
        "hermes",
        '<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n'
        '<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call>\n',
        "",
        calls=[("a", {"x": 1}), ("b", {})],
        markers=HERMES_MARKERS,
    ),
    Case(
        "content-after",
        "tool",
        "hermes",
        '<tool_call>{"name": "a"}</tool_call>\nDone <b>.',
        "",  # text after a call is dropped (README; vLLM hermes_tool_parser.py non-streamed)
        calls=[("a", {})],
        markers=HERMES_MARKERS,
    ),
    Case(
        "nested-unicode",
        "tool",
        "hermes",
        '<tool_call>\n{"name": "search", "arguments": ' + NESTED_JSON + "}\n</tool_call>",
        "",
        calls=[("search", NESTED)],
        markers=HERMES_MARKERS,
    ),
    Case(
        "string-arguments",
        "tool",
        "hermes",
        '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>',
        "",
        calls=[("f", {"a": 1})],
        markers=HERMES_MARKERS,
    ),
    Case(
        "malformed-json",
        "tool",
        "hermes",
        'x <tool_call>\n{"name": "f", "arguments": {bad}}\n</tool_call>\n'
        '<tool_call>{"name": "g"}</tool_call>',
        'x <tool_call>\n{"name": "f", "arguments": {bad}}\n</tool_call>\n',
        calls=[("g", {})],
        wellformed=False,
    ),
    Case(
        "unclosed-at-end",
        "tool",
        "hermes",
        '<tool_call>\n{"name": "f", "arguments": {"a": [1]}}\n',
        "",
        calls=[("f", {"a": [1]})],
        markers=HERMES_MARKERS,
    ),
    Case(
        "unclosed-garbage",
        "tool",
        "hermes",
        'Text <tool_call>\n{"name": ',
        'Text <tool_call>\n{"name": ',  # unclosed, no call: its text is content (vLLM's
        # hermes answers the whole output as content when the JSON does not parse)
        wellformed=False,
    ),
    Case(
        "plain",
        "tool",
        "hermes",
        "a <tool> b < c <tool_cal",
        "a <tool> b < c <tool_cal",
        markers=HERMES_MARKERS,
    ),
    Case("whitespace-only", "tool", "hermes", " \n ", " \n ", markers=HERMES_MARKERS),
]

# Llama-Nemotron Super v1.5: one <TOOLCALL> block holding a JSON array of calls (its chat
# template's format; the first case is the model card's vLLM example).
NEMOTRON_MARKERS = ("<TOOLCALL>", "</TOOLCALL>")
NEMOTRON = [
    Case(
        "close-tag-in-string",
        "tool",
        "llama_nemotron_json",
        '<TOOLCALL>[{"name": "write", "arguments": {"text": "a </TOOLCALL> b"}}]</TOOLCALL>',
        "",
        calls=[("write", {"text": "a </TOOLCALL> b"})],
    ),
    Case(
        "model-card",
        "tool",
        "llama_nemotron_json",
        '<TOOLCALL>[{"name": "calculate_tip", "arguments": '
        '{"bill_total": 100, "tip_percentage": 18}}]</TOOLCALL>',
        "",
        calls=[("calculate_tip", {"bill_total": 100, "tip_percentage": 18})],
        markers=NEMOTRON_MARKERS,
    ),
    Case(
        "parallel-nested",
        "tool",
        "llama_nemotron_json",
        '\n<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
        '{"name": "search", "arguments": ' + NESTED_JSON + "}]</TOOLCALL>\n",
        "",
        calls=[("get_weather", PARIS), ("search", NESTED)],
        markers=NEMOTRON_MARKERS,
    ),
    Case(
        "content-around",
        "tool",
        "llama_nemotron_json",
        "I'll look that up.\n<TOOLCALL>[\n  "
        '{"name": "a", "arguments": {"x": [1, "]</TOOL"]}}\n]</TOOLCALL>\nDone <b>.',
        "I'll look that up.\n",  # text after the call is dropped (README)
        calls=[("a", {"x": [1, "]</TOOL"]})],
        markers=NEMOTRON_MARKERS,
    ),
    Case(
        "two-blocks-string-args",
        "tool",
        "llama_nemotron_json",
        '<TOOLCALL>[{"name": "a", "arguments": "{\\"y\\": 2}"}]</TOOLCALL>\n'
        '<TOOLCALL>[{"name": "b", "parameters": {"z": null}}, {"name": "c"}]</TOOLCALL>',
        "",
        calls=[("a", {"y": 2}), ("b", {"z": None}), ("c", {})],
        markers=NEMOTRON_MARKERS,
    ),
    Case(
        "single-object",
        "tool",
        "llama_nemotron_json",
        '<TOOLCALL>{"name": "f", "arguments": {}}</TOOLCALL>',
        "",
        calls=[("f", {})],
        markers=NEMOTRON_MARKERS,
    ),
    Case(
        "empty-list",
        "tool",
        "llama_nemotron_json",
        "Nothing to call.<TOOLCALL>[]</TOOLCALL>",
        "Nothing to call.",
        markers=NEMOTRON_MARKERS,
    ),
    Case(
        "malformed-json",
        "tool",
        "llama_nemotron_json",
        'x <TOOLCALL>[{"name": "f", "arguments": {bad}}]</TOOLCALL>\n'
        '<TOOLCALL>[{"name": "g"}]</TOOLCALL>',
        'x <TOOLCALL>[{"name": "f", "arguments": {bad}}]</TOOLCALL>\n',
        calls=[("g", {})],
        wellformed=False,
    ),
    Case(
        "bad-element",
        "tool",
        "llama_nemotron_json",
        '<TOOLCALL>[{"name": "f", "arguments": {}}, {"arguments": {}}]</TOOLCALL> ok',
        '<TOOLCALL>[{"name": "f", "arguments": {}}, {"arguments": {}}]</TOOLCALL> ok',
        wellformed=False,
    ),
    Case(
        "unclosed-at-end",
        "tool",
        "llama_nemotron_json",
        '<TOOLCALL>[{"name": "f", "arguments": {"a": [1]}}]\n',
        "",
        calls=[("f", {"a": [1]})],
        markers=NEMOTRON_MARKERS,
    ),
    Case(
        "truncated",
        "tool",
        "llama_nemotron_json",
        'Text <TOOLCALL>[{"name": "f", "argu',
        'Text <TOOLCALL>[{"name": "f", "argu',  # unclosed, no call: its text is content
        wellformed=False,
    ),
    Case(
        "plain",
        "tool",
        "llama_nemotron_json",
        "a <TOOL> b < c <toolcall> [x] <TOOLCAL",
        "a <TOOL> b < c <toolcall> [x] <TOOLCAL",
        markers=NEMOTRON_MARKERS,
    ),
    Case(
        "whitespace-only", "tool", "llama_nemotron_json", " \n ", " \n ", markers=NEMOTRON_MARKERS
    ),
]

LLAMA3_JSON = [
    Case(
        "single",
        "tool",
        "llama3_json",
        '{"name": "get_weather", "parameters": {"city": "Paris"}}',
        "",
        calls=[("get_weather", PARIS)],
        markers=LLAMA_MARKERS,
    ),
    Case(
        "python-tag-parallel",
        "tool",
        "llama3_json",
        '<|python_tag|>{"name": "a", "parameters": {"x": 1}}; {"name": "b", "parameters": {}}',
        "",
        calls=[("a", {"x": 1}), ("b", {})],
        markers=LLAMA_MARKERS,
    ),
    Case(
        "content-before-tag",
        "tool",
        "llama3_json",
        'Let me look.<|python_tag|>{"name": "f", "parameters": ' + NESTED_JSON + "}",
        "Let me look.",
        calls=[("f", NESTED)],
        markers=LLAMA_MARKERS,
    ),
    Case(
        "json-answer",
        "tool",
        "llama3_json",
        '  {"answer": 42, "name": "x"}',
        '  {"answer": 42, "name": "x"}',
        markers=LLAMA_MARKERS,
    ),
    Case(
        "prose",
        "tool",
        "llama3_json",
        "The set {1, 2} is small.",
        "The set {1, 2} is small.",
        markers=LLAMA_MARKERS,
    ),
    Case(
        "builtin-tool",
        "tool",
        "llama3_json",
        '<|python_tag|>brave_search.call(query="x")',
        '<|python_tag|>brave_search.call(query="x")',
        wellformed=False,
    ),
    Case(
        "text-after-call",
        "tool",
        "llama3_json",
        '{"name": "f", "arguments": {}};\nHope that helps',
        "",  # text after a call is dropped (README; vLLM llama_tool_parser.py non-streamed)
        calls=[("f", {})],
        markers=LLAMA_MARKERS,
    ),
    Case(
        "unknown-tool",
        "tool",
        "llama3_json",
        '{"name": "rm_rf", "parameters": {}}',
        '{"name": "rm_rf", "parameters": {}}',
        tools=tools("get_weather"),
        markers=LLAMA_MARKERS,
    ),
    Case(
        "known-tool",
        "tool",
        "llama3_json",
        '\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n',
        "",
        calls=[("get_weather", PARIS)],
        tools=tools("get_weather"),
        markers=LLAMA_MARKERS,
    ),
    Case(
        "truncated",
        "tool",
        "llama3_json",
        '{"name": "f", "parameters": {"a": "b',
        '{"name": "f", "parameters": {"a": "b',
        markers=LLAMA_MARKERS,
    ),
]

PYTHONIC = [
    Case(
        "single",
        "tool",
        "pythonic",
        '[get_weather(city="Paris", unit="c")]',
        "",
        calls=[("get_weather", {"city": "Paris", "unit": "c"})],
        markers=PYTHONIC_MARKERS,
    ),
    Case(
        "parallel-literals",
        "tool",
        "pythonic",
        "[a(x=1), b(y=[1, 2.5, -3], z={'k': (1, 2)}, w=None, t=True, j=false, n=null)]",
        "",
        calls=[
            ("a", {"x": 1}),
            (
                "b",
                {
                    "y": [1, 2.5, -3],
                    "z": {"k": [1, 2]},
                    "w": None,
                    "t": True,
                    "j": False,
                    "n": None,
                },
            ),
        ],
        markers=PYTHONIC_MARKERS,
    ),
    Case(
        "llama4-tags",
        "tool",
        "pythonic",
        "<|python_start|>[get_weather(city='Paris')]<|python_end|>",
        "",
        calls=[("get_weather", PARIS)],
        markers=PYTHONIC_MARKERS,
    ),
    Case(
        "strings-unicode",
        "tool",
        "pythonic",
        "[f(s=\"naïve \\\"q\\\" ]) \\n\", t='it\\'s', u='''multi\nline''')]",
        "",
        calls=[("f", {"s": 'naïve "q" ]) \n', "t": "it's", "u": "multi\nline"})],
        markers=PYTHONIC_MARKERS,
    ),
    Case(
        "no-args-and-dotted",
        "tool",
        "pythonic",
        "  [f(), ns.g(a=1)]\n",
        "",
        calls=[("f", {}), ("ns.g", {"a": 1})],
        markers=PYTHONIC_MARKERS,
    ),
    Case(
        "trailing-text",
        "tool",
        "pythonic",
        '[f(x="a]b")]\nDone, it\'s queued.',
        "",  # text after the calls is dropped (README)
        calls=[("f", {"x": "a]b"})],
        markers=PYTHONIC_MARKERS,
    ),
    Case(
        "markdown-link",
        "tool",
        "pythonic",
        "[link](http://x) is here",
        "[link](http://x) is here",
        markers=PYTHONIC_MARKERS,
    ),
    Case("positional", "tool", "pythonic", "[f(1)]", "[f(1)]", markers=PYTHONIC_MARKERS),
    Case("expression", "tool", "pythonic", "[f(x=1+2)]", "[f(x=1+2)]", markers=PYTHONIC_MARKERS),
    Case(
        "call-not-first",
        "tool",
        "pythonic",
        "Sure: [f(x=1)]",
        "Sure: [f(x=1)]",
        markers=PYTHONIC_MARKERS,
    ),
    Case("unterminated", "tool", "pythonic", "[f(x='abc", "[f(x='abc", markers=PYTHONIC_MARKERS),
    Case(
        "unknown-tool",
        "tool",
        "pythonic",
        "[get_weather(city='Paris'), nope()]",
        "[get_weather(city='Paris'), nope()]",
        tools=tools("get_weather"),
        markers=PYTHONIC_MARKERS,
    ),
]

MISTRAL = [
    Case(
        "v3-array",
        "tool",
        "mistral",
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Zürich"}, '
        '"id": "abcDEF123"}, '
        '{"name": "get_weather", "arguments": {"city": "Bern"}, "id": "xyzXYZ789"}]',
        "",
        calls=[("get_weather", {"city": "Zürich"}), ("get_weather", {"city": "Bern"})],
        markers=MISTRAL_MARKERS,
    ),
    Case(
        "v11-call-id",
        "tool",
        "mistral",
        '[TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]{"city": "Zürich"}'
        '[TOOL_CALLS]get_weather[CALL_ID]xyzXYZ789[ARGS]{"city": "Bern"}',
        "",
        calls=[("get_weather", {"city": "Zürich"}), ("get_weather", {"city": "Bern"})],
        markers=MISTRAL_MARKERS,
    ),
    Case(
        "v13-compact",
        "tool",
        "mistral",
        'Let me check.[TOOL_CALLS]get_weather[ARGS]{"city": "Zürich", "unit": "c"}'
        '[TOOL_CALLS]search[ARGS]{"query": "café \\"best\\"", '
        '"filters": {"tags": ["a", "b"], "max": 3}}',
        "Let me check.",
        calls=[
            ("get_weather", {"city": "Zürich", "unit": "c"}),
            ("search", {"query": 'café "best"', "filters": {"tags": ["a", "b"], "max": 3}}),
        ],
        markers=MISTRAL_MARKERS,
    ),
    Case(
        "nested-empty",
        "tool",
        "mistral",
        "[TOOL_CALLS]f[ARGS]" + NESTED_JSON + "[TOOL_CALLS]g[ARGS]{}",
        "",
        calls=[("f", NESTED), ("g", {})],
        markers=MISTRAL_MARKERS,
    ),
    Case(
        "plain",
        "tool",
        "mistral",
        "Use [TOOL] or [ARGS] here [TOOL_CA",
        "Use [TOOL] or [ARGS] here [TOOL_CA",
    ),
    Case(
        "bad-name",
        "tool",
        "mistral",
        "[TOOL_CALLS]get weather[ARGS]{}",
        "[TOOL_CALLS]get weather[ARGS]{}",
        wellformed=False,
    ),
    Case(
        "bad-json",
        "tool",
        "mistral",
        'Hi [TOOL_CALLS]f[ARGS]{"a": } then',
        'Hi [TOOL_CALLS]f[ARGS]{"a": } then',
        wellformed=False,
    ),
    Case(
        "truncated",
        "tool",
        "mistral",
        '[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[ARGS]{"a": "b',
        "",  # after a call, a cut call is dropped with all other text (README)
        calls=[("f", {"a": 1})],
        markers=MISTRAL_MARKERS,
    ),
]

_B, _E, _CB, _CE, _S = ds.CALLS_BEGIN, ds.CALLS_END, ds.CALL_BEGIN, ds.CALL_END, ds.SEP
DEEPSEEK = [
    Case(
        "v3",
        "tool",
        "deepseek_v3",
        f'{_B}{_CB}function{_S}get_current_weather\n```json\n{{"location": "Tokyo"}}\n```{_CE}\n'
        f'{_CB}function{_S}get_current_weather\n```json\n{{"location": "Paris"}}\n```{_CE}{_E}',
        "",
        calls=[
            ("get_current_weather", {"location": "Tokyo"}),
            ("get_current_weather", {"location": "Paris"}),
        ],
        markers=DEEPSEEK_MARKERS,
    ),
    Case(
        "v31",
        "tool",
        "deepseek_v3",
        f"I'll check the weather.{_B}{_CB}get_weather{_S}{NESTED_JSON}{_CE}"
        f"{_CB}get_time{_S}{{}}{_CE}{_E}",
        "I'll check the weather.",
        calls=[("get_weather", NESTED), ("get_time", {})],
        markers=DEEPSEEK_MARKERS,
    ),
    Case(
        "malformed-call",
        "tool",
        "deepseek_v3",
        f'{_B}{_CB}f{_S}{{oops}}{_CE}{_CB}g{_S}{{"a": 1}}{_CE}{_E}\nafter',
        f"{_CB}f{_S}{{oops}}{_CE}",  # before the first call: content; after it: dropped
        calls=[("g", {"a": 1})],
        wellformed=False,
    ),
    Case(
        "plain",
        "tool",
        "deepseek_v3",
        "Plain <\uff5cnot a marker\uff5c> text",
        "Plain <\uff5cnot a marker\uff5c> text",
        markers=DEEPSEEK_MARKERS,
    ),
    Case(
        "unclosed",
        "tool",
        "deepseek_v3",
        f'{_B}{_CB}f{_S}{{"a": 1}}',
        f'{_CB}f{_S}{{"a": 1}}',
        # no call: vLLM deepseekv3_tool_parser.py and SGLang deepseekv3_detector.py match a
        # call only up to its end marker; its text is content, as a malformed call's is
        # (the section's marker is not output)
        wellformed=False,
    ),
]

# DeepSeek-V3.1 (and V3.1-Terminus): the call format its chat template writes,
# NAME<sep>ARGUMENTS with no "function" type and no code fence, calls chained without
# separators; registered as "deepseek_v31" (the deepseek_v3 parser reads both formats).
DEEPSEEK_V31 = [
    Case(
        "template-format",
        "tool",
        "deepseek_v31",
        f'Let me check both.{_B}{_CB}get_weather{_S}{{"location": "Tokyo"}}{_CE}'
        f'{_CB}get_weather{_S}{{"location": "Paris"}}{_CE}{_E}',
        "Let me check both.",
        calls=[("get_weather", {"location": "Tokyo"}), ("get_weather", {"location": "Paris"})],
        markers=DEEPSEEK_MARKERS,
    ),
    Case(
        "nested-args",
        "tool",
        "deepseek_v31",
        f"{_B}{_CB}search{_S}{NESTED_JSON}{_CE}{_E}",
        "",
        calls=[("search", NESTED)],
        markers=DEEPSEEK_MARKERS,
    ),
    Case(
        "spaced",
        "tool",
        "deepseek_v31",
        f"{_B}\n{_CB} get_time {_S}\n{{}} {_CE}\n{_E}\nDone: 日本.",
        "",  # text after the calls is dropped (README)
        calls=[("get_time", {})],
        markers=DEEPSEEK_MARKERS,
    ),
    Case(
        "array-args",
        "tool",
        "deepseek_v31",
        f'{_B}{_CB}f{_S}["a"]{_CE}{_CB}g{_S}{{"b": [1, 2]}}{_CE}{_E}',
        f'{_CB}f{_S}["a"]{_CE}',
        calls=[("g", {"b": [1, 2]})],
        wellformed=False,
    ),
    Case(
        "truncated",
        "tool",
        "deepseek_v31",
        f'Checking.{_B}{_CB}get_weather{_S}{{"location": "Oslo"}}',
        f'Checking.{_CB}get_weather{_S}{{"location": "Oslo"}}',  # as "unclosed" above
        wellformed=False,
    ),
    Case(
        "plain",
        "tool",
        "deepseek_v31",
        "No call: a\uff5cb, <\uff5ctool\u2581sep\uff5c is half a marker <\uff5ctool",
        "No call: a\uff5cb, <\uff5ctool\u2581sep\uff5c is half a marker <\uff5ctool",
        markers=DEEPSEEK_MARKERS,
    ),
]

_KB, _KE, _KCB, _KCE, _KA = (
    kimi.SECTION_BEGIN,
    kimi.SECTION_END,
    kimi.CALL_BEGIN,
    kimi.CALL_END,
    kimi.ARG_BEGIN,
)
KIMI = [
    Case(
        "doc-example",
        "tool",
        "kimi_k2",
        f'{_KB}{_KCB}functions.get_weather:0{_KA}{{"city": "Beijing"}}{_KCE}{_KE}',
        "",
        calls=[("get_weather", {"city": "Beijing"})],
        markers=KIMI_MARKERS,
        ids=("functions.get_weather:0",),  # the model's own id, as vLLM returns it
    ),
    Case(
        "parallel-newlines",
        "tool",
        "kimi_k2",
        f"Checking both.{_KB}\n{_KCB}functions.get_weather:0\n{_KA}{NESTED_JSON}{_KCE}\n"
        f"{_KCB}functions.get_time:1{_KA}{{}}{_KCE}\n{_KE}",
        "Checking both.",
        calls=[("get_weather", NESTED), ("get_time", {})],
        markers=KIMI_MARKERS,
        ids=("functions.get_weather:0", "functions.get_time:1"),
    ),
    Case(
        "malformed-args",
        "tool",
        "kimi_k2",
        f"{_KB}{_KCB}functions.f:0{_KA}[1, 2]{_KCE}{_KE}",
        f"{_KCB}functions.f:0{_KA}[1, 2]{_KCE}",
        wellformed=False,
    ),
    Case(
        "bare-name",
        "tool",
        "kimi_k2",
        f"{_KB}{_KCB}get_weather:1{_KA}{{}}{_KCE}{_KE}Done.",
        "",  # text after the calls is dropped (README; vLLM kimi_k2_tool_parser.py)
        calls=[("get_weather", {})],
        markers=KIMI_MARKERS,
        ids=("get_weather:1",),
    ),
    # vLLM's kimi_k2 parser and SGLang's KimiK2Detector match a call's id against
    # [\w.]+:\d+ (vLLM: tool_call_regex in kimi_k2_tool_parser.py; SGLang: kimik2_detector.py);
    # a call whose id has no ":INDEX" suffix is dropped, the others are kept.
    Case(
        "id-without-index",
        "tool",
        "kimi_k2",
        f'{_KB}{_KCB}functions.get_weather.0{_KA}{{"city": "Oslo"}}{_KCE}{_KE}',
        "",
        markers=KIMI_MARKERS,
    ),
    Case(
        "broken-id-among-valid",
        "tool",
        "kimi_k2",
        f'Two of three.{_KB}{_KCB}functions.get_weather:0{_KA}{{"city": "Oslo"}}{_KCE}'
        f'{_KCB}functions.get_weather.1{_KA}{{"city": "Rome"}}{_KCE}'
        f'{_KCB}functions.get-time:2{_KA}{{"tz": "CET"}}{_KCE}{_KE}',
        "Two of three.",
        calls=[("get_weather", {"city": "Oslo"}), ("get-time", {"tz": "CET"})],
        markers=KIMI_MARKERS,
        ids=("functions.get_weather:0", "functions.get-time:2"),
    ),
    Case(
        "plain",
        "tool",
        "kimi_k2",
        "no <|tool_calls here",
        "no <|tool_calls here",
        markers=KIMI_MARKERS,
    ),
]

# GLM-4.5: the calls its chat template writes (name line, then <arg_key>/<arg_value> pairs).
# A value is the raw text where the tool schema types the parameter "string", else JSON, else a
# Python literal, else the text.
GLM_MARKERS = (glm.OPEN, glm.CLOSE, glm.ARG_KEY, glm.ARG_KEY_END, glm.ARG_VALUE, glm.ARG_VALUE_END)
_GLM_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "zip": {"type": "string"},
                    "days": {"type": "integer"},
                    "opts": {"type": "object"},
                },
            },
        },
    },
    {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}},
]


def _glm(name: str, *pairs: tuple[str, str]) -> str:
    args = "".join(f"\n<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>" for k, v in pairs)
    return f"<tool_call>{name}{args}\n</tool_call>"


GLM45 = [
    Case(
        "template-format",
        "tool",
        "glm45",
        "Let me check.\n"
        + _glm("get_weather", ("city", "Zürich"), ("zip", "8001"), ("days", "3"))
        + "\n"
        + _glm("now"),
        "Let me check.\n",
        calls=[("get_weather", {"city": "Zürich", "zip": "8001", "days": 3}), ("now", {})],
        tools=_GLM_TOOLS,
        markers=GLM_MARKERS,
    ),
    Case(
        "json-value",
        "tool",
        "glm45",
        _glm("get_weather", ("opts", NESTED_JSON), ("city", '"quoted"')) + "\nDone.",
        "",  # text after the call is dropped (README; vLLM glm4_moe_tool_parser.py)
        calls=[("get_weather", {"opts": NESTED, "city": '"quoted"'})],
        tools=_GLM_TOOLS,
        markers=GLM_MARKERS,
    ),
    Case(
        "untyped-values",
        "tool",
        "glm45",
        _glm(
            "f",
            ("n", "123"),
            ("b", "true"),
            ("s", "Paris, France"),
            ("py", "['a', None]"),
            ("z", "null"),
            ("nan", "NaN"),
            ("big", "1e400"),
        ),
        "",
        calls=[
            (
                "f",
                {
                    "n": 123,
                    "b": True,
                    "s": "Paris, France",
                    "py": ["a", None],
                    "z": None,
                    "nan": "NaN",
                    "big": "1e400",
                },
            )
        ],
        markers=GLM_MARKERS,
    ),
    Case(
        "multiline-string",
        "tool",
        "glm45",
        "<tool_call>write\n<arg_key> code </arg_key>\n<arg_value>\ndef f():\n    return '<x>'\n"
        "</arg_value>\n</tool_call>",
        "",
        calls=[("write", {"code": "def f():\n    return '<x>'"})],
        markers=GLM_MARKERS,
    ),
    Case(
        "no-newlines",
        "tool",
        "glm45",
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
        "<tool_call>ls <arg_key>dirPath</arg_key> <arg_value>backend</arg_value> </tool_call>",
        "",
        calls=[("get_weather", {"city": "Paris"}), ("ls", {"dirPath": "backend"})],
        tools=_GLM_TOOLS,
        markers=GLM_MARKERS,
    ),
    Case(
        "malformed",
        "tool",
        "glm45",
        "<tool_call>not a call</tool_call>"
        "<tool_call>f\nstray<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>"
        '<tool_call>{"name": "g", "arguments": {}}</tool_call>' + _glm("h", ("a", "1")),
        "<tool_call>not a call</tool_call>"
        "<tool_call>f\nstray<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>"
        '<tool_call>{"name": "g", "arguments": {}}</tool_call>',
        calls=[("h", {"a": 1})],
        wellformed=False,
    ),
    Case(
        "unclosed-call",
        "tool",
        "glm45",
        "Calling.\n<tool_call>now\n",
        "Calling.\n<tool_call>now\n",
        # no call: vLLM glm4_moe_tool_parser.py and SGLang glm4_moe_detector.py find calls
        # as <tool_call>.*?</tool_call>; the unclosed block's text is content
        wellformed=False,
    ),
    Case(
        "unclosed-value",
        "tool",
        "glm45",
        "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1",
        "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1",  # as "unclosed-call"
        wellformed=False,
    ),
    Case(
        "plain",
        "tool",
        "glm45",
        "No <tool_ here; 1 < 2 and </tool_call",
        "No <tool_ here; 1 < 2 and </tool_call",
        markers=GLM_MARKERS,
    ),
]

GRANITE_TOOL_MARKERS = ("<|tool_call|>", "<tool_call>")
GRANITE_REASONING_MARKERS = ("<think>", "</think>", "<response>", "</response>")
_WEATHER_TOKYO = '{"name": "get_weather", "arguments": {"city": "Tokyo"}}'
GRANITE_TOOLS = [
    Case(
        "single",
        "tool",
        "granite",
        '<|tool_call|>[{"name": "special_function", "arguments": {"arg1": 1}}]',
        "",
        calls=[("special_function", {"arg1": 1})],
        markers=GRANITE_TOOL_MARKERS,
    ),
    Case(
        "parallel-spaced",
        "tool",
        "granite",
        "<|tool_call|> [\n  " + _WEATHER_TOKYO + ",\n"
        '  {"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}\n]',
        "",
        calls=[("get_weather", {"city": "Tokyo"}), ("get_time", {"timezone": "Asia/Tokyo"})],
        markers=GRANITE_TOOL_MARKERS,
    ),
    Case(
        "string-marker-nested",
        "tool",
        "granite",
        '<tool_call> [{"name": "search", "arguments": ' + NESTED_JSON + "}]",
        "",
        calls=[("search", NESTED)],
        markers=GRANITE_TOOL_MARKERS,
    ),
    Case(
        "content-around",
        "tool",
        "granite",
        "Let me check the weather for you.\n<|tool_call|> ["
        + _WEATHER_TOKYO
        + "]\nI'll get that information.",
        "Let me check the weather for you.\n",  # text after the call is dropped (README)
        calls=[("get_weather", {"city": "Tokyo"})],
        markers=GRANITE_TOOL_MARKERS,
    ),
    Case(
        "two-lists-string-args",
        "tool",
        "granite",
        '<|tool_call|>[{"name": "a", "arguments": {"x": [1, "]"]}}]\n'
        '<|tool_call|>[{"name": "b", "arguments": "{\\"y\\": 2}"}, {"name": "c"}]',
        "",
        calls=[("a", {"x": [1, "]"]}), ("b", {"y": 2}), ("c", {})],
        markers=GRANITE_TOOL_MARKERS,
    ),
    Case("empty-list", "tool", "granite", "<|tool_call|>[]", "", markers=GRANITE_TOOL_MARKERS),
    Case(
        "not-a-list",
        "tool",
        "granite",
        '<|tool_call|> {"name": "func", "arguments": {}}',
        '<|tool_call|> {"name": "func", "arguments": {}}',
        wellformed=False,
    ),
    Case(
        "bad-element",
        "tool",
        "granite",
        'Ok <|tool_call|>[{"name": "f", "arguments": "not a dict"}] then',
        'Ok <|tool_call|>[{"name": "f", "arguments": "not a dict"}] then',
        wellformed=False,
    ),
    Case(
        "invalid-json",
        "tool",
        "granite",
        '<|tool_call|>[{"name": }]\n<|tool_call|>[{"name": "g"}]',
        '<|tool_call|>[{"name": }]\n',
        calls=[("g", {})],
        wellformed=False,
    ),
    Case(
        "truncated",
        "tool",
        "granite",
        '<|tool_call|>[{"name": "special_function", "arguments": {"arg',
        '<|tool_call|>[{"name": "special_function", "arguments": {"arg',
        wellformed=False,
    ),
    Case(
        "bare-list",
        "tool",
        "granite",
        '[{"name": "func", "arguments": {}}]',
        '[{"name": "func", "arguments": {}}]',
        markers=GRANITE_TOOL_MARKERS,
    ),
    Case(
        "plain",
        "tool",
        "granite",
        "Use <|tool| or <tool> here <|tool_cal",
        "Use <|tool| or <tool> here <|tool_cal",
        markers=GRANITE_TOOL_MARKERS,
    ),
    Case("whitespace-only", "tool", "granite", " \n ", " \n ", markers=GRANITE_TOOL_MARKERS),
]


GRANITE32_MARKERS = (
    "Here is my thought process:",
    "Here's my thought process:",
    "Here is my response:",
    "Here's my response:",
)


def _gr(id: str, text: str, content: str, reasoning: str, **kw: object) -> Case:
    kw.setdefault("markers", GRANITE_REASONING_MARKERS)
    return Case(id, "reasoning", "granite", text, content, reasoning, **kw)  # type: ignore[arg-type]


GRANITE_REASONING = [
    _gr(
        "think-response",
        "<think>I'm\nthinking</think><response>Hello, world!\nWhat's up?</response>",
        "Hello, world!\nWhat's up?",
        "I'm\nthinking",
    ),
    _gr(
        "newlines-between",
        "<think>\nplan <b>\n</think>\n\n<response>\nAnswer < 3.\n</response>",
        "\nAnswer < 3.\n",
        "\nplan <b>\n",
    ),
    _gr("no-thinking", "Hello, world!\nWhat's up?", "Hello, world!\nWhat's up?", ""),
    _gr("response-unclosed", "<think>r</think><response>Hello", "Hello", "r"),
    _gr("response-only", " \n<response>Just this.</response>", "Just this.", ""),
    _gr(
        "then-tool-call",
        "<think>need weather</think><response>Checking.</response><|tool_call|>[{}]",
        "Checking.<|tool_call|>[{}]",
        "need weather",
    ),
    _gr("text-after-response", "<think>a</think><response>b</response>\nc", "b\nc", "a"),
    _gr("unclosed-think", "<think>still <respo", "", "still <respo"),
    _gr("response-cut-off", "<think>r</think>\n<resp", "\n<resp", "r"),
    _gr("close-cut-off", "<response>Use </respon", "Use </respon", ""),
    _gr(
        "response-not-first",
        "See the <response> and </response> tags.",
        "See the <response> and </response> tags.",
        "",
        wellformed=False,
    ),
    _gr("whitespace-only", "\n \n", "\n \n", ""),
    _gr("empty", "", "", ""),
    # Granite 3.2: plain-text separators (vLLM's tests/reasoning/test_granite_reasoning_parser.py
    # cases: the reasoning and the answer between and after the phrases, "Here's" or "Here is").
    _gr(
        "g32-phrases",
        "Here is my thought process:This is a reasoning section"
        "Here is my response:This is the rest",
        "This is the rest",
        "This is a reasoning section",
        markers=GRANITE32_MARKERS,
    ),
    _gr(
        "g32-heres",
        "Here's my thought process:\nFirst, 2+2.\nHere's my response:\n4",
        "\n4",
        "\nFirst, 2+2.\n",
        markers=GRANITE32_MARKERS,
    ),
    _gr(
        "g32-mixed-spellings",
        "Here is my thought process: a Here's my response: b",
        " b",
        " a ",
        markers=GRANITE32_MARKERS,
    ),
    # cut off by max_tokens inside the thought process: what was written is reasoning
    _gr("g32-cut-off", "Here is my thought process: still thinking", "", " still thinking"),
    # a phrase out of place is text, kept where it stands
    _gr(
        "g32-response-first",
        "Plain answer. Here is my response: more",
        "Plain answer. Here is my response: more",
        "",
        wellformed=False,
    ),
    _gr(
        "g32-thought-twice",
        "Here is my thought process: a Here's my thought process: b Here is my response: c",
        " c",
        " a Here's my thought process: b ",
        wellformed=False,
    ),
]

_QC_MARKERS = (
    qc.OPEN,
    qc.CLOSE,
    qc.FUNCTION,
    qc.FUNCTION_END,
    qc.PARAMETER,
    qc.PARAMETER_END,
)
QWEN3_CODER_TOOLS = TYPED_TOOLS


def _qc_call(name: str, *params: tuple[str, str]) -> str:
    """A call as Qwen3-Coder's chat template renders one."""
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params)
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


QWEN3_CODER = [
    # the block's closing tag inside a parameter's value is part of the value; a parameter
    # that its call's end closes (no </parameter>) does not hold the block open
    Case(
        "close-tag-in-value",
        "tool",
        "qwen3_coder",
        _qc_call("get_weather", ("city", "a </tool_call> b")),
        "",
        calls=[("get_weather", {"city": "a </tool_call> b"})],
        tools=QWEN3_CODER_TOOLS,
    ),
    Case(
        "parameter-closed-by-function-end",
        "tool",
        "qwen3_coder",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</function>\n</tool_call>",
        "",
        calls=[("get_weather", {"city": "Rome"})],
        tools=QWEN3_CODER_TOOLS,
    ),
    Case(
        "typed-by-schema",
        "tool",
        "qwen3_coder",
        "I'll check the weather.\n"
        + _qc_call(
            "get_weather",
            ("city", "Zürich"),
            ("days", "3"),
            ("scale", "1.5"),
            ("strict", "True"),
            ("tags", '["a", 1]'),
            ("filter", NESTED_JSON),
            ("limit", "null"),
        ),
        "I'll check the weather.\n",
        calls=[
            (
                "get_weather",
                {
                    "city": "Zürich",
                    "days": 3,
                    "scale": 1.5,
                    "strict": True,
                    "tags": ["a", 1],
                    "filter": NESTED,
                    "limit": None,
                },
            )
        ],
        tools=QWEN3_CODER_TOOLS,
        markers=_QC_MARKERS,
    ),
    Case(
        "parallel-untyped",
        "tool",
        "qwen3_coder",
        _qc_call("get_weather", ("city", "Rome"), ("days", "2")) + "\n" + _qc_call("now") + "\n",
        "",
        calls=[("get_weather", {"city": "Rome", "days": "2"}), ("now", {})],
        markers=_QC_MARKERS,
    ),
    Case(
        "multiline-code",
        "tool",
        "qwen3_coder",
        _qc_call("run", ("code", "\ndef lt(a, b):\n    return a < b  # <param or </para\n"))
        + "\nDone <b>.",
        "",  # text after the call is dropped (README)
        calls=[("run", {"code": "\ndef lt(a, b):\n    return a < b  # <param or </para\n"})],
        tools=QWEN3_CODER_TOOLS,
        markers=_QC_MARKERS,
    ),
    Case(
        "two-functions-one-block",
        "tool",
        "qwen3_coder",
        "<tool_call>\n<function=a>\n<parameter=x>\n1\n</parameter>\n</function>\n"
        "<function=b>\n</function>\n</tool_call>",
        "",
        calls=[("a", {"x": "1"}), ("b", {})],
        markers=_QC_MARKERS,
    ),
    Case(
        "unclosed-parameters",
        "tool",
        "qwen3_coder",
        "<tool_call>\n<function=get_weather>\n<parameter=days>\n4\n<parameter=city>\nOslo\n"
        "</function>\n</tool_call>",
        "",
        calls=[("get_weather", {"days": 4, "city": "Oslo"})],
        tools=QWEN3_CODER_TOOLS,
        markers=_QC_MARKERS,
    ),
    Case(
        "unclosed-at-end",
        "tool",
        "qwen3_coder",
        "Running it.<tool_call>\n<function=run>\n<parameter=code>\nprint('hi')\n",
        "Running it.",
        calls=[("run", {"code": "print('hi')"})],
        tools=QWEN3_CODER_TOOLS,
        markers=_QC_MARKERS,
    ),
    Case(
        "values-that-do-not-fit",
        "tool",
        "qwen3_coder",
        _qc_call(
            "get_weather",
            ("days", "three"),
            ("strict", "yes"),
            ("scale", "1e999"),
            ("tags", "[1, 2"),
            ("filter", "{'k': (1, 2), 'n': None}"),
            ("city", "null"),
        ),
        "",
        calls=[
            (
                "get_weather",
                {
                    "days": "three",
                    "strict": "yes",
                    "scale": "1e999",
                    "tags": "[1, 2",
                    "filter": {"k": [1, 2], "n": None},
                    "city": None,
                },
            )
        ],
        tools=QWEN3_CODER_TOOLS,
        markers=_QC_MARKERS,
    ),
    Case(
        "json-body",
        "tool",
        "qwen3_coder",
        'x <tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\n' + _qc_call("g"),
        'x <tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\n',
        calls=[("g", {})],
        wellformed=False,
    ),
    Case(
        "nameless-function",
        "tool",
        "qwen3_coder",
        "<tool_call>\n<function=>\n</function>\n</tool_call>",
        "<tool_call>\n<function=>\n</function>\n</tool_call>",
        wellformed=False,
    ),
    Case(
        "stray-text-in-block",
        "tool",
        "qwen3_coder",
        "<tool_call>\nsure\n<function=f>\n</function>\n</tool_call>",
        "<tool_call>\nsure\n<function=f>\n</function>\n</tool_call>",
        wellformed=False,
    ),
    Case(
        "plain",
        "tool",
        "qwen3_coder",
        "a <tool> b < c <function <tool_cal",
        "a <tool> b < c <function <tool_cal",
        markers=_QC_MARKERS,
    ),
]

# A stream that ends inside a block while the start of its close marker is held back: the
# held text is the start of the marker, and the block is read as if closed (vLLM's hermes and
# qwen3_coder parsers read an unclosed block's body: <tool_call>(.*) in hermes_tool_parser.py).
_CUT_HERMES = 'Sure.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_'
_CUT_NEMOTRON = 'Sure.<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</TOOL'
_CUT_QWEN3_CODER = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "</function>\n</tool_c"
)
CUT_CLOSE = [
    Case(
        "cut-close-marker",
        "tool",
        name,
        text,
        content,
        calls=[("get_weather", PARIS)],
        markers=markers,
        tools=tools,
    )
    for name, text, content, markers, tools in (
        ("hermes", _CUT_HERMES, "Sure.", HERMES_MARKERS, None),
        ("llama_nemotron_json", _CUT_NEMOTRON, "Sure.", NEMOTRON_MARKERS, None),
        ("qwen3_coder", _CUT_QWEN3_CODER, "", _QC_MARKERS, QWEN3_CODER_TOOLS),
    )
]

ALL: dict[str, list[Case]] = {
    "think": THINK,
    "harmony-reasoning": HARMONY_REASONING,
    "harmony-tools": HARMONY_TOOLS,
    "hermes": HERMES,
    "llama_nemotron_json": NEMOTRON,
    "llama3_json": LLAMA3_JSON,
    "pythonic": PYTHONIC,
    "mistral": MISTRAL,
    "deepseek_v3": DEEPSEEK,
    "deepseek_v31": DEEPSEEK_V31,
    "kimi_k2": KIMI,
    "glm45": GLM45,
    "granite-tools": GRANITE_TOOLS,
    "granite-reasoning": GRANITE_REASONING,
    "qwen3_coder": QWEN3_CODER,
    "cut-close-marker": CUT_CLOSE,
    "after-calls": AFTER_CALLS,
    **ALL_2026,
}
ALL_CASES = [c for cases in ALL.values() for c in cases]


def case_id(case: Case) -> str:
    return f"{case.parser}-{case.kind[0]}-{case.id}"
