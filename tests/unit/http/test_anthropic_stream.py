"""Anthropic's answers and stream events, rendered from real generations (the pipeline
against mock_ie's in-process engine), read back with the anthropic SDK's own types."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent
from pydantic import TypeAdapter

from mocks.mock_ie.core import MockEngine, MockModel
from mocks.mock_ie.script import Script
from mocks.mock_ie.server import MockServer
from neutrino.config import Config
from neutrino.errors import ANTHROPIC_TYPES, ErrorKind, NeutrinoError
from neutrino.frontends.http.anthropic.parse import parse_count, parse_messages
from neutrino.frontends.http.anthropic.render import (
    MESSAGE_STOP,
    error_events,
    message,
    message_delta,
    message_start,
    stop_reason,
)
from neutrino.frontends.http.anthropic.stream import MessageWriter
from neutrino.frontends.http.sse import SSEStream
from neutrino.pipeline.assembler import Outcome
from neutrino.pipeline.history import History
from neutrino.pipeline.models import ModelTexts
from neutrino.pipeline.orchestrator import Orchestrator
from neutrino.pipeline.pull import collect

QWEN3 = "qwen3-mock"  # reasoning (<think>) and Hermes-style tool calls
RULES: list[dict[str, Any]] = [
    {
        "match": "think-and-call",
        "reply": "<think>Look it up.</think>Checking.<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call>',
    },
    {"match": "halt", "reply": "alpha beta HALT gamma delta"},
    {"match": "broken", "fault": "error", "fault_after": 2},
]
TOOLS = [
    {
        "name": "get_weather",
        "description": "The weather in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]
EVENTS: TypeAdapter[RawMessageStreamEvent] = TypeAdapter(RawMessageStreamEvent)


class ListBody:
    """A streamed body that keeps what is written (the transport's place)."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.on_lost: Callable[[str], None] | None = None

    def write(self, data: bytes) -> int:
        self.data += data
        return 0

    def pending(self) -> int:
        return 0

    def reset(self) -> None:
        pass

    async def end(self) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def orch() -> Orchestrator:
    core = MockEngine([MockModel(QWEN3, "qwen3", 32768)], script=Script.from_rules(RULES))
    cfg = Config()
    return Orchestrator(cfg, MockServer(core).in_process(), ModelTexts(cfg.model), History(10))


def request(text: str, **kw: Any) -> dict[str, Any]:
    return {
        "model": QWEN3,
        "max_tokens": 200,
        "messages": [{"role": "user", "content": text}],
        **kw,
    }


async def streamed(orch: Orchestrator, body: dict[str, Any]) -> list[tuple[str, Any]]:
    """The (event, data) pairs of the stream of ``body``."""
    req = parse_messages({**body, "stream": True}, orch.cfg.limits)
    sink = ListBody()
    stream = SSEStream(sink, 1, 1 << 20, error_events=error_events)
    gen = await orch.start(req)
    writer = MessageWriter(stream, frozenset(req.stops.strings))
    writer.open(gen)
    gen.push_to(writer)
    await stream.done
    events = []
    for block in bytes(sink.data).decode().split("\n\n")[:-1]:
        name, data = block.split("\n")
        assert name.startswith("event: ") and data.startswith("data: ")
        events.append((name[7:], json.loads(data[6:])))
    return events


async def whole(orch: Orchestrator, body: dict[str, Any]) -> dict[str, Any]:
    req = parse_messages(body, orch.cfg.limits)
    gen = await orch.start(req)
    text, outcome = await collect(gen)
    return message(gen, text, outcome, frozenset(req.stops.strings))


def shown(m: Message) -> dict[str, Any]:
    """A message without its ids (each request has its own)."""
    out = m.model_dump(exclude={"id"})
    for block in out["content"]:
        block.pop("id", None)
    return out


def read_back(events: list[tuple[str, Any]]) -> Message:
    """The message the SDK's stream helper builds from the events (each one validated)."""
    snapshot = None
    for name, data in events:
        assert data["type"] == name
        if name == "ping":
            continue
        snapshot = accumulate_event(
            event=EVENTS.validate_python(data), current_snapshot=snapshot, json_bufs={}
        )
    assert snapshot is not None
    return snapshot


async def test_reasoning_text_and_a_call_in_anthropics_order(orch: Orchestrator) -> None:
    events = await streamed(orch, request("think-and-call", tools=TOOLS))
    names = [n for n, _ in events]
    deltas = [d["delta"]["type"] for n, d in events if n == "content_block_delta"]
    blocks = [d["content_block"]["type"] for n, d in events if n == "content_block_start"]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert blocks == ["thinking", "text", "tool_use"]
    assert deltas[-1] == "input_json_delta"
    # each block: start, its deltas, stop; a thinking block's signature just before its stop
    index = -1
    for n, d in events[2:-2]:
        if n == "content_block_start":
            assert d["index"] == index + 1
            index += 1
        else:
            assert n in ("content_block_delta", "content_block_stop") and d["index"] == index
    sig = deltas.index("signature_delta")
    assert set(deltas[:sig]) == {"thinking_delta"} and deltas.count("signature_delta") == 1
    got = read_back(events)
    assert [b.type for b in got.content] == ["thinking", "text", "tool_use"]
    assert got.stop_reason == "tool_use"
    want = Message.model_validate(await whole(orch, request("think-and-call", tools=TOOLS)))
    assert want.content[0].type == "thinking" and want.content[0].thinking == "Look it up."
    assert want.content[1].type == "text" and want.content[1].text == "Checking."
    call = want.content[2]
    assert call.type == "tool_use" and call.id.startswith("toolu_")
    assert (call.name, call.input) == ("get_weather", {"city": "Zürich"})
    assert shown(got) == shown(want)
    assert want.usage.output_tokens_details is not None
    assert 0 < want.usage.output_tokens_details.thinking_tokens < want.usage.output_tokens


async def test_a_stop_sequence(orch: Orchestrator) -> None:
    body = request("halt", stop_sequences=["HALT", "never"])
    want = Message.model_validate(await whole(orch, body))
    assert (want.stop_reason, want.stop_sequence) == ("stop_sequence", "HALT")
    assert [(b.type, getattr(b, "text", None)) for b in want.content] == [("text", "alpha beta ")]
    got = read_back(await streamed(orch, body))
    assert shown(got) == shown(want)


def parsed(raw: bytes) -> list[tuple[str, Any]]:
    """The (event, data) pairs of rendered events."""
    out = []
    for block in raw.decode().split("\n\n")[:-1]:
        name, data = block.split("\n")
        out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


async def test_the_streams_final_usage_is_the_messages_with_cache_reads(
    orch: Orchestrator,
) -> None:
    """message_start can say only the prompt's length; message_delta's counts replace it
    with the non-streamed message's, cache reads included. mock_ie reads nothing from a
    cache, so the finished generation's outcome is given the cache reads an engine with
    a prefix cache reports in its final result."""
    req = parse_messages(request("halt", system="Be terse."), orch.cfg.limits)
    gen = await orch.start(req)
    text, outcome = await collect(gen)
    out = replace(outcome, cached_tokens=outcome.prompt_tokens - 3)
    want = Message.model_validate(message(gen, text, out, frozenset()))
    assert (want.usage.input_tokens, want.usage.cache_read_input_tokens) == (3, out.cached_tokens)
    events = parsed(message_start(gen) + message_delta(out, frozenset()) + MESSAGE_STOP)
    start, delta = events[0][1]["message"]["usage"], events[1][1]["usage"]
    assert start["input_tokens"] == outcome.prompt_tokens and start["cache_read_input_tokens"] == 0
    assert delta == want.usage.model_dump(exclude_none=True)
    got = read_back(events).usage
    assert got == want.usage and got.input_tokens + (got.cache_read_input_tokens or 0) == (
        outcome.prompt_tokens
    )


async def test_max_tokens(orch: Orchestrator) -> None:
    want = Message.model_validate(await whole(orch, request("halt", max_tokens=2)))
    assert want.stop_reason == "max_tokens" and want.usage.output_tokens == 2


async def test_an_error_mid_stream_ends_it_with_an_error_event(orch: Orchestrator) -> None:
    events = await streamed(orch, request("broken"))
    assert [n for n, _ in events][:2] == ["message_start", "ping"]
    name, data = events[-1]
    assert name == "error" and data["type"] == "error"
    assert data["error"]["type"] == "api_error" and data["error"]["message"]
    assert "message_stop" not in [n for n, _ in events]


async def test_count_prompt_is_the_prompt_generation_counts(orch: Orchestrator) -> None:
    body = request("halt", system="Be terse.", tools=TOOLS, thinking={"type": "disabled"})
    req = parse_messages(body, orch.cfg.limits)
    gen = await orch.start(req)
    _, outcome = await collect(gen)
    count = await orch.count_prompt(parse_count(body, orch.cfg.limits))
    assert count == outcome.prompt_tokens > 0
    plain = await orch.count_prompt(parse_count(request("halt"), orch.cfg.limits))
    assert plain < count  # the system prompt and the tools are in the prompt
    with pytest.raises(NeutrinoError) as info:
        await orch.count_prompt(parse_count({**body, "model": "nope"}, orch.cfg.limits))
    assert info.value.kind is ErrorKind.MODEL_NOT_FOUND


def test_every_error_kind_has_an_anthropic_type() -> None:
    allowed = {
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "rate_limit_error",
        "timeout_error",
        "api_error",
        "overloaded_error",
    }
    assert set(ANTHROPIC_TYPES) == set(ErrorKind)
    for kind in ErrorKind:
        body = NeutrinoError(kind, "why").anthropic_body()
        assert body == {"type": "error", "error": {"type": ANTHROPIC_TYPES[kind], "message": "why"}}
        assert body["error"]["type"] in allowed
    assert ANTHROPIC_TYPES[ErrorKind.UNAUTHENTICATED] == "authentication_error"
    assert ANTHROPIC_TYPES[ErrorKind.MODEL_NOT_FOUND] == "not_found_error"


@pytest.mark.parametrize(
    ("finish", "matched", "want"),
    [
        ("stop", None, ("end_turn", None)),
        ("stop", 151643, ("end_turn", None)),
        ("stop", "END", ("stop_sequence", "END")),
        ("length", None, ("max_tokens", None)),
        ("tool_calls", None, ("tool_use", None)),
    ],
)
def test_stop_reasons(finish: str, matched: str | int | None, want: tuple[str, str | None]) -> None:
    out = Outcome(finish_reason=finish, prompt_tokens=1, completion_tokens=1, stop_reason=matched)
    assert stop_reason(out, frozenset({"END"})) == want
