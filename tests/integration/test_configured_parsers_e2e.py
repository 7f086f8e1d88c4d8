"""Parsers configured per model, end to end through a real mock_ie and the openai SDK.

Kimi K2's parser (its own family is served too: tests/integration/test_kimi_k2.py),
Mistral's [THINK] reasoning (Magistral's, which no family names), MiniMax M2's thinking
and XML calls (typed by the tools' schemas) and DeepSeek V3.2's DSML calls run here on
models configured with
``[model] tool_parsers`` / ``reasoning_parsers`` (as vLLM's --tool-call-parser and
--reasoning-parser): the mock spells the markers as text, the detokenizer gives them back,
and the parsers must turn them into OpenAI tool calls and reasoning, streamed and not, with
nothing leaking into content.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from neutrino.text.parsers import dsml
from neutrino.text.parsers import kimi_k2 as kimi
from tests.support.accumulate import accumulate
from tests.support.procs import MockIE, NeutrinoProc, serving

REPLY = (
    f"Checking both.{kimi.SECTION_BEGIN}\n"
    f'{kimi.CALL_BEGIN}functions.get_weather:0{kimi.ARG_BEGIN}{{"city": "Zürich"}}{kimi.CALL_END}'
    f"\n{kimi.CALL_BEGIN}functions.get_time:1{kimi.ARG_BEGIN}{{}}{kimi.CALL_END}\n"
    f"{kimi.SECTION_END}"
)
TOOLS: Any = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
]
CONFIG = """
[model]
tool_parsers = { "qwen2.5-mock" = "kimi_k2", "minimax-mock" = "minimax_m2", \
"dsml-mock" = "deepseek_v32", "seed-mock" = "seed_oss" }
reasoning_parsers = { "llama3.2-mock" = "mistral", "minimax-mock" = "minimax_m2", \
"dsml-mock" = "deepseek_v3", "seed-mock" = "seed_oss" }
"""
DSML_REPLY = (
    f'<think>Two calls.</think>Calling.\n\n{dsml.BLOCK_OPEN}\n{dsml.INVOKE}"get_weather">\n'
    f'{dsml.PARAMETER}"city" string="true">Zürich{dsml.PARAMETER_END}\n'
    f'{dsml.PARAMETER}"days" string="false">3{dsml.PARAMETER_END}\n{dsml.INVOKE_END}\n'
    f'{dsml.INVOKE}"get_time">\n{dsml.INVOKE_END}\n{dsml.BLOCK_CLOSE}'
)
MINIMAX_THINKING = "\nThe user wants Zürich's weather for 3 days.\n"
SEED_REPLY = (
    "<seed:think>Weather, then time.</seed:think>Checking.\n<seed:tool_call>\n"
    "<function=get_weather>\n<parameter=city>Zürich</parameter>\n<parameter=days>3</parameter>"
    "\n</function>\n</seed:tool_call><seed:tool_call>\n<function=get_time>\n</function>\n"
    "</seed:tool_call>"
)
MINIMAX_REPLY = (
    f"<think>{MINIMAX_THINKING}</think>\n\nLooking it up."
    '\n<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Zürich'
    '</parameter>\n<parameter name="days">3</parameter>\n</invoke>\n<invoke name="get_time">'
    "\n</invoke>\n</minimax:tool_call>"
)
_MINIMAX_PROPERTIES = {"city": {"type": "string"}, "days": {"type": "integer"}}
MINIMAX_TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": _MINIMAX_PROPERTIES},
        },
    },
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
]
THINKING = "[THINK]Zürich is in Switzerland; 👍 answer briefly.[/THINK]It is sunny in Zürich."
WANT = [("get_weather", {"city": "Zürich"}), ("get_time", {})]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NeutrinoProc]:
    work: Path = tmp_path_factory.mktemp("kimi")
    script = work / "script.json"
    rules = [{"match": "minimax", "reply": MINIMAX_REPLY}, {"match": "dsml", "reply": DSML_REPLY},
             {"match": "seed:", "reply": SEED_REPLY},
             {"match": "weather", "reply": REPLY},
             {"match": "think", "reply": THINKING}]  # fmt: skip
    script.write_text(json.dumps({"rules": rules}))
    names = ("qwen2.5-mock:qwen2:32768", "llama3.2-mock:llama3:131072",
             "minimax-mock:qwen2:32768", "dsml-mock:qwen2:32768",
             "seed-mock:qwen2:32768")  # fmt: skip
    models = [arg for name in names for arg in ("--model", name)]
    mock = MockIE(work, "--script", str(script), *models)
    with serving(mock.start(), NeutrinoProc(work, "--engine", mock.socket, config=CONFIG)) as s:
        yield s


def _ask(server: NeutrinoProc, stream: bool) -> Any:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    return client.chat.completions.create(
        model="qwen2.5-mock",
        messages=[{"role": "user", "content": "weather and time?"}],
        tools=TOOLS,
        max_tokens=400,
        stream=stream,
    )


def test_kimi_calls_non_streamed(server: NeutrinoProc) -> None:
    r = _ask(server, stream=False)
    msg = r.choices[0].message
    assert [(c.function.name, json.loads(c.function.arguments)) for c in msg.tool_calls] == WANT
    assert msg.content == "Checking both."
    assert r.choices[0].finish_reason == "tool_calls"


def test_kimi_stream_accumulates_to_the_non_streamed_message(server: NeutrinoProc) -> None:
    streamed = accumulate(_ask(server, stream=True))
    content = streamed.content
    whole = _ask(server, stream=False).choices[0].message
    assert content == whole.content and streamed.finish_reason == "tool_calls"
    got = streamed.calls
    # Ids are per request (these are two requests): each call has one, and they differ.
    assert all(c.id for c in got) and len({c.id for c in got}) == len(got)
    assert [(c.name, c.arguments) for c in got] == [
        (c.function.name, c.function.arguments) for c in whole.tool_calls
    ]
    assert not any(m in content for m in (kimi.SECTION_BEGIN, kimi.CALL_BEGIN, "functions."))


def test_mistral_reasoning_streamed_and_not(server: NeutrinoProc) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    ask: Any = {
        "model": "llama3.2-mock",
        "messages": [{"role": "user", "content": "think first"}],
        "max_tokens": 400,
    }
    msg: Any = client.chat.completions.create(**ask).choices[0].message
    assert msg.reasoning_content == "Zürich is in Switzerland; 👍 answer briefly."
    assert msg.content == "It is sunny in Zürich."
    reasoning, content = "", ""
    for chunk in client.chat.completions.create(**ask, stream=True):
        for choice in chunk.choices:
            delta: Any = choice.delta
            reasoning += getattr(delta, "reasoning_content", None) or ""
            content += delta.content or ""
    assert (reasoning, content) == (msg.reasoning_content, msg.content)


def test_minimax_m2_thinking_and_typed_calls_streamed_and_not(server: NeutrinoProc) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    ask: Any = {
        "model": "minimax-mock",
        "messages": [{"role": "user", "content": "minimax: weather in Zürich?"}],
        "tools": MINIMAX_TOOLS,
        "max_tokens": 400,
    }
    r: Any = client.chat.completions.create(**ask)
    msg = r.choices[0].message
    assert msg.reasoning_content == "\nThe user wants Zürich's weather for 3 days.\n"
    assert msg.content == "\n\nLooking it up.\n" and r.choices[0].finish_reason == "tool_calls"
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in msg.tool_calls]
    assert calls == [("get_weather", {"city": "Zürich", "days": 3}), ("get_time", {})]
    streamed = accumulate(client.chat.completions.create(**ask, stream=True))
    assert streamed.reasoning == msg.reasoning_content and streamed.content == msg.content
    assert [(c.name, json.loads(c.arguments)) for c in streamed.calls] == calls
    assert "<invoke" not in streamed.content and streamed.finish_reason == "tool_calls"


def test_deepseek_v32_dsml_calls_streamed_and_not(server: NeutrinoProc) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    ask: Any = {
        "model": "dsml-mock",
        "messages": [{"role": "user", "content": "dsml: weather in Zürich?"}],
        "tools": MINIMAX_TOOLS,
        "max_tokens": 400,
    }
    msg: Any = client.chat.completions.create(**ask).choices[0].message
    assert (msg.reasoning_content, msg.content) == ("Two calls.", "Calling.\n\n")
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in msg.tool_calls]
    assert calls == [("get_weather", {"city": "Zürich", "days": 3}), ("get_time", {})]
    streamed = accumulate(client.chat.completions.create(**ask, stream=True))
    assert (streamed.reasoning, streamed.content) == (msg.reasoning_content, msg.content)
    assert [(c.name, json.loads(c.arguments)) for c in streamed.calls] == calls
    assert "DSML" not in streamed.content and streamed.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("model", "prompt", "thinking"),
    [
        ("minimax-mock", "minimax: weather in Zürich?", MINIMAX_THINKING),
        ("dsml-mock", "dsml: weather in Zürich?", "Two calls."),
        ("seed-mock", "seed: weather in Zürich?", "Weather, then time."),
    ],
)  # fmt: skip
def test_new_formats_through_the_anthropic_sdk(
    server: NeutrinoProc, model: str, prompt: str, thinking: str
) -> None:
    """Messages API: the thinking block, the text before the calls, and tool_use blocks with
    typed inputs, whole and streamed."""
    client = anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0)
    tools: Any = [{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]}
                  for t in MINIMAX_TOOLS]  # fmt: skip
    ask: Any = {"model": model, "max_tokens": 400, "tools": tools,
                "messages": [{"role": "user", "content": prompt}]}  # fmt: skip
    msg = client.messages.create(**ask)
    assert [b.type for b in msg.content] == ["thinking", "text", "tool_use", "tool_use"]
    assert msg.content[0].type == "thinking" and msg.content[0].thinking == thinking
    uses = [(b.name, b.input) for b in msg.content if b.type == "tool_use"]
    assert uses == [("get_weather", {"city": "Zürich", "days": 3}), ("get_time", {})]
    assert msg.stop_reason == "tool_use"
    with client.messages.stream(**ask) as stream:
        final = stream.get_final_message()
    assert [(b.name, b.input) for b in final.content if b.type == "tool_use"] == uses
    assert final.content[0].type == "thinking" and final.content[0].thinking == thinking
