"""A bad field nested three levels deep is named as each protocol names it: in its own
paths, by the front end that translated it (no protocol's names are rewritten into
another's), with the same rule behind it."""

from __future__ import annotations

from typing import Any

import pytest

from neutrino.config import LimitsConfig
from neutrino.errors import ErrorKind, NeutrinoError, parse_path
from neutrino.frontends.grpc.convert import to_request
from neutrino.frontends.http.anthropic.parse import parse_messages
from neutrino.frontends.http.openai.parse import parse_chat
from neutrino.frontends.http.responses.parse import parse_responses
from neutrino.pipeline.fields import path
from neutrino.v1 import inference_pb2

LIMITS = LimitsConfig()


def refused(parse: Any, body: Any) -> NeutrinoError:
    with pytest.raises(NeutrinoError) as info:
        parse(body)
    assert info.value.kind is ErrorKind.BAD_REQUEST
    return info.value


def test_openai_names_messages_content_text() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "text", "text": 7}]},
        ],
    }
    err = refused(lambda b: parse_chat(b, LIMITS), body)
    assert err.param == "messages[1].content[0].text"
    assert err.message == "messages[1].content[0].text must be a string"
    assert err.openai_body()["error"]["param"] == "messages[1].content[0].text"
    assert err.loc == ("messages", 1, "content", 0, "text")


def test_openai_locates_an_image_and_an_earlier_tool_call_by_keys_and_indexes() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    turns = [{"role": "user", "content": [{"type": "text", "text": "x"}, image]}]
    err = refused(lambda b: parse_chat(b, LIMITS), {"model": "m", "messages": turns})
    assert err.loc == ("messages", 0, "content", 1) and err.param == "messages[0].content[1]"
    assert "only data: URIs" in err.message
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": 3}}
    turns2: list[dict[str, object]] = [{"role": "assistant", "content": None, "tool_calls": [call]}]
    err = refused(lambda b: parse_chat(b, LIMITS), {"model": "m", "messages": turns2})
    assert err.loc == ("messages", 0, "tool_calls", 0, "function", "arguments")
    assert err.message == "messages[0].tool_calls[0].function.arguments must be a JSON string"


def test_anthropic_names_the_block_and_says_it_in_the_message() -> None:
    body = {
        "model": "m",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": [{"type": "text", "text": None}]}],
    }
    err = refused(lambda b: parse_messages(b, LIMITS), body)
    assert err.param == "messages[0].content[0].text"
    shown = err.anthropic_body()["error"]["message"]  # Anthropic's errors have no param
    assert shown == "messages[0].content[0].text must be a string"
    assert err.loc == ("messages", 0, "content", 0, "text")


def test_responses_names_the_input_item_part() -> None:
    items = [{"role": "user", "content": [{"type": "input_text", "text": ["x"]}]}]
    err = refused(lambda b: parse_responses(b, LIMITS), {"model": "m", "input": items})
    assert err.param == "input[0].content[0].text"
    assert "input[0].content[0].text" in err.message and "messages" not in err.message
    assert err.loc == ("input", 0, "content", 0, "text")


def test_a_path_and_its_keys_and_indexes_convert_both_ways() -> None:
    for loc in [("messages", 2, "content", 10, "text"), ("metadata", "user_id"), ("tools",)]:
        assert parse_path(path(loc)) == loc
    assert NeutrinoError(ErrorKind.BAD_REQUEST, "x").loc is None


def test_grpc_names_the_proto_field_path() -> None:
    msg = inference_pb2.GenerateRequest(model="m")
    turn = msg.chat.messages.add(role="assistant")
    turn.tool_calls.add(id="c1", name="", arguments="{}")
    msg.chat.messages.add(role="user", content="x")
    err = refused(lambda m: to_request(m, LIMITS, stream=False), msg)
    assert err.param == "chat.messages[0].tool_calls[0].name"
    assert err.message == "chat.messages[0].tool_calls[0].name is required"
    assert err.loc == ("chat", "messages", 0, "tool_calls", 0, "name")
    assert path(err.loc) == err.param


def test_the_same_rule_names_its_field_in_each_protocol() -> None:
    """One limit (at most 16 stop sequences), three protocols' names for the field."""
    stops = [f"s{i}" for i in range(17)]
    openai = refused(
        lambda b: parse_chat(b, LIMITS),
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "stop": stops},
    )
    anthropic = refused(
        lambda b: parse_messages(b, LIMITS),
        {
            "model": "m",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "x"}],
            "stop_sequences": stops,
        },
    )
    assert openai.message == "stop accepts at most 16 sequences" and openai.param == "stop"
    assert anthropic.message == "stop_sequences accepts at most 16 sequences"
