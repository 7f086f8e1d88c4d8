"""The Responses API's sans-IO parts: request -> chat request, items -> messages, the
Response object and output items, the stream's events, the bounded store."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from neutrino.config import ConfigError, LimitsConfig, from_mapping
from neutrino.engine.messages import GuidedMode
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.http.responses.parse import ResponsesRequest, Stored, parse_responses
from neutrino.frontends.http.responses.render import output_items, response_id, response_object
from neutrino.frontends.http.responses.store import ResponseStore
from neutrino.frontends.http.responses.stream import ResponseEvents
from neutrino.pipeline.assembler import Outcome
from neutrino.pipeline.chat import ToolChoice
from neutrino.pipeline.logprobs import TokenLogprob
from neutrino.text.parsers import ToolCall
from tests.support import requests as view
from tests.support.openapi import validate

LIMITS = LimitsConfig()
TOOL = {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True}


def parse(**kw: Any) -> ResponsesRequest:
    return parse_responses({"model": "m", "input": "hi", **kw}, LIMITS)


def refusal(body: dict[str, Any], lookup: Any = None) -> NeutrinoError:
    with pytest.raises(NeutrinoError) as info:
        parse_responses({"model": "m", **body}, LIMITS, lookup)
    return info.value


def test_string_input_and_settings() -> None:
    p = parse(
        instructions="Be terse.",
        max_output_tokens=7,
        temperature=0.5,
        top_p=0.9,
        user="u1",
        metadata={"k": "v"},
        stream=True,
    )
    req = p.req
    assert view.messages(req) == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "hi"},
    ]
    s = req.sampling
    assert (req.kind, s.max_tokens, s.temperature, s.top_p, req.user, req.stream) == (
        "chat",
        7,
        0.5,
        0.9,
        "u1",
        True,
    )
    assert req.request_id.startswith("resp-") and p.store and p.previous is None
    assert p.echo["instructions"] == "Be terse." and p.echo["metadata"] == {"k": "v"}
    assert p.echo["text"] == {"format": {"type": "text"}} and p.echo["tool_choice"] == "auto"


def test_items_become_chat_messages() -> None:
    items = [
        {"role": "developer", "content": [{"type": "input_text", "text": "Rules."}]},
        {"type": "message", "role": "user", "content": "Weather?"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": "Need a call."}],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking."}],
        },
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 1}'},
        {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "one"},
        {
            "type": "function_call_output",
            "call_id": "c2",
            "output": [{"type": "input_text", "text": "tw"}, {"type": "input_text", "text": "o"}],
        },
        {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "x"}]},
        {"role": "user", "content": "Thanks"},  # the reasoning before it is dropped
    ]
    msgs = view.messages(parse(input=items, tools=[TOOL]).req)
    assert msgs == [
        {"role": "developer", "content": [{"type": "text", "text": "Rules."}]},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "reasoning_content": "Need a call.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"a": 1}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "one", "name": "f"},
        {"role": "tool", "tool_call_id": "c2", "content": "two", "name": "f"},
        {"role": "user", "content": "Thanks"},
    ]


def test_tools_choice_format_reasoning_logprobs() -> None:
    fmt = {"type": "json_schema", "name": "w", "schema": {"type": "object"}, "strict": True}
    p = parse(
        tools=[TOOL],
        tool_choice="required",
        parallel_tool_calls=False,
        reasoning={"effort": "high"},
        top_logprobs=3,
    )
    req = p.req
    assert view.tools(req) == [
        {
            "type": "function",
            "function": {"name": "f", "parameters": {"type": "object"}, "strict": True},
        }
    ]
    assert req.tools.choice == ToolChoice("required") and not req.tools.parallel
    assert req.chat.template_kwargs["reasoning_effort"] == "high"
    assert req.sampling.logprobs and req.sampling.top_logprobs == 3
    assert p.echo["tools"] == [{**TOOL, "description": None}]
    named = parse(tools=[TOOL], tool_choice={"type": "function", "name": "f"}).req
    assert named.tools.choice == ToolChoice("named", "f")
    structured = parse(text={"format": fmt}).req
    guided = structured.output.guided
    assert guided is not None and guided.mode is GuidedMode.JSON_SCHEMA
    assert structured.output.validator is not None  # strict: the final text is checked
    assert parse(include=["message.output_text.logprobs"]).req.sampling.logprobs


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "x", "max_output_tokens": "9"}, "max_output_tokens"),
        (
            {"input": "x", "text": {"format": {"type": "json_schema", "name": "n", "schema": 1}}},
            "text.format.schema",
        ),
        ({"input": "x", "text": {"format": {"type": "xml"}}}, "text.format"),
        ({"input": "x", "reasoning": {"effort": "maximum"}}, "reasoning.effort"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "input[0].content[0]",
        ),
        ({"input": [{"role": "user", "content": [{"type": "input_file"}]}]}, "input[0].content[0]"),
        (
            {"input": [{"type": "function_call", "call_id": "c", "name": "f"}]},
            "input[0].arguments",
        ),
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0]"),
        ({"input": None}, "input"),
        ({"input": "x", "tools": [{"type": "function"}]}, "tools[0].name"),
        ({"input": "x", "tools": [{"type": "file_search"}]}, "tools[0].type"),
        ({"input": "x", "tool_choice": {"type": "function"}}, "tool_choice"),
        ({"input": "x", "instructions": ["x"]}, "instructions"),
        ({"input": "x", "store": "yes"}, "store"),
        ({"input": "x", "truncation": "auto"}, "truncation"),
        ({"input": "x", "conversation": "conv_1"}, "conversation"),
        ({"input": "x", "metadata": {str(i): "v" for i in range(17)}}, "metadata"),
        ({"input": "x", "top_logprobs": 21}, "top_logprobs"),
        ({"input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
    ],
)
def test_refusals_name_the_responses_parameter(body: dict[str, Any], param: str) -> None:
    err = refusal(body)
    assert err.http_status == 400 and err.param == param, err
    assert "messages" not in err.message and "response_format" not in err.message


def test_an_input_error_after_instructions_names_the_input_item() -> None:
    """The instructions are chat's first message: the item paths still count from input."""
    image = {"type": "input_image", "image_url": "https://example.com/x.png"}
    items = [
        {"role": "user", "content": "first"},
        {"role": "user", "content": [{"type": "input_text", "text": "see"}, image]},
    ]
    err = refusal({"instructions": "Be terse.", "input": items})
    assert err.param == "input[1].content[1]", err
    assert "messages" not in err.message


def test_previous_response_prepends_its_conversation() -> None:
    earlier: list[Any] = [
        {"type": "message", "role": "user", "content": "Remember 42"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Noted."}],
        },
    ]
    stored = Stored("", earlier, {"id": "resp_1"})
    p = parse_responses(
        {
            "model": "m",
            "input": "What was it?",
            "previous_response_id": "resp_1",
            "instructions": "New rules.",
        },
        LIMITS,
        {"resp_1": stored}.get,
    )
    assert p.previous is stored and p.items == [
        *earlier,
        {"type": "message", "role": "user", "content": "What was it?"},
    ]
    assert [m["content"] for m in view.messages(p.req)] == [
        "New rules.",
        "Remember 42",
        "Noted.",
        "What was it?",
    ]
    missing = refusal({"input": "x", "previous_response_id": "resp_2"}, {}.get)
    assert missing.kind is ErrorKind.NOT_FOUND and missing.code == "previous_response_not_found"


def _outcome(**kw: Any) -> Outcome:
    return Outcome(finish_reason="stop", prompt_tokens=10, completion_tokens=6, **kw)


def test_output_items_and_response() -> None:
    call = ToolCall("call_1", "f", '{"a": 1}')
    out = _outcome(reasoning="hmm", reasoning_tokens=2, tool_calls=[call], cached_tokens=4)
    rid = response_id("resp-abc")
    items = output_items(rid, "", out)  # calls only: no message item
    assert rid == "resp_abc"
    assert [(i["type"], i["id"], i["status"]) for i in items] == [
        ("reasoning", "rs_abc_0", "completed"),
        ("function_call", "fc_abc_1", "completed"),
    ]
    resp = response_object({"tools": []}, rid, 1, "m", items, out)
    assert resp["status"] == "completed" and resp["incomplete_details"] is None
    assert resp["usage"] == {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 0},
        "output_tokens": 6,
        "output_tokens_details": {"reasoning_tokens": 2},
        "total_tokens": 16,
    }
    cut = _outcome()
    cut.finish_reason = "length"
    [msg] = output_items(rid, "partial", cut)
    assert msg["status"] == "incomplete" and cast(list[Any], msg["content"])[0]["text"] == "partial"
    resp = response_object({}, rid, 1, "m", [msg], cut)
    assert resp["status"] == "incomplete" and resp["completed_at"] is None
    assert resp["incomplete_details"] == {"reason": "max_output_tokens"}
    failed = response_object({}, rid, 1, "m", [], error=NeutrinoError(ErrorKind.QUEUE_FULL, "x"))
    assert failed["status"] == "failed" and "usage" not in failed
    assert failed["error"] == {"code": "rate_limit_exceeded", "message": "x"}


ECHO = parse(tools=[TOOL]).echo


def _events(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for block in raw.decode().split("\n\n"):
        if block:
            head, data = block.split("\n")
            event = json.loads(data.removeprefix("data: "))
            assert head == "event: " + event["type"]
            validate(event, "ResponseStreamEvent")
            out.append(event)
    return out


def test_stream_events_end_in_the_unstreamed_response() -> None:
    lp = [TokenLogprob("Hi", b"Hi", -0.5, [("Hi", b"Hi", -0.5)])]
    call = ToolCall("call_1", "f", "{}")
    out = _outcome(reasoning="Think.", reasoning_tokens=1, tool_calls=[call], logprobs=lp)
    ev = ResponseEvents(ECHO, "resp_x", 5, "m")
    raw = ev.opening() + ev.reasoning("Thi") + ev.reasoning("nk.") + ev.text("Hi", lp)
    events = _events(raw + ev.finish(out))
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    final = events[-1]["response"]
    whole = response_object(ECHO, "resp_x", 5, "m", output_items("resp_x", "Hi", out), out)
    assert final == {**whole, "completed_at": final["completed_at"]} == ev.final


def test_stream_of_an_empty_answer_and_of_a_failure() -> None:
    ev = ResponseEvents(ECHO, "resp_y", 5, "m")
    events = _events(ev.opening() + ev.finish(_outcome()))
    assert events[-1]["response"]["output"] == output_items("resp_y", "", _outcome())
    early = ResponseEvents(ECHO, "resp_z", 5, "m")  # failed before anything was sent
    err = NeutrinoError(ErrorKind.ENGINE_DISCONNECTED, "engine gone")
    kinds = [(e["type"], e.get("code")) for e in _events(early.failed(err))]
    assert kinds == [
        ("response.created", None),
        ("response.in_progress", None),
        ("error", "engine_disconnected"),
        ("response.failed", None),
    ]


def test_store_bounds_and_owners() -> None:
    store = ResponseStore(max_entries=2, max_bytes=400)
    for i in range(3):
        assert store.put("", [], {"id": f"resp_{i}", "output": []})
    assert len(store) == 2 and store.get("resp_0") is None and store.get("resp_2") is not None
    assert not store.put("", [{"text": "x" * 500}], {"id": "resp_big"})  # over the byte bound
    assert store.get("resp_big") is None
    store.put("alice", ["y" * 150], {"id": "resp_a"})
    store.put("alice", ["y" * 150], {"id": "resp_b"})  # 2 x ~180 bytes: the oldest goes
    assert store.get("resp_2") is None and store.bytes <= 400
    assert store.lookup("alice", "resp_b") is not None and store.lookup("bob", "resp_b") is None
    assert store.delete("resp_b") and not store.delete("resp_b")
    assert ResponseStore(0, 100).put("", [], {"id": "resp_n"}) is False


def test_the_store_section() -> None:
    assert from_mapping({}).responses.store_entries == 0  # off by default
    cfg = from_mapping({"responses": {"store_entries": 10, "store_bytes": 4096}}).responses
    assert (cfg.store_entries, cfg.store_bytes) == (10, 4096)
    with pytest.raises(ConfigError, match=r"\[responses\]\.store_bytes"):
        from_mapping({"responses": {"store_bytes": -1}})
    with pytest.raises(ConfigError, match="unknown key"):
        from_mapping({"responses": {"entries": 1}})
