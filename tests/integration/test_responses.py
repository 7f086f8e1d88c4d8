"""OpenAI's Responses API (``POST /v1/responses``) with the official openai SDK against real
Neutrino + mock_ie processes; every Response and stream event checked against OpenAI's
spec (``Response``, ``ResponseStreamEvent``)."""

from __future__ import annotations

import base64
import io
import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pydantic
import pytest
from PIL import Image

from tests.support.openapi import validate
from tests.support.procs import MockIE, NeutrinoProc

MODEL = "qwen2.5-mock"
R1 = "deepseek-r1-distill-qwen-mock"
VLM = "qwen2.5-vl-mock"
HELLO = "Hello! Grüße 你好 😀"
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
THOUGHT, ANSWER = "The user says hi; answer briefly.\n", "\n\nHello! 你好"
# The first rule whose key occurs in the prompt wins: a tool result's turn also holds the
# question, and a continued conversation the earlier turn, so those rules go first.
RULES: list[dict[str, Any]] = [
    {"match": "tool-result-sunny-21", "reply": "It is sunny, 21 degrees."},
    {"match": "Noted: PINEAPPLE-42.", "reply": "It was PINEAPPLE-42."},
    {"match": "Remember PINEAPPLE-42", "reply": "Noted: PINEAPPLE-42."},
    {"match": "INSTRUCTIONS-MARKER", "reply": "Instructed."},
    {"match": "EARLIER-ASSISTANT-TURN", "reply": "Seen the earlier turn."},
    {"match": "weather in Paris", "reply": CALL},
    {"match": "think-about-it", "reply": THOUGHT + "</think>" + ANSWER},
    {"match": "stall-here", "fault": "stall", "fault_after": 3},
    {"match": "break-here", "fault": "error", "fault_after": 3, "error_code": "internal"},
    {"match": "Say hello", "reply": HELLO},
]
TOOLS: Any = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
        "strict": True,
    }
]
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "temperature": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    },
    "required": ["city", "temperature", "tags"],
    "additionalProperties": False,
}


def _mock(work: Path) -> MockIE:
    script = work / "rules.json"
    script.write_text(json.dumps({"rules": RULES}))
    models = ["--model", f"{MODEL}:qwen2:32768", "--model", f"{R1}:deepseek-r1-distill-qwen:32768"]
    models += ["--model", f"{VLM}:qwen2:32768:generate+vision"]
    return MockIE(work, "--script", str(script), *models).start()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MockIE, NeutrinoProc]]:
    """One scripted mock engine, and Neutrino as it starts by default (no store)."""
    work = tmp_path_factory.mktemp("responses")
    mock = _mock(work)
    server = NeutrinoProc(work, "--engine", mock.socket)
    try:
        yield mock, server.start()
    finally:
        server.stop()
        mock.stop()


@pytest.fixture(scope="module")
def client(stack: tuple[MockIE, NeutrinoProc]) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack[1].base_url + "/v1", api_key="x", max_retries=0)


def sdk_json(obj: Any) -> Any:
    return obj.model_dump(mode="json", exclude_unset=True, by_alias=True)


def post(server: NeutrinoProc, body: dict[str, Any]) -> tuple[int, bytes]:
    req = urllib.request.Request(
        server.base_url + "/v1/responses",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wire_events(raw: bytes) -> list[dict[str, Any]]:
    """The events of a raw stream, each checked: its ``event:`` line names its type, its
    sequence number is the next one, it fits the spec's ResponseStreamEvent."""
    events: list[dict[str, Any]] = []
    for block in raw.decode().split("\n\n"):
        lines = [line for line in block.splitlines() if not line.startswith(":")]
        if not lines:
            continue
        assert len(lines) == 2 and lines[0].startswith("event: "), block
        data = json.loads(lines[1].removeprefix("data: "))
        assert data["type"] == lines[0].removeprefix("event: ")
        assert data["sequence_number"] == len(events)
        validate(data, "ResponseStreamEvent")
        if "response" in data:
            validate(data["response"], "Response")
        events.append(data)
    return events


def without_ids(output: list[Any]) -> list[Any]:
    """Output items as JSON, without the ids that differ from one response to the next."""
    return [{k: v for k, v in sdk_json(item).items() if k != "id"} for item in output]


def test_string_input(client: openai.OpenAI) -> None:
    r = client.responses.create(model=MODEL, input="Say hello", max_output_tokens=50)
    validate(sdk_json(r), "Response")
    assert r.id.startswith("resp_") and r.object == "response" and r.status == "completed"
    assert r.output_text == HELLO
    [msg] = r.output
    assert msg.type == "message" and msg.role == "assistant" and msg.status == "completed"
    assert r.usage is not None and r.usage.output_tokens > 0
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.max_output_tokens == 50 and r.tools == [] and r.tool_choice == "auto"
    assert r.completed_at is not None and r.completed_at >= r.created_at


def test_item_input_and_instructions(client: openai.OpenAI) -> None:
    r = client.responses.create(
        model=MODEL,
        instructions="INSTRUCTIONS-MARKER: be terse.",
        input=[{"role": "user", "content": [{"type": "input_text", "text": "Hi there"}]}],
    )
    validate(sdk_json(r), "Response")
    assert r.output_text == "Instructed." and r.instructions == "INSTRUCTIONS-MARKER: be terse."
    # Every kind of message item reaches the prompt: system, developer, an earlier
    # assistant turn (output_text parts), easy messages with string content.
    items: Any = [
        {"role": "system", "content": "You are terse."},
        {"role": "developer", "content": [{"type": "input_text", "text": "Be kind."}]},
        {"role": "user", "content": "First question"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "EARLIER-ASSISTANT-TURN"}],
        },
        {"type": "message", "role": "user", "content": "And now?"},
    ]
    r = client.responses.create(model=MODEL, input=items)
    assert r.output_text == "Seen the earlier turn."


def data_uri(fmt: str, size: tuple[int, int]) -> str:
    buf = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buf, format=fmt)
    return f"data:image/{fmt.lower()};base64," + base64.b64encode(buf.getvalue()).decode()


def test_input_images_reach_the_engine(client: openai.OpenAI) -> None:
    parts: Any = [
        {"type": "input_text", "text": "What is in these images?"},
        {"type": "input_image", "image_url": data_uri("PNG", (64, 32)), "detail": "auto"},
        {"type": "input_image", "image_url": data_uri("JPEG", (20, 10)), "detail": "low"},
    ]
    r = client.responses.create(model=VLM, input=[{"role": "user", "content": parts}])
    assert r.output_text == "I see 2 image(s): 64x32 image/png, 20x10 image/jpeg."


def test_stream_equals_non_stream(client: openai.OpenAI) -> None:
    kw: Any = {"model": MODEL, "input": "Tell me a story", "max_output_tokens": 40}
    whole = client.responses.create(**kw, extra_body={"seed": 5})
    deltas: list[str] = []
    completed = None
    with client.responses.create(**kw, stream=True, extra_body={"seed": 5}) as stream:
        for event in stream:
            validate(sdk_json(event), "ResponseStreamEvent")
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
            elif event.type in ("response.completed", "response.incomplete"):
                completed = event.response
    assert completed is not None and "".join(deltas) == whole.output_text != ""
    assert completed.output_text == whole.output_text and completed.status == whole.status
    assert without_ids(completed.output) == without_ids(whole.output)
    assert completed.usage is not None and whole.usage is not None
    assert completed.usage.output_tokens == whole.usage.output_tokens
    assert completed.usage.input_tokens == whole.usage.input_tokens


def test_raw_stream_events(stack: tuple[MockIE, NeutrinoProc]) -> None:
    status, raw = post(stack[1], {"model": MODEL, "input": "Say hello", "stream": True})
    assert status == 200 and raw.startswith(b": ok\n\n")
    events = wire_events(raw)
    kinds = [e["type"] for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == HELLO == events[-4]["text"]
    assert events[-1]["response"]["output"][0] == events[-2]["item"]
    assert events[0]["response"]["status"] == "in_progress"


def test_stream_helper(client: openai.OpenAI) -> None:
    with client.responses.stream(model=MODEL, input="Say hello") as stream:
        snapshots = [e.snapshot for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert final.output_text == HELLO and snapshots[-1] == HELLO


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_function_tool_round_trip(client: openai.OpenAI, streamed: bool) -> None:
    question: Any = [{"role": "user", "content": "What is the weather in Paris?"}]
    if streamed:
        with client.responses.stream(model=MODEL, input=question, tools=TOOLS) as stream:
            names = [e.type for e in stream]
            first: Any = stream.get_final_response()
        assert "response.function_call_arguments.delta" in names
        assert "response.function_call_arguments.done" in names
    else:
        first = client.responses.create(model=MODEL, input=question, tools=TOOLS)
    validate(sdk_json(first), "Response")
    [call] = first.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"} and call.status == "completed"
    assert call.call_id and call.id and first.status == "completed"
    assert sdk_json(first.tools[0]) == {**TOOLS[0]}
    answer = client.responses.create(
        model=MODEL,
        tools=TOOLS,
        input=[
            *question,
            sdk_json(call),  # the model's call, as the SDK read it
            {
                "type": "function_call_output",
                "call_id": call.call_id,
                "output": "tool-result-sunny-21",
            },
        ],
    )
    assert answer.output_text == "It is sunny, 21 degrees."


def test_tool_choice_named_and_none(client: openai.OpenAI) -> None:
    r = client.responses.create(
        model=MODEL,
        input="Say hello",
        tools=TOOLS,
        tool_choice={"type": "function", "name": "get_weather"},
    )
    validate(sdk_json(r), "Response")
    [call] = r.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert isinstance(json.loads(call.arguments)["city"], str)
    assert sdk_json(r.tool_choice) == {"type": "function", "name": "get_weather"}
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(
            model=MODEL, input="x", tools=TOOLS, tool_choice={"type": "function", "name": "nope"}
        )
    assert isinstance(info.value.body, dict) and info.value.body["param"] == "tool_choice"


def test_text_format_json_schema(client: openai.OpenAI) -> None:
    fmt: Any = {"type": "json_schema", "name": "weather", "schema": SCHEMA, "strict": True}
    r = client.responses.create(
        model=MODEL, input="Weather in Lyon as JSON", text={"format": fmt}, max_output_tokens=300
    )
    validate(sdk_json(r), "Response")
    jsonschema.validate(json.loads(r.output_text), SCHEMA)
    assert sdk_json(r.text)["format"]["name"] == "weather"
    streamed = "".join(
        e.delta
        for e in client.responses.create(
            model=MODEL,
            input="Weather in Lyon as JSON",
            text={"format": fmt},
            max_output_tokens=300,
            stream=True,
        )
        if e.type == "response.output_text.delta"
    )
    jsonschema.validate(json.loads(streamed), SCHEMA)
    obj = client.responses.create(
        model=MODEL,
        input="Any JSON",
        text={"format": {"type": "json_object"}},
        max_output_tokens=200,
    )
    assert isinstance(json.loads(obj.output_text), dict)


class Weather(pydantic.BaseModel):
    city: str
    temperature: int


def test_parse_helper(client: openai.OpenAI) -> None:
    r = client.responses.parse(
        model=MODEL, input="Weather in Oslo", text_format=Weather, max_output_tokens=200
    )
    assert isinstance(r.output_parsed, Weather)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_reasoning_split(client: openai.OpenAI, streamed: bool) -> None:
    kw: Any = {"model": R1, "input": "think-about-it", "reasoning": {"effort": "low"}}
    if streamed:
        with client.responses.stream(**kw) as stream:
            deltas = [e.delta for e in stream if e.type == "response.reasoning_text.delta"]
            r = stream.get_final_response()
        assert "".join(deltas) == THOUGHT
    else:
        r = client.responses.create(**kw)
    validate(sdk_json(r), "Response")
    reasoning, message = r.output
    assert reasoning.type == "reasoning" and message.type == "message"
    assert reasoning.content is not None and reasoning.content[0].text == THOUGHT
    assert r.output_text == ANSWER
    assert r.usage is not None and r.usage.output_tokens_details.reasoning_tokens > 0
    assert r.reasoning is not None and r.reasoning.effort == "low"


def test_reasoning_item_in_input(client: openai.OpenAI) -> None:
    first = client.responses.create(model=R1, input="think-about-it")
    follow = client.responses.create(
        model=R1,
        input=[
            {"role": "user", "content": "think-about-it"},
            *[sdk_json(item) for item in first.output],
            {"role": "user", "content": "think-about-it again"},
        ],
    )
    assert follow.output_text == ANSWER


def test_max_output_tokens_is_incomplete(
    client: openai.OpenAI, stack: tuple[MockIE, NeutrinoProc]
) -> None:
    r = client.responses.create(model=MODEL, input="Tell me a story", max_output_tokens=5)
    validate(sdk_json(r), "Response")
    assert r.status == "incomplete" and r.incomplete_details is not None
    assert r.incomplete_details.reason == "max_output_tokens"
    [msg] = r.output
    assert msg.type == "message" and msg.status == "incomplete"
    assert r.usage is not None and r.usage.output_tokens == 5
    status, raw = post(
        stack[1],
        {"model": MODEL, "input": "Tell me a story", "max_output_tokens": 5, "stream": True},
    )
    last = wire_events(raw)[-1]
    assert status == 200 and last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_logprobs(client: openai.OpenAI) -> None:
    kw: Any = {
        "model": MODEL,
        "input": "Say hello",
        "top_logprobs": 2,
        "include": ["message.output_text.logprobs"],
    }
    r = client.responses.create(**kw)
    validate(sdk_json(r), "Response")
    [msg] = r.output
    assert msg.type == "message"
    lps = msg.content[0].logprobs
    assert lps and "".join(lp.token for lp in lps) == HELLO
    assert all(len(lp.top_logprobs) == 2 for lp in lps) and r.top_logprobs == 2
    streamed = [
        sdk_json(lp)
        for e in client.responses.create(**kw, stream=True)
        if e.type == "response.output_text.delta"
        for lp in e.logprobs
    ]
    assert streamed == [sdk_json(lp) for lp in lps]


def test_previous_response_id_needs_the_store(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model=MODEL, input="x", previous_response_id="resp_abc")
    body: Any = info.value.body
    assert body["param"] == "previous_response_id" and "store" in body["message"]
    assert body["type"] == "invalid_request_error"


def test_unknown_model_is_404(client: openai.OpenAI) -> None:
    for stream in (False, True):
        with pytest.raises(openai.NotFoundError) as info:
            client.responses.create(model="no-such-model", input="x", stream=stream)
        body: Any = info.value.body
        assert body["code"] == "model_not_found" and body["param"] == "model"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
        ({"input": [{"type": "file_search_call"}]}, "input[0]"),
        ({"input": []}, "input"),
        ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "x", "temperature": 5}, "temperature"),
        ({"input": "x", "reasoning": {"effort": "huge"}}, "reasoning.effort"),
        ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        (
            {"input": "x", "text": {"format": {"type": "json_schema", "name": "n", "schema": 3}}},
            "text.format.schema",
        ),
        (
            {
                "input": [
                    {
                        "role": "user",
                        "content": [{"type": "input_image", "image_url": "data:image/png,xx"}],
                    }
                ]
            },
            "input[0].content[0]",
        ),
        ({"input": "x", "background": True}, "background"),
        ({"input": "x", "metadata": {"k": "v" * 600}}, "metadata"),
    ],
)
def test_bad_input_names_the_parameter(
    stack: tuple[MockIE, NeutrinoProc], body: dict[str, Any], param: str
) -> None:
    status, raw = post(stack[1], {"model": MODEL, **body})
    err = json.loads(raw)["error"]
    assert status == 400 and err["param"] == param and err["type"] == "invalid_request_error"


def test_client_gone_mid_stream_cancels_once(
    client: openai.OpenAI, stack: tuple[MockIE, NeutrinoProc]
) -> None:
    mock, server = stack
    before = len(mock.events("cancel"))
    stream = client.responses.create(model=MODEL, input="stall-here", stream=True)
    for event in stream:
        if event.type == "response.output_text.delta":
            break
    stream.close()
    assert len(mock.wait_event("cancel", before + 1)) == before + 1
    time.sleep(0.3)  # would a second cancel arrive?
    cancels = mock.events("cancel")[before:]
    assert len(cancels) == 1 and cancels[0]["reason"] == "client disconnected"
    assert server.history(1)[0]["state"] == "cancelled"


def test_engine_error_mid_stream_fails_the_response(stack: tuple[MockIE, NeutrinoProc]) -> None:
    status, raw = post(stack[1], {"model": MODEL, "input": "break-here", "stream": True})
    events = wire_events(raw)
    assert status == 200 and [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    failed = events[-1]["response"]
    assert failed["status"] == "failed" and failed["error"]["code"] == "server_error"
    assert events[-2]["code"] == "engine_error"
    client = openai.OpenAI(base_url=stack[1].base_url + "/v1", api_key="x", max_retries=0)
    kinds = [e.type for e in client.responses.create(model=MODEL, input="break-here", stream=True)]
    assert kinds[-2:] == ["error", "response.failed"]


def test_request_id_names_the_response(stack: tuple[MockIE, NeutrinoProc]) -> None:
    req = urllib.request.Request(
        stack[1].base_url + "/v1/responses",
        data=json.dumps({"model": MODEL, "input": "Say hello"}).encode(),
        headers={"Content-Type": "application/json", "X-Request-Id": "abc-123"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.headers["X-Request-Id"] == "abc-123"  # echoed as sent
        assert json.loads(r.read())["id"] == "resp_abc-123"


# ---------------------------------------------------------------- the optional store


@pytest.fixture(scope="module")
def stored(
    stack: tuple[MockIE, NeutrinoProc], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[openai.OpenAI]:
    """Neutrino with a store of 3 responses, served by aiohttp (no fast path)."""
    work = tmp_path_factory.mktemp("responses-store")
    config = f"""
[[engines]]
socket = "{stack[0].socket}"
[http]
fast_path = false
[responses]
store_entries = 3
"""
    server = NeutrinoProc(work, config=config)
    try:
        server.start()
        yield openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    finally:
        server.stop()


def test_store_continues_a_conversation(stored: openai.OpenAI) -> None:
    first = stored.responses.create(model=MODEL, input="Remember PINEAPPLE-42", instructions="Hi")
    assert first.output_text == "Noted: PINEAPPLE-42."
    second = stored.responses.create(
        model=MODEL, input="What was it?", previous_response_id=first.id
    )
    validate(sdk_json(second), "Response")
    assert second.output_text == "It was PINEAPPLE-42."
    assert second.previous_response_id == first.id
    got = stored.responses.retrieve(first.id)
    assert sdk_json(got) == sdk_json(first)
    with stored.responses.stream(
        model=MODEL, input="Once more?", previous_response_id=first.id
    ) as stream:
        streamed = stream.get_final_response()
    assert streamed.output_text == "It was PINEAPPLE-42."
    assert stored.responses.retrieve(streamed.id).output_text == streamed.output_text


def test_store_refusals_and_bounds(stored: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        stored.responses.create(model=MODEL, input="x", previous_response_id="resp_unknown")
    body: Any = info.value.body
    assert body["code"] == "previous_response_not_found"
    assert body["param"] == "previous_response_id"
    kept = stored.responses.create(model=MODEL, input="Say hello")
    not_kept = stored.responses.create(model=MODEL, input="Say hello", store=False)
    with pytest.raises(openai.NotFoundError):
        stored.responses.retrieve(not_kept.id)
    stored.responses.delete(kept.id)
    with pytest.raises(openai.NotFoundError):
        stored.responses.retrieve(kept.id)
    ids = [stored.responses.create(model=MODEL, input="Say hello").id for _ in range(4)]
    with pytest.raises(openai.NotFoundError):  # the oldest of 4 went: 3 are kept
        stored.responses.retrieve(ids[0])
    assert [stored.responses.retrieve(i).id for i in ids[1:]] == ids[1:]


def test_a_stream_whose_closing_events_outgrow_the_buffer_limit_still_ends(
    tmp_path: Path,
) -> None:
    """A Responses stream ends by repeating the whole answer (output_text.done,
    content_part.done, output_item.done, response.completed), with its logprobs: one
    write larger than [limits] stream_buffer_bytes from a client that reads everything
    is not a client that stopped reading (it was dropped as one)."""
    mock = MockIE(tmp_path, "--reply-tokens", "2000").start()
    config = "[limits]\nstream_buffer_bytes = 65536\n"
    server = NeutrinoProc(tmp_path, "--engine", mock.socket, config=config)
    try:
        server.start()
        body = {
            "model": "qwen2.5-mock",
            "input": "Tell me everything.",
            "max_output_tokens": 4000,  # the mock's reply (2000 tokens) ends first
            "top_logprobs": 20,
            "include": ["message.output_text.logprobs"],
            "stream": True,
        }
        req = urllib.request.Request(
            server.base_url + "/v1/responses",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=60) as r:
            raw = r.read()
        last = raw.rstrip().rpartition(b"\n\n")[2]
        assert len(raw) > 4 * 65536  # the closing events alone outgrow the limit
        assert last.startswith(b"event: response.completed"), last[:200]
        assert "not reading its stream" not in server.log()
    finally:
        server.stop()
        mock.stop()


def test_a_large_answers_logprobs_are_written_in_pieces_and_stored_whole(
    tmp_path: Path,
) -> None:
    """2,000 tokens with 20 alternatives each: the answer is written as it is rendered
    (chunked, pieces.py) and is the answer the stream gives; the stored copy has it all."""
    mock = MockIE(tmp_path, "--reply-tokens", "2000").start()
    server = NeutrinoProc(
        tmp_path, "--engine", mock.socket, config="[responses]\nstore_entries = 4\n"
    )
    try:
        server.start()
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
        kw: Any = {
            "model": "qwen2.5-mock",
            "input": "Tell me everything.",
            "max_output_tokens": 4000,
            "top_logprobs": 20,
            "include": ["message.output_text.logprobs"],
        }
        raw = client.responses.with_raw_response.create(**kw)
        assert raw.headers.get("transfer-encoding") == "chunked"
        r = raw.parse()
        validate(sdk_json(r), "Response")
        lps = [sdk_json(lp) for lp in r.output[0].content[0].logprobs]
        assert len(lps) == 2000 and all(len(lp["top_logprobs"]) == 20 for lp in lps)
        streamed = [
            sdk_json(lp)
            for e in client.responses.create(**kw, stream=True)
            if e.type == "response.output_text.delta"
            for lp in e.logprobs
        ]
        assert streamed == lps
        kept: Any = client.responses.retrieve(r.id)
        assert [sdk_json(lp) for lp in kept.output[0].content[0].logprobs] == lps
    finally:
        server.stop()
        mock.stop()
