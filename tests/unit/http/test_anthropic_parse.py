"""Anthropic Messages bodies -> the pipeline's GenerateRequest (sans-IO)."""

from __future__ import annotations

import base64
import io
from typing import Any

import pytest
from PIL import Image as PILImage

from neutrino.config import LimitsConfig
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.http.anthropic.parse import parse_count, parse_messages
from neutrino.pipeline.chat import ImagePart, TextPart, ToolChoice
from tests.support import requests as view

LIMITS = LimitsConfig()
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def png_b64() -> str:
    buf = io.BytesIO()
    PILImage.new("RGB", (4, 3), (200, 10, 10)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def body(**kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": "m",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Hi"}],
    }
    out.update(kw)
    return out


def refused(b: Any, kind: ErrorKind = ErrorKind.BAD_REQUEST) -> NeutrinoError:
    with pytest.raises(NeutrinoError) as info:
        parse_messages(b, LIMITS)
    assert info.value.kind is kind, info.value
    return info.value


def test_a_plain_request() -> None:
    req = parse_messages(body(), LIMITS)
    assert req.kind == "chat" and req.model == "m" and req.sampling.max_tokens == 64
    assert req.n == 1
    assert view.messages(req) == [{"role": "user", "content": "Hi"}]
    assert req.request_id.startswith("msg-") and not req.stream


def test_sampling_stops_metadata_and_stream() -> None:
    req = parse_messages(
        body(
            temperature=0.3,
            top_p=0.9,
            top_k=5,
            stop_sequences=["END", "\n\n"],
            metadata={"user_id": "u-1"},
            stream=True,
            service_tier="auto",  # unknown to Neutrino: ignored
        ),
        LIMITS,
    )
    assert (req.sampling.temperature, req.sampling.top_p, req.sampling.top_k) == (0.3, 0.9, 5)
    assert req.stops.strings == ("END", "\n\n") and req.user == "u-1" and req.stream


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"max_tokens": None}, "max_tokens is required"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"temperature": 1.5}, "temperature must be a number between 0 and 1"),
        ({"stop_sequences": "END"}, "stop_sequences must be an array"),
        ({"metadata": {"user_id": 3}}, "metadata.user_id"),
        ({"model": None}, "model is required"),
        ({"messages": []}, "messages must be a non-empty array"),
        ({"messages": [{"role": "system", "content": "x"}]}, "'user' or 'assistant'"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"system": [{"type": "image"}]}, "system[0] must be a text block"),
        ({"thinking": {"type": "enabled"}}, "budget_tokens"),
        ({"thinking": {"type": "sometimes"}}, "thinking must be"),
        ({"tool_choice": {"type": "any"}}, "needs tools"),
        ({"tool_choice": "auto"}, "tool_choice must be"),
        ({"tools": [{"name": "x"}]}, "tools[0].input_schema"),
        ({"output_config": {"format": {"type": "json_schema"}}}, "output_config.format"),
        ({"output_config": {"effort": "extreme"}}, "output_config.effort"),
    ],
)
def test_bad_fields_are_a_400_naming_them(extra: dict[str, Any], says: str) -> None:
    err = refused(body(**extra))
    assert says in err.message
    assert err.anthropic_body()["error"]["type"] == "invalid_request_error"


def test_system_string_and_blocks() -> None:
    req = parse_messages(body(system="Be terse."), LIMITS)
    assert view.messages(req)[0] == {"role": "system", "content": "Be terse."}
    blocks = [{"type": "text", "text": "One."}, {"type": "text", "text": "Two."}]
    req = parse_messages(body(system=blocks), LIMITS)
    assert view.messages(req)[0] == {
        "role": "system",
        "content": [{"type": "text", "text": "One."}, {"type": "text", "text": "Two."}],
    }
    assert len(view.messages(req)) == 2


def test_image_blocks_are_decoded_in_order() -> None:
    content = [
        {"type": "text", "text": "What is this?"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": png_b64()},
        },
    ]
    req = parse_messages(body(messages=[{"role": "user", "content": content}]), LIMITS)
    assert len(req.images) == 1 and (req.images[0].width, req.images[0].height) == (4, 3)
    assert req.chat.messages[0].content == (TextPart("What is this?"), ImagePart(0))


def test_image_urls_are_refused_as_the_openai_route_refuses_them() -> None:
    content = [{"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]
    err = refused(body(messages=[{"role": "user", "content": content}]))
    assert "data: URIs" in err.message


def test_errors_name_the_clients_own_block() -> None:
    """A tool result becomes a message of its own before the turn's other blocks; an error
    in a later block still names the block where the client wrote it."""
    bad = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}}
    messages = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                {"type": "text", "text": "and this?"},
                bad,
            ],
        },
    ]
    err = refused(body(system="S.", messages=messages, tools=[WEATHER]))
    assert "messages[2].content[2]" in err.message and err.param == "messages[2].content[2]"


def test_tool_use_and_tool_results_become_calls_and_tool_messages() -> None:
    messages = [
        {"role": "user", "content": "Weather in Zürich and Bern?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Two calls.", "signature": ""},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": "get_weather",
                    "input": {"city": "Zürich"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_b",
                    "name": "get_weather",
                    "input": {"city": "Bern"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": [{"type": "text", "text": "rain"}],
                    "is_error": False,
                },
                {"type": "text", "text": "Thanks; summarise."},
            ],
        },
    ]
    req = parse_messages(body(messages=messages, tools=[WEATHER]), LIMITS)
    first, assistant, tool_a, tool_b, last = view.messages(req)
    assert first == {"role": "user", "content": "Weather in Zürich and Bern?"}
    assert assistant["reasoning_content"] == "Two calls."
    assert assistant["content"] == [{"type": "text", "text": "Checking."}]
    calls = req.chat.messages[1].tool_calls
    assert [c.id for c in calls] == ["toolu_a", "toolu_b"]
    assert (calls[0].name, calls[0].arguments) == ("get_weather", '{"city": "Zürich"}')
    assert tool_a == {"role": "tool", "tool_call_id": "toolu_a", "content": "sunny"}
    assert tool_b == {"role": "tool", "tool_call_id": "toolu_b", "content": "rain"}
    assert last == {"role": "user", "content": [{"type": "text", "text": "Thanks; summarise."}]}
    assert view.tools(req) == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": WEATHER["input_schema"],
                "description": "The weather in a city.",
            },
        }
    ]


def test_an_assistant_turn_of_only_calls_has_null_content() -> None:
    messages = [
        {"role": "user", "content": "x"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
    ]
    req = parse_messages(body(messages=messages), LIMITS)
    assert view.messages(req)[1]["content"] is None
    assert view.messages(req)[2] == {"role": "tool", "tool_call_id": "t", "content": ""}
    assert len(view.messages(req)) == 3  # a turn of only tool results adds no user message


@pytest.mark.parametrize(
    ("choice", "mode", "name", "parallel"),
    [
        ({"type": "auto"}, "auto", None, True),
        ({"type": "auto", "disable_parallel_tool_use": True}, "auto", None, False),
        ({"type": "any"}, "required", None, True),
        ({"type": "tool", "name": "get_weather"}, "named", "get_weather", True),
        ({"type": "none"}, "none", None, True),
    ],
)
def test_tool_choice(choice: dict[str, Any], mode: str, name: str | None, parallel: bool) -> None:
    req = parse_messages(body(tools=[WEATHER], tool_choice=choice), LIMITS)
    assert req.tools.choice == ToolChoice(mode, name)  # type: ignore[arg-type]
    assert req.tools.parallel is parallel


def test_a_named_tool_must_be_offered() -> None:
    err = refused(body(tools=[WEATHER], tool_choice={"type": "tool", "name": "other"}))
    assert "'other'" in err.message


def test_server_tools_and_other_blocks_are_unsupported() -> None:
    refused(
        body(tools=[{"type": "web_search_20250305", "name": "web_search"}]), ErrorKind.UNSUPPORTED
    )
    doc = {"type": "document", "source": {"type": "text", "data": "x", "media_type": "text/plain"}}
    err = refused(body(messages=[{"role": "user", "content": [doc]}]), ErrorKind.UNSUPPORTED)
    assert "messages[0].content[0]" in err.message and "'document'" in err.message


def test_a_final_assistant_turn_is_refused() -> None:
    messages = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "The answer is ("},
    ]
    err = refused(body(messages=messages), ErrorKind.UNSUPPORTED)
    assert "prefill" in err.message


@pytest.mark.parametrize(
    ("thinking", "kwargs"),
    [
        (
            {"type": "enabled", "budget_tokens": 2048},
            {"enable_thinking": True, "thinking": True, "thinking_budget": 2048},
        ),
        ({"type": "adaptive"}, {"enable_thinking": True, "thinking": True}),
        ({"type": "disabled"}, {"enable_thinking": False, "thinking": False}),
    ],
)
def test_thinking_sets_the_template_switches(
    thinking: dict[str, Any], kwargs: dict[str, Any]
) -> None:
    assert parse_messages(body(thinking=thinking), LIMITS).chat.template_kwargs == kwargs


def test_output_config() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    req = parse_messages(
        body(output_config={"effort": "max", "format": {"type": "json_schema", "schema": schema}}),
        LIMITS,
    )
    assert req.chat.template_kwargs == {"reasoning_effort": "high"}
    assert req.output.guided is not None and req.output.validator is not None


def test_count_tokens_needs_no_max_tokens() -> None:
    b = body(system="S.", tools=[WEATHER], thinking={"type": "disabled"})
    del b["max_tokens"]
    req = parse_count(b, LIMITS)
    assert req.sampling.max_tokens is None and not req.stream and req.tools.tools
    assert req.chat.template_kwargs == {"enable_thinking": False, "thinking": False}


def test_not_an_object() -> None:
    assert "JSON object" in refused([1, 2]).message


def test_chat_checks_name_the_messages_fields() -> None:
    """What parse_chat checks for a Messages body is named as the body names it: an
    invalid schema in output_config.format, a forced tool beside a format."""
    bad = {"type": "json_schema", "schema": {"type": "nonsense"}}
    err = refused(body(output_config={"format": bad}))
    assert err.param == "output_config.format.schema"
    assert err.message.startswith("output_config.format.schema: the JSON schema is invalid")
    assert "response_format" not in err.message
    good = {"type": "json_schema", "schema": {"type": "object"}}
    forced = {"type": "tool", "name": "get_weather"}
    err = refused(body(output_config={"format": good}, tools=[WEATHER], tool_choice=forced))
    assert err.param == "tool_choice" and "output_config.format" in err.message
    assert "response_format" not in err.message
