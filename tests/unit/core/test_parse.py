"""The table-driven request parser: values, cross-field rules and the param of each 400."""

from __future__ import annotations

import json
from typing import Any

import pytest

from neutrino.config import LimitsConfig
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.http.openai.parse import parse_chat, parse_completion
from neutrino.pipeline.chat import FunctionCall, ToolChoice
from neutrino.pipeline.request import tool_guided
from tests.support import requests as view

LIMITS = LimitsConfig()
MSG = [{"role": "user", "content": "hi"}]


def chat(**kw: Any) -> dict[str, Any]:
    return {"model": "m", "messages": MSG, **kw}


def test_defaults_and_unknown_fields_ignored() -> None:
    req = parse_chat(chat(some_future_field={"x": 1}, metadata=None), LIMITS)
    assert (req.model, req.kind, view.messages(req)) == ("m", "chat", MSG)
    s = req.sampling
    assert (s.temperature, s.top_p, s.top_k, s.max_tokens, req.n) == (1.0, 1.0, -1, None, 1)
    assert req.request_id.startswith("chatcmpl-")
    assert not req.stream and not s.logprobs and req.chat.add_generation_prompt


def test_values_are_stored() -> None:
    req = parse_chat(
        chat(
            temperature=0,
            top_p=0.5,
            top_k=0,
            seed=-1,
            stop="END",
            n=2,
            stream=True,
            stream_options={"include_usage": True},
            logprobs=True,
            top_logprobs=3,
            ignore_eos=True,
            min_tokens=2,
            stop_token_ids=[7],
            user="u",
        ),
        LIMITS,
    )
    s = req.sampling
    assert s.temperature == 0.0 and isinstance(s.temperature, float)
    assert (s.top_p, s.top_k, s.seed, req.stops.strings, req.n) == (
        0.5,
        -1,
        (1 << 64) - 1,
        ("END",),
        2,
    )
    assert req.stream and req.include_usage and s.logprobs and s.top_logprobs == 3
    assert s.ignore_eos and s.min_tokens == 2 and req.stops.token_ids == (7,) and req.user == "u"


@pytest.mark.parametrize("order", ["completion_first", "max_tokens_first"])
def test_max_completion_tokens_wins_in_any_order(order: str) -> None:
    body: dict[str, Any] = {"model": "m", "messages": MSG}
    pairs = [("max_completion_tokens", 5), ("max_tokens", 9)]
    if order == "max_tokens_first":
        pairs.reverse()
    body.update(pairs)
    assert parse_chat(body, LIMITS).sampling.max_tokens == 5


def test_reasoning_effort_joins_template_kwargs() -> None:
    req = parse_chat(chat(reasoning_effort="low", chat_template_kwargs={"x": 1}), LIMITS)
    assert req.chat.template_kwargs == {"x": 1, "reasoning_effort": "low"}
    req = parse_chat(
        chat(chat_template_kwargs={"reasoning_effort": "high"}, reasoning_effort="low"), LIMITS
    )
    assert req.chat.template_kwargs == {"reasoning_effort": "high"}


def test_tool_choice_is_typed_and_the_pipeline_builds_its_schema() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    req = parse_chat(chat(tool_choice="required", tools=tools), LIMITS)
    assert req.tools.choice == ToolChoice("required") and req.output.guided is None
    guided = tool_guided(req)
    assert guided is not None and json.loads(guided.json_schema)["type"] == "array"
    named = {"type": "function", "function": {"name": "f"}}
    req = parse_chat(chat(tool_choice=named, tools=tools), LIMITS)
    assert req.tools.choice == ToolChoice("named", "f")
    guided = tool_guided(req)
    assert guided is not None and json.loads(guided.json_schema) == {"type": "object"}
    req = parse_chat(chat(tool_choice="none", tools=tools), LIMITS)
    assert req.tools.choice == ToolChoice("none") and tool_guided(req) is None


def test_completion_fields() -> None:
    req = parse_completion(
        {"model": "m", "prompt": ["hello"], "logprobs": 2, "echo": False}, LIMITS
    )
    s = req.sampling
    assert (req.text_prompt.text, s.logprobs, s.top_logprobs, s.max_tokens) == (
        "hello",
        True,
        2,
        16,
    )
    req = parse_completion({"model": "m", "prompt": [1, 2, 3], "max_tokens": 4}, LIMITS)
    assert (req.text_prompt.ids, req.sampling.max_tokens, req.request_id[:5]) == (
        (1, 2, 3),
        4,
        "cmpl-",
    )


BAD_CHAT: list[tuple[dict[str, Any], str | None, ErrorKind]] = [
    ({"messages": MSG}, "model", ErrorKind.BAD_REQUEST),
    (chat(model=["m"]), "model", ErrorKind.BAD_REQUEST),
    ({"model": "m"}, "messages", ErrorKind.BAD_REQUEST),
    (chat(messages=None), "messages", ErrorKind.BAD_REQUEST),
    (
        chat(messages=[{"role": ["user"], "content": "x"}]),
        "messages[0].role",
        ErrorKind.BAD_REQUEST,
    ),
    (chat(messages=[{"role": "user"}]), "messages[0].content", ErrorKind.BAD_REQUEST),
    (
        chat(messages=[{"role": "assistant", "content": None, "tool_calls": "x"}]),
        "messages[0].tool_calls",
        ErrorKind.BAD_REQUEST,
    ),
    (
        chat(messages=[{"role": "assistant", "content": "", "tool_calls": [1, 2]}]),
        "messages[0].tool_calls[0]",
        ErrorKind.BAD_REQUEST,
    ),
    (
        chat(messages=[{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}, {}]}]),
        "messages[0].tool_calls[1]",
        ErrorKind.BAD_REQUEST,
    ),
    (
        chat(
            messages=[
                {"role": "user", "content": "hi"},
                {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 3}}]},
            ]
        ),
        "messages[1].tool_calls[0].function.arguments",
        ErrorKind.BAD_REQUEST,
    ),
    (
        chat(
            messages=[{"role": "assistant", "tool_calls": [{"id": 7, "function": {"name": "f"}}]}]
        ),
        "messages[0].tool_calls[0].id",
        ErrorKind.BAD_REQUEST,
    ),
    (
        chat(messages=[{"role": "user", "content": [{"type": "audio"}]}]),
        "messages[0].content[0]",
        ErrorKind.UNSUPPORTED,
    ),
    (chat(best_of=2), "best_of", ErrorKind.UNSUPPORTED),
    (chat(n=0), "n", ErrorKind.BAD_REQUEST),
    (chat(n=LIMITS.max_n + 1), "n", ErrorKind.BAD_REQUEST),
    (chat(top_p=0), "top_p", ErrorKind.BAD_REQUEST),
    (chat(top_k=-2), "top_k", ErrorKind.BAD_REQUEST),
    (chat(seed=True), "seed", ErrorKind.BAD_REQUEST),
    (chat(stop=[""]), "stop", ErrorKind.BAD_REQUEST),
    (chat(stop=["x"] * (LIMITS.max_stop_sequences + 1)), "stop", ErrorKind.BAD_REQUEST),
    (chat(stop="x" * (LIMITS.max_stop_chars + 1)), "stop", ErrorKind.BAD_REQUEST),
    (chat(stream_options={"include_usage": True}), "stream_options", ErrorKind.BAD_REQUEST),
    (chat(stream=True, stream_options=[]), "stream_options", ErrorKind.BAD_REQUEST),
    (chat(top_logprobs=2), "top_logprobs", ErrorKind.BAD_REQUEST),
    (chat(logprobs=True, top_logprobs=21), "top_logprobs", ErrorKind.BAD_REQUEST),
    (chat(max_completion_tokens=0), "max_completion_tokens", ErrorKind.BAD_REQUEST),
    (chat(tool_choice="required"), "tool_choice", ErrorKind.BAD_REQUEST),
    (chat(tools=[{"type": "function"}]), "tools[0]", ErrorKind.BAD_REQUEST),
    (chat(reasoning_format="short"), "reasoning_format", ErrorKind.BAD_REQUEST),
    (chat(reasoning_effort="maximum"), "reasoning_effort", ErrorKind.BAD_REQUEST),
    (chat(chat_template_kwargs={"messages": []}), "chat_template_kwargs", ErrorKind.BAD_REQUEST),
    (chat(add_generation_prompt="yes"), "add_generation_prompt", ErrorKind.BAD_REQUEST),
]


@pytest.mark.parametrize(("body", "param", "kind"), BAD_CHAT, ids=[str(b[1]) for b in BAD_CHAT])
def test_bad_chat_fields(body: dict[str, Any], param: str, kind: ErrorKind) -> None:
    with pytest.raises(NeutrinoError) as info:
        parse_chat(body, LIMITS)
    assert (info.value.param, info.value.kind) == (param, kind)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m"}, "prompt"),
        ({"model": "m", "prompt": ["a", "b"]}, "prompt"),
        ({"model": "m", "prompt": "a", "suffix": "z"}, "suffix"),
        ({"model": "m", "prompt": "a", "logprobs": 6}, "logprobs"),
        ({"model": "m", "prompt": "a", "logprobs": 1, "echo": True}, "echo"),
    ],
)
def test_bad_completion_fields(body: dict[str, Any], param: str) -> None:
    with pytest.raises(NeutrinoError) as info:
        parse_completion(body, LIMITS)
    assert info.value.param == param


@pytest.mark.parametrize("body", [[1], "x", None])
def test_body_must_be_an_object(body: Any) -> None:
    with pytest.raises(NeutrinoError) as info:
        parse_chat(body, LIMITS)
    assert info.value.http_status == 400


def test_earlier_tool_calls_in_openai_shape_are_accepted() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    as_object = {"function": {"name": "f", "arguments": {"x": 1}}}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call, as_object]},
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        {"role": "assistant", "content": "ok", "tool_calls": None},
        {"role": "assistant", "content": "ok", "tool_calls": []},
    ]
    req = parse_chat(chat(messages=messages), LIMITS)
    assert [m.role for m in req.chat.messages] == [m["role"] for m in messages]
    assert req.chat.messages[1].tool_calls == (
        FunctionCall("f", "{}", "call_1"),
        FunctionCall("f", {"x": 1}),
    )
    assert req.chat.messages[2].extra == {"tool_call_id": "call_1"}
    assert req.chat.messages[3].tool_calls == req.chat.messages[4].tool_calls == ()
