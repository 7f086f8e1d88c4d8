"""Reasoning and tool calls parsed from raw model output, streamed and not, via the SDK."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.chat import (
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionToolChoiceOptionParam,
)

from tests.support.accumulate import accumulate
from tests.support.openapi import validate
from tests.support.procs import MockIE, NeutrinoProc

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
RULES = [
    {
        "match": "weather",
        "reply": 'Let me check.<tool_call>\n{"name": "get_weather", '
        '"arguments": {"city": "Zürich"}}\n</tool_call><tool_call>\n{"name": "get_weather", '
        '"arguments": {"city": "Genève"}}\n</tool_call>',
    },
    {
        "match": "greet",
        "reply": "<think>The user wants a greeting; keep it short.</think>Hello there!",
    },
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NeutrinoProc]:
    work: Path = tmp_path_factory.mktemp("parsing")
    script = work / "script.json"
    script.write_text(json.dumps({"rules": RULES}))
    mock = MockIE(
        work,
        "--script",
        str(script),
        "--model",
        "qwen2.5-mock:qwen2:32768",
        "--model",
        "qwen3-mock:qwen3:32768",
    ).start()
    neutrino = NeutrinoProc(work, "--engine", mock.socket)
    try:
        yield neutrino.start()
    finally:
        neutrino.stop()
        mock.stop()


@pytest.fixture(scope="module")
def client(server: NeutrinoProc) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)


def ask(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def function_calls(message: ChatCompletionMessage) -> list[ChatCompletionMessageFunctionToolCall]:
    """The message's tool calls, each of which must be a function call."""
    calls = []
    for c in message.tool_calls or []:
        assert isinstance(c, ChatCompletionMessageFunctionToolCall), c
        calls.append(c)
    return calls


def test_tool_calls_stream_equals_non_stream(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model="qwen2.5-mock", messages=ask("weather?"), tools=TOOLS, max_tokens=200
    )
    validate(r.model_dump(mode="json", exclude_unset=True), "CreateChatCompletionResponse")
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls"
    assert msg.content == "Let me check."
    calls = function_calls(msg)
    assert [c.function.name for c in calls] == ["get_weather", "get_weather"]
    assert [json.loads(c.function.arguments) for c in calls] == [
        {"city": "Zürich"},
        {"city": "Genève"},
    ]
    assert len({c.id for c in calls}) == 2
    streamed = accumulate(
        client.chat.completions.create(
            model="qwen2.5-mock", messages=ask("weather?"), tools=TOOLS, max_tokens=200, stream=True
        ),
        check=lambda chunk: validate(
            chunk.model_dump(mode="json", exclude_unset=True), "CreateChatCompletionStreamResponse"
        ),
    )
    assert "<tool_call>" not in streamed.content and streamed.content == msg.content
    assert streamed.finish_reason == "tool_calls"
    assert [(v.name, v.arguments) for v in streamed.calls] == [
        (c.function.name, c.function.arguments) for c in calls
    ]
    ids = [v.id for v in streamed.calls]
    assert all(re.fullmatch(r"call_[0-9a-f]{24}_\d", i) for i in ids) and len(set(ids)) == 2


def test_without_tools_the_text_is_content(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model="qwen2.5-mock", messages=ask("weather?"), max_tokens=200
    )
    assert "<tool_call>" in (r.choices[0].message.content or "")
    r = client.chat.completions.create(
        model="qwen2.5-mock",
        messages=ask("weather?"),
        tools=TOOLS,
        tool_choice="none",
        max_tokens=200,
    )
    assert not r.choices[0].message.tool_calls


def test_reasoning_split_stream_and_not(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(model="qwen3-mock", messages=ask("greet me"), max_tokens=200)
    msg: Any = r.choices[0].message
    assert msg.content == "Hello there!"
    assert msg.model_extra["reasoning_content"] == "The user wants a greeting; keep it short."
    assert r.usage is not None and r.usage.completion_tokens_details is not None
    assert r.usage.completion_tokens_details.reasoning_tokens == 10
    reasoning, content = "", ""
    for chunk in client.chat.completions.create(
        model="qwen3-mock", messages=ask("greet me"), max_tokens=200, stream=True
    ):
        for c in chunk.choices:
            extra: Any = c.delta.model_extra or {}
            reasoning += extra.get("reasoning_content") or ""
            content += c.delta.content or ""
    assert (reasoning, content) == (msg.model_extra["reasoning_content"], msg.content)
    raw = client.chat.completions.create(
        model="qwen3-mock",
        messages=ask("greet me"),
        max_tokens=200,
        extra_body={"reasoning_format": "raw"},
    )
    assert (raw.choices[0].message.content or "").startswith("<think>")
    hidden: Any = (
        client.chat.completions.create(
            model="qwen3-mock",
            messages=ask("greet me"),
            max_tokens=200,
            extra_body={"reasoning_format": "hidden"},
        )
        .choices[0]
        .message
    )
    assert hidden.content == "Hello there!" and not hidden.model_extra.get("reasoning_content")


def test_bad_tool_requests(client: openai.OpenAI) -> None:
    for kwargs in (
        {"tools": [{"type": "function"}]},
        {"tools": TOOLS, "tool_choice": "sometimes"},
        {"extra_body": {"reasoning_format": "loud"}},
    ):
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="qwen2.5-mock", messages=ask("hi"), **kwargs)


def test_forced_tool_choice(client: openai.OpenAI) -> None:
    choices: list[ChatCompletionToolChoiceOptionParam] = [
        {"type": "function", "function": {"name": "get_weather"}},
        "required",
    ]
    for choice in choices:
        r = client.chat.completions.create(
            model="qwen2.5-mock",
            messages=ask("anything"),
            tools=TOOLS,
            tool_choice=choice,
            max_tokens=200,
        )
        calls = function_calls(r.choices[0].message)
        assert [c.function.name for c in calls] == ["get_weather"]
        args = json.loads(calls[0].function.arguments)
        assert isinstance(args.get("city"), str)  # decoded under the parameters' schema
        assert r.choices[0].finish_reason == "tool_calls" and not r.choices[0].message.content
        streamed = accumulate(
            client.chat.completions.create(
                model="qwen2.5-mock",
                messages=ask("anything"),
                tools=TOOLS,
                tool_choice=choice,
                max_tokens=200,
                stream=True,
            )
        )
        assert not streamed.content and streamed.decoded_calls() == [("get_weather", args)]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model="qwen2.5-mock",
            messages=ask("x"),
            tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "nope"}},
        )
