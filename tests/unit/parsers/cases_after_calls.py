"""Text after and between tool calls, and a block left open at the end of the stream.

The rule (README, parser section): content is the text before the first call; text after a
call, and between calls, is dropped, streamed and not. vLLM's and SGLang's parsers agree on
that when they do not stream (their answer's content is the text before the first call); they
differ only when streaming. A block still open at the end of the stream is a call only where
the references read an unclosed block (vLLM's hermes and qwen3_coder parsers); in GLM-4.5,
Kimi K2 and DeepSeek V3 it is no call, as both references need the closing marker, and when it
is no call its text is content, as a malformed block's is (nothing the model wrote is lost;
after a call it is dropped). Every case names the reference it follows; test_cases.py checks
the non-streamed parse and test_streaming.py that every chunking gives the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from neutrino.text.parsers import deepseek as ds
from neutrino.text.parsers import glm45 as glm
from neutrino.text.parsers import kimi_k2 as kimi
from neutrino.text.parsers import qwen3_coder as qc
from tests.unit.parsers.support import Case

_HERMES = ("<tool_call>", "</tool_call>")
_NEMOTRON = ("<TOOLCALL>", "</TOOLCALL>")
_DS = (ds.CALLS_BEGIN, ds.CALLS_END, ds.CALL_BEGIN, ds.CALL_END, ds.SEP)
_KIMI = (kimi.SECTION_BEGIN, kimi.SECTION_END, kimi.CALL_BEGIN, kimi.CALL_END, kimi.ARG_BEGIN)
_GLM = (glm.OPEN, glm.CLOSE, glm.ARG_KEY, glm.ARG_KEY_END, glm.ARG_VALUE, glm.ARG_VALUE_END)
_QC = (qc.OPEN, qc.CLOSE, qc.FUNCTION, qc.FUNCTION_END, qc.PARAMETER, qc.PARAMETER_END)

_VLLM = "vllm/entrypoints/openai/tool_parsers/"
_SGL = "python/sglang/srt/function_call/"
HERMES_REF = (
    f"{_VLLM}hermes_tool_parser.py extract_tool_calls (content: text before the first "
    f"<tool_call>); {_SGL}qwen25_detector.py detect_and_parse (normal_text: the same)"
)
HERMES_UNCLOSED_REF = (
    f"{_VLLM}hermes_tool_parser.py tool_call_regex '<tool_call>(.*)' reads an unclosed block"
)
NEMOTRON_REF = (
    f"{_VLLM}hermes_tool_parser.py's reading (content: the text before the first block), "
    "applied to <TOOLCALL> blocks: the README's rule"
)
LLAMA3_REF = f"{_VLLM}llama_tool_parser.py; {_SGL}llama32_detector.py (calls, then no content)"
PYTHONIC_REF = f"{_VLLM}pythonic_tool_parser.py; {_SGL}pythonic_detector.py (the list only)"
MISTRAL_REF = (
    f"{_VLLM}mistral_tool_parser.py (content: text before [TOOL_CALLS]); "
    f"{_SGL}mistral_detector.py (normal_text: the same)"
)
DEEPSEEK_REF = (
    f"{_VLLM}deepseekv3_tool_parser.py (content before the calls; a call needs its end "
    f"marker); {_SGL}deepseekv3_detector.py (the same)"
)
KIMI_REF = (
    f"{_VLLM}kimi_k2_tool_parser.py (content before the section; tool_call_regex needs "
    f"<|tool_call_end|>); {_SGL}kimik2_detector.py (the same)"
)
GLM_REF = (
    f"{_VLLM}glm4_moe_tool_parser.py and {_SGL}glm4_moe_detector.py: content before the "
    "first <tool_call>; calls only as <tool_call>.*?</tool_call>"
)
GRANITE_REF = (
    f"{_VLLM}granite_tool_parser.py (content None once it finds calls; its streaming sends no "
    "text after the list)"
)
QWEN3_CODER_REF = (
    f"{_VLLM}qwen3coder_tool_parser.py (content before the first <tool_call>; its regexes "
    "also read an unclosed <tool_call> and <function=…>)"
)

_B, _E, _CB, _CE, _S = ds.CALLS_BEGIN, ds.CALLS_END, ds.CALL_BEGIN, ds.CALL_END, ds.SEP
_KB, _KE, _KCB, _KCE, _KA = (
    kimi.SECTION_BEGIN,
    kimi.SECTION_END,
    kimi.CALL_BEGIN,
    kimi.CALL_END,
    kimi.ARG_BEGIN,
)
_H_A = '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
_H_B = '<tool_call>{"name": "b", "arguments": {"x": 1}}</tool_call>'
_N_A = '<TOOLCALL>[{"name": "a", "arguments": {}}]</TOOLCALL>'
_N_B = '<TOOLCALL>[{"name": "b", "arguments": {"x": 1}}]</TOOLCALL>'
_K_A = f"{_KCB}functions.a:0{_KA}{{}}{_KCE}"
_K_B = f'{_KCB}functions.b:1{_KA}{{"x": 1}}{_KCE}'
_Q_A = "<tool_call>\n<function=a>\n</function>\n</tool_call>"
_Q_B = "<tool_call>\n<function=b>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>"
_A: tuple[str, dict[str, Any]] = ("a", {})
_B1: tuple[str, dict[str, Any]] = ("b", {"x": 1})
_B1S: tuple[str, dict[str, Any]] = (
    "b",
    {"x": "1"},
)  # qwen3_coder without a schema: a parameter is a string


def _c(
    id: str,
    parser: str,
    text: str,
    content: str,
    calls: Sequence[tuple[str, Mapping[str, Any]]],
    markers: tuple[str, ...],
    reference: str,
    ids: tuple[str, ...] | None = None,
) -> Case:
    return Case(
        id,
        "tool",
        parser,
        text,
        content,
        calls=[(name, dict(args)) for name, args in calls],
        markers=markers,
        ids=ids,
        reference=reference,
    )


AFTER_CALLS = [
    # hermes (Hermes 2 Pro / 3, Qwen2.5, Qwen3)
    _c(
        "after",
        "hermes",
        f"Checking.\n{_H_A}\nIt is sunny.",
        "Checking.\n",
        [_A],
        _HERMES,
        HERMES_REF,
    ),
    _c("between", "hermes", f"{_H_A}\nand then\n{_H_B}", "", [_A, _B1], _HERMES, HERMES_REF),
    _c(
        "unclosed-complete",
        "hermes",
        'Hi <tool_call>{"name": "a", "arguments": {}}',
        "Hi ",
        [_A],
        _HERMES,
        HERMES_UNCLOSED_REF,
    ),
    _c(
        "unclosed-after-call",
        "hermes",
        f'{_H_A}<tool_call>{{"name": "b", "argu',
        "",
        [_A],
        _HERMES,
        HERMES_REF,
    ),
    # llama_nemotron_json
    _c("after", "llama_nemotron_json", f"{_N_A} Done.", "", [_A], _NEMOTRON, NEMOTRON_REF),
    _c(
        "between",
        "llama_nemotron_json",
        f"{_N_A} and {_N_B}",
        "",
        [_A, _B1],
        _NEMOTRON,
        NEMOTRON_REF,
    ),
    _c(
        "unclosed-cut",
        "llama_nemotron_json",
        'Hi <TOOLCALL>[{"name": "a", "argu',
        'Hi <TOOLCALL>[{"name": "a", "argu',  # no call: the text is content, not lost
        [],
        (),
        NEMOTRON_REF,
    ),
    # llama3_json
    _c(
        "between",
        "llama3_json",
        '{"name": "a", "parameters": {}} and then <|python_tag|>'
        '{"name": "b", "parameters": {"x": 1}}',
        "",
        [_A, _B1],
        ("<|python_tag|>",),
        LLAMA3_REF,
    ),
    # pythonic (Llama 4's tags)
    _c(
        "after",
        "pythonic",
        "<|python_start|>[a()]<|python_end|> and more",
        "",
        [_A],
        ("<|python_start|>", "<|python_end|>"),
        PYTHONIC_REF,
    ),
    # mistral (v13+ format)
    _c(
        "between",
        "mistral",
        'Hi[TOOL_CALLS]a[ARGS]{} and [TOOL_CALLS]b[ARGS]{"x": 1}',
        "Hi",
        [_A, _B1],
        ("[TOOL_CALLS]", "[ARGS]"),
        MISTRAL_REF,
    ),
    _c(
        "after",
        "mistral",
        "[TOOL_CALLS]a[ARGS]{} Done.",
        "",
        [_A],
        ("[TOOL_CALLS]", "[ARGS]"),
        MISTRAL_REF,
    ),
    # deepseek_v3 / deepseek_v31
    _c(
        "between-sections",
        "deepseek_v3",
        f'{_B}{_CB}a{_S}{{}}{_CE}{_E} and {_B}{_CB}b{_S}{{"x": 1}}{_CE}{_E}',
        "",
        [_A, _B1],
        _DS,
        DEEPSEEK_REF,
    ),
    _c(
        "between-in-section",
        "deepseek_v31",
        f'{_B}{_CB}a{_S}{{}}{_CE} stray {_CB}b{_S}{{"x": 1}}{_CE}{_E}\nDone.',
        "",
        [_A, _B1],
        _DS,
        DEEPSEEK_REF,
    ),
    _c(
        "unclosed-after-call",
        "deepseek_v31",
        f'Hi{_B}{_CB}a{_S}{{}}{_CE}{_CB}b{_S}{{"x": 1}}',
        "Hi",
        [_A],
        _DS,
        DEEPSEEK_REF,
    ),
    # kimi_k2
    _c(
        "between-and-after",
        "kimi_k2",
        f"{_KB}{_K_A} and {_K_B}{_KE}\nDone.",
        "",
        [_A, _B1],
        _KIMI,
        KIMI_REF,
        ids=("functions.a:0", "functions.b:1"),
    ),
    _c(
        "unclosed",
        "kimi_k2",
        f'Hi{_KB}{_KCB}functions.a:0{_KA}{{"x": 1}}',
        f'Hi{_KCB}functions.a:0{_KA}{{"x": 1}}',  # no call: content (the section's marker not)
        [],
        (),
        KIMI_REF,
    ),
    _c(
        "unclosed-after-call",
        "kimi_k2",
        f"{_KB}{_K_A}{_KCB}functions.b:1{_KA}{{}}",
        "",
        [_A],
        _KIMI,
        KIMI_REF,
        ids=("functions.a:0",),
    ),
    # glm45
    _c(
        "between-and-after",
        "glm45",
        "<tool_call>a\n</tool_call> and <tool_call>b\n<arg_key>x</arg_key>\n<arg_value>1"
        "</arg_value>\n</tool_call>\nDone.",
        "",
        [_A, _B1],
        _GLM,
        GLM_REF,
    ),
    _c(
        "unclosed-complete",
        "glm45",
        "Hi\n<tool_call>b\n<arg_key>x</arg_key>\n<arg_value>1</arg_value>\n",
        "Hi\n<tool_call>b\n<arg_key>x</arg_key>\n<arg_value>1</arg_value>\n",  # no call: content
        [],
        (),
        GLM_REF,
    ),
    _c(
        "unclosed-after-call",
        "glm45",
        "<tool_call>a\n</tool_call><tool_call>b\n<arg_key>x",
        "",
        [_A],
        _GLM,
        GLM_REF,
    ),
    # granite
    _c(
        "between",
        "granite",
        '<|tool_call|>[{"name": "a", "arguments": {}}] and <|tool_call|>'
        '[{"name": "b", "arguments": {"x": 1}}]\nDone.',
        "",
        [_A, _B1],
        ("<|tool_call|>",),
        GRANITE_REF,
    ),
    # qwen3_coder
    _c(
        "between-and-after",
        "qwen3_coder",
        f"{_Q_A} and {_Q_B}\nDone.",
        "",
        [_A, _B1S],
        _QC,
        QWEN3_CODER_REF,
    ),
    _c(
        "unclosed-complete",
        "qwen3_coder",
        "Hi<tool_call>\n<function=b>\n<parameter=x>\n1\n</parameter>\n",
        "Hi",
        [_B1S],
        _QC,
        QWEN3_CODER_REF,
    ),
]
