"""gRPC ``neutrino.v1.Inference`` has every text feature of the HTTP chat route.

A real Neutrino in front of a seeded, scripted ``mock_ie``; requests written once as an
OpenAI chat body go over HTTP/1.1 and, translated as a gRPC client writes them
(tests/support/grpc_parity.py), through the generated stubs, unary and streamed. The
answers must agree: text, reasoning, tool calls, logprobs (exactly: tokens, bytes,
values), finish and stop reasons, usage, and the engine query itself (prompt ids, seed,
sampling). Plus what only gRPC has: image bytes, choice indexes on stream messages,
reflection v1, statuses with HTTP's error codes, one engine cancel per choice.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from google.protobuf import descriptor_pb2
from PIL import Image

from neutrino.text.registry import load_tokenizer
from neutrino.v1 import inference_pb2, inference_pb2_grpc, reflection_pb2, reflection_pb2_grpc
from tests.support import parity
from tests.support.grpc_parity import (
    grpc_answer,
    grpc_error_answer,
    grpc_request,
    grpc_stream_answer,
    image_bytes,
)
from tests.support.parity import Answer
from tests.support.procs import MockIE, NeutrinoProc, free_port, serving

MODEL = "qwen3-mock"  # Qwen3: <think> reasoning, Hermes-style <tool_call> blocks
VLM = "qwen2.5-vl-mock"
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "exchange",
            "description": "Convert money.",
            "parameters": {
                "type": "object",
                "properties": {"amount": {"type": "number", "minimum": 1}},
                "required": ["amount"],
            },
        },
    },
]
STOP_REPLY = "one two three four five six seven"
RULES: list[dict[str, Any]] = [
    {"match": "g-plain", "reply": "Plain answer: ünïcödé 你好 ✓ and more words."},
    {"match": "g-think", "reply": "<think>First 6, then times 7.</think>So: 42."},
    {
        "match": "g-tool-result",  # the conversation holds the tool's answer: a reply
        "reply": "It is sunny in Zürich.",
    },
    {
        "match": "g-tool",
        "reply": 'Let me look.<tool_call>\n{"name": "weather", "arguments": '
        '{"city": "Zürich", "days": 2}}\n</tool_call>',
    },
    {"match": "g-stop", "reply": STOP_REPLY},
    {"match": "g-stall", "fault": "stall", "fault_after": 2},
]


def chat(text: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 40,
        "seed": 7,
    }
    body.update(extra)
    return body


JSON_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "city",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "people": {"type": "integer"}},
            "required": ["name", "people"],
            "additionalProperties": False,
        },
    },
}
CASES: dict[str, dict[str, Any]] = {
    "plain": chat("g-plain"),
    "sampled": chat("tell me anything", max_tokens=16, temperature=0.5, top_p=0.75, top_k=20),
    "reasoning": chat("g-think"),
    "tools-auto": chat("g-tool", tools=TOOLS),
    "tools-required": chat("pick a tool", tools=TOOLS, tool_choice="required"),
    "tools-named": chat(
        "money please",
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "exchange"}},
    ),
    "tools-none": chat("g-plain", tools=TOOLS, tool_choice="none"),
    "logprobs": chat("g-plain", logprobs=True, top_logprobs=3),
    "n2": chat("two answers", n=2, max_tokens=10, logprobs=True, top_logprobs=1),
    "structured": chat("a city", response_format=JSON_SCHEMA),
    "json-object": chat("any object", response_format={"type": "json_object"}),
    "stop": chat("g-stop", stop=["four"]),
    "stop-kept": chat("g-stop", stop=["four"], include_stop_str_in_output=True),
    "length": chat("g-plain", max_tokens=3),
    "extras": chat(
        "g-plain",
        min_tokens=2,
        presence_penalty=0.5,
        frequency_penalty=-0.5,
        repetition_penalty=1.25,
        min_p=0.125,
        user="someone",
        chat_template_kwargs={"enable_thinking": False},
    ),
}


# ------------------------------------------------------------------------ the stack


class Stack:
    def __init__(self, mock: MockIE, server: NeutrinoProc, address: str) -> None:
        self.mock = mock
        self.server = server
        self.address = address


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work: Path = tmp_path_factory.mktemp("grpc_parity")
    script = work / "script.json"
    script.write_text(json.dumps({"rules": RULES}))
    mock = MockIE(
        work,
        *("--script", str(script), "--itl-ms", "2"),
        *("--model", f"{MODEL}:qwen3:32768", "--model", f"{VLM}:qwen2:32768:generate+vision"),
    ).start()
    address = f"127.0.0.1:{free_port()}"
    server = NeutrinoProc(work, "--engine", mock.socket, "--grpc-address", address)
    with serving(mock, server):
        yield Stack(mock, server, address)


@pytest.fixture
async def channel(stack: Stack) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(stack.address) as ch:
        yield ch


@pytest.fixture
def stub(channel: grpc.aio.Channel) -> inference_pb2_grpc.InferenceStub:
    return inference_pb2_grpc.InferenceStub(channel)


async def http(stack: Stack, body: dict[str, Any], path: str = "/v1/chat/completions") -> Any:
    async with (
        aiohttp.ClientSession() as session,
        session.post(stack.server.base_url + path, json=body) as resp,
    ):
        return resp.status, await resp.json()


async def streamed(
    stub: inference_pb2_grpc.InferenceStub, req: inference_pb2.GenerateRequest
) -> list[inference_pb2.GenerateStreamResponse]:
    return [m async for m in stub.GenerateStream(req, timeout=20)]


def last_query(stack: Stack, before: int) -> list[dict[str, Any]]:
    """The engine queries since ``before``, without what differs per request."""
    out = []
    for q in stack.mock.events("query")[before:]:
        out.append(
            {k: v for k, v in q.items() if k not in ("request_id", "traceparent", "t", "conn")}
        )
    return out


def same(where: str, base: Answer, got: Answer) -> None:
    """Everything the answers say agrees (logprobs included, to 4 decimals here)."""
    assert got.error is None, (where, got)
    assert (got.prompt_tokens, got.completion_tokens) == (
        base.prompt_tokens,
        base.completion_tokens,
    ), where
    assert got.choices == base.choices, where


# ------------------------------------------------------------------- same answers


@pytest.mark.parametrize("case", sorted(CASES))
async def test_grpc_answers_as_http_does(
    stack: Stack, stub: inference_pb2_grpc.InferenceStub, case: str
) -> None:
    body = CASES[case]
    n = body.get("n", 1)
    before = len(stack.mock.events("query"))
    status, raw = await http(stack, body)
    assert status == 200, raw
    base = parity.openai_answer(status, raw)
    http_queries = last_query(stack, before)
    assert len(http_queries) == n

    req = grpc_request(body)
    before = len(stack.mock.events("query"))
    unary = await stub.Generate(req, timeout=20)
    # The same engine request: prompt ids (the template saw the same messages and tools),
    # seed per choice, sampling, logprobs, stop token ids.
    assert last_query(stack, before) == http_queries
    same(f"{case} unary", base, grpc_answer(unary))
    stream = await streamed(stub, req)
    same(f"{case} stream", base, grpc_answer_exact_order(stream))

    # What HTTP says beyond parity's common form: stop reasons and usage details.
    for c, hc in zip(unary.choices, raw["choices"], strict=True):
        assert stop_of(c.stop_reason if c.HasField("stop_reason") else None) == hc["stop_reason"]
    assert usage_of(unary.usage) == usage_of_http(raw["usage"])
    # Choice 0 at the top, as before `choices` existed.
    assert unary.text == unary.choices[0].text
    assert unary.finish_reason == unary.choices[0].finish_reason
    assert unary.stop_reason == unary.choices[0].stop_reason
    assert [c.index for c in unary.choices] == list(range(n))


def grpc_answer_exact_order(msgs: list[inference_pb2.GenerateStreamResponse]) -> Answer:
    """A stream's answer, after checking its shape: one id, every choice ends once, the
    usage only in the last message."""
    assert len({(m.id, m.model, m.created) for m in msgs}) == 1
    finals = [m.index for m in msgs if m.finish_reason]
    assert sorted(finals) == sorted(set(m.index for m in msgs)), finals
    assert [m.HasField("usage") for m in msgs] == [False] * (len(msgs) - 1) + [True]
    return grpc_stream_answer(msgs)


def stop_of(r: inference_pb2.StopReason | None) -> str | int | None:
    if r is None:
        return None
    return r.stop_string if r.WhichOneof("reason") == "stop_string" else r.stop_token_id


def usage_of(u: Any) -> dict[str, Any]:
    return {
        "prompt": u.prompt_tokens,
        "completion": u.completion_tokens,
        "total": u.total_tokens,
        "cached": u.cached_tokens,
        "reasoning": u.reasoning_tokens if u.HasField("reasoning_tokens") else None,
    }


def usage_of_http(u: dict[str, Any]) -> dict[str, Any]:
    return {
        "prompt": u["prompt_tokens"],
        "completion": u["completion_tokens"],
        "total": u["total_tokens"],
        "cached": u["prompt_tokens_details"]["cached_tokens"],
        "reasoning": (u.get("completion_tokens_details") or {}).get("reasoning_tokens"),
    }


async def test_the_cases_say_what_they_test(
    stack: Stack, stub: inference_pb2_grpc.InferenceStub
) -> None:
    """The gRPC answers are what each case is about (a parity of empty answers fails)."""
    got = {name: await stub.Generate(grpc_request(b), timeout=20) for name, b in CASES.items()}
    assert got["plain"].text == "Plain answer: ünïcödé 你好 ✓ and more words."
    think = got["reasoning"].choices[0]
    assert think.reasoning == "First 6, then times 7." and think.text == "So: 42."
    assert got["reasoning"].usage.reasoning_tokens > 0
    auto = got["tools-auto"].choices[0]
    assert (
        auto.text == "Let me look." and auto.finish_reason == inference_pb2.FINISH_REASON_TOOL_CALLS
    )
    assert [(c.name, json.loads(c.arguments)) for c in auto.tool_calls] == [
        ("weather", {"city": "Zürich", "days": 2})
    ]
    assert auto.tool_calls[0].id
    assert got["tools-required"].choices[0].tool_calls[0].name in (
        "weather",
        "exchange",
    )
    assert [c.name for c in got["tools-named"].choices[0].tool_calls] == ["exchange"]
    assert not got["tools-none"].choices[0].tool_calls
    lp = got["logprobs"].choices[0].logprobs.content
    assert lp and all(len(e.top_logprobs) == 3 for e in lp)
    assert b"".join(e.bytes for e in lp).decode() == got["logprobs"].text
    n2 = got["n2"]
    assert [c.index for c in n2.choices] == [0, 1] and n2.choices[0].text != n2.choices[1].text
    assert set(json.loads(got["structured"].text)) == {"name", "people"}
    assert isinstance(json.loads(got["json-object"].text), dict)
    assert got["stop"].text == "one two three " and got["stop"].stop_reason.stop_string == "four"
    assert got["stop-kept"].text == "one two three four"
    assert got["length"].finish_reason == inference_pb2.FINISH_REASON_LENGTH
    assert got["length"].usage.completion_tokens == 3


async def test_stream_carries_reasoning_calls_and_logprobs_as_deltas(
    stub: inference_pb2_grpc.InferenceStub,
) -> None:
    msgs = await streamed(stub, grpc_request(CASES["reasoning"]))
    reasoning = [m.reasoning_delta for m in msgs if m.reasoning_delta]
    assert len(reasoning) > 1 and "".join(reasoning) == "First 6, then times 7."
    first_text = next(i for i, m in enumerate(msgs) if m.delta)
    assert all(not m.reasoning_delta for m in msgs[first_text + 1 :])  # reasoning came first

    msgs = await streamed(stub, grpc_request(CASES["tools-auto"]))
    deltas = [d for m in msgs for d in m.tool_calls]
    assert deltas[0].HasField("id") and deltas[0].name == "weather" and deltas[0].index == 0
    assert json.loads("".join(d.arguments for d in deltas)) == {"city": "Zürich", "days": 2}
    assert msgs[-1].finish_reason == inference_pb2.FINISH_REASON_TOOL_CALLS

    msgs = await streamed(stub, grpc_request(CASES["logprobs"]))
    entries = [e for m in msgs for e in m.logprobs.content]
    assert entries and all(len(e.top_logprobs) == 3 for e in entries)
    assert b"".join(e.bytes for e in entries).decode() == "".join(m.delta for m in msgs)


async def test_logprobs_are_exactly_http_s(
    stack: Stack, stub: inference_pb2_grpc.InferenceStub
) -> None:
    body = CASES["logprobs"]
    _, raw = await http(stack, body)
    want = [
        (
            e["token"],
            bytes(e["bytes"]),
            e["logprob"],
            [(t["token"], bytes(t["bytes"]), t["logprob"]) for t in e["top_logprobs"]],
        )
        for e in raw["choices"][0]["logprobs"]["content"]
    ]
    unary = await stub.Generate(grpc_request(body), timeout=20)
    got = [
        (e.token, e.bytes, e.logprob, [(t.token, t.bytes, t.logprob) for t in e.top_logprobs])
        for e in unary.choices[0].logprobs.content
    ]
    assert got == want
    msgs = await streamed(stub, grpc_request(body))
    streamed_entries = [
        (e.token, e.bytes, e.logprob, [(t.token, t.bytes, t.logprob) for t in e.top_logprobs])
        for m in msgs
        for e in m.logprobs.content
    ]
    assert streamed_entries == want


async def test_n2_streams_interleave_with_their_index(
    stack: Stack, stub: inference_pb2_grpc.InferenceStub
) -> None:
    body = chat("two answers", n=2, max_tokens=12)
    _, raw = await http(stack, body)
    msgs = await streamed(stub, grpc_request(body))
    texts = ["".join(m.delta for m in msgs if m.index == i) for i in (0, 1)]
    assert texts == [c["message"]["content"] for c in raw["choices"]]
    assert {m.index for m in msgs} == {0, 1}
    assert msgs[-1].usage.completion_tokens == raw["usage"]["completion_tokens"]
    assert msgs[-1].usage.completion_tokens == 24  # both choices counted


async def test_seed_gives_the_same_text_and_another_seed_another(
    stub: inference_pb2_grpc.InferenceStub,
) -> None:
    body = chat("a sampled reply", max_tokens=12)
    one = await stub.Generate(grpc_request(body), timeout=20)
    two = await stub.Generate(grpc_request(body), timeout=20)
    other = await stub.Generate(grpc_request({**body, "seed": 8}), timeout=20)
    assert one.text == two.text and one.text != other.text
    # n=2 with seed 7: choice 1 is what seed 8 gives alone (as over HTTP).
    n2 = await stub.Generate(grpc_request({**body, "n": 2}), timeout=20)
    assert [c.text for c in n2.choices] == [one.text, other.text]


async def test_stop_token_ids(stack: Stack, stub: inference_pb2_grpc.InferenceStub) -> None:
    ids = load_tokenizer("qwen3").encode(STOP_REPLY)
    body = chat("g-stop", stop_token_ids=[ids[3]])
    _, raw = await http(stack, body)
    unary = await stub.Generate(grpc_request(body), timeout=20)
    assert unary.text == raw["choices"][0]["message"]["content"]
    assert unary.usage.completion_tokens == raw["usage"]["completion_tokens"] < len(ids)
    assert unary.stop_reason.stop_token_id == raw["choices"][0]["stop_reason"] == ids[3]
    msgs = await streamed(stub, grpc_request(body))
    assert "".join(m.delta for m in msgs) == unary.text
    assert msgs[-1].stop_reason.stop_token_id == ids[3]


def png(size: tuple[int, int] = (64, 32)) -> str:
    buf = io.BytesIO()
    Image.new("RGB", size, (10, 200, 30)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


async def test_images_as_data_uri_or_bytes(
    stack: Stack, stub: inference_pb2_grpc.InferenceStub
) -> None:
    uri = png()
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": uri}},
    ]
    body = {"model": VLM, "messages": [{"role": "user", "content": content}], "max_tokens": 40}
    _, raw = await http(stack, body)
    assert raw["choices"][0]["message"]["content"] == "I see 1 image(s): 64x32 image/png."
    req = grpc_request(body)
    as_bytes = grpc_request(body)
    as_bytes.chat.messages[0].parts[1].image = image_bytes(uri)
    for r in (req, as_bytes):
        before = len(stack.mock.events("query"))
        unary = await stub.Generate(r, timeout=20)
        assert unary.text == raw["choices"][0]["message"]["content"]
        assert unary.usage.prompt_tokens == raw["usage"]["prompt_tokens"]
        assert stack.mock.events("query")[before]["images"] == 1
        msgs = await streamed(stub, r)
        assert "".join(m.delta for m in msgs) == unary.text


async def test_a_tool_conversation_over_several_requests(
    stack: Stack, stub: inference_pb2_grpc.InferenceStub
) -> None:
    """The assistant's call and the tool's answer go back in; the template renders them
    as for HTTP (the same prompt ids), and the model answers."""
    first = await stub.Generate(grpc_request(CASES["tools-auto"]), timeout=20)
    call = first.choices[0].tool_calls[0]
    messages = [
        {"role": "user", "content": "g-tool"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "g-tool-result: sunny"},
    ]
    body = chat("", tools=TOOLS)
    body["messages"] = messages
    before = len(stack.mock.events("query"))
    status, raw = await http(stack, body)
    assert status == 200, raw
    http_query = last_query(stack, before)
    before = len(stack.mock.events("query"))
    unary = await stub.Generate(grpc_request(body), timeout=20)
    assert last_query(stack, before) == http_query
    assert unary.text == raw["choices"][0]["message"]["content"] == "It is sunny in Zürich."
    assert unary.finish_reason == inference_pb2.FINISH_REASON_STOP


async def test_completions_with_echo_and_logprobs(
    stack: Stack, stub: inference_pb2_grpc.InferenceStub
) -> None:
    body = {"model": MODEL, "prompt": "Once upon", "max_tokens": 6, "seed": 3, "echo": True}
    _, raw = await http(stack, body, "/v1/completions")
    req = inference_pb2.GenerateRequest(
        model=MODEL,
        completion=inference_pb2.Completion(prompt="Once upon", echo=True),
        max_tokens=6,
        seed=3,
    )
    unary = await stub.Generate(req, timeout=20)
    assert unary.text == raw["choices"][0]["text"] and unary.text.startswith("Once upon")
    msgs = await streamed(stub, req)
    assert msgs[0].delta == "Once upon" and "".join(m.delta for m in msgs) == unary.text

    body = {"model": MODEL, "prompt": "Once upon", "max_tokens": 6, "seed": 3, "logprobs": 2}
    _, raw = await http(stack, body, "/v1/completions")
    req = inference_pb2.GenerateRequest(
        model=MODEL,
        completion=inference_pb2.Completion(prompt="Once upon"),
        max_tokens=6,
        seed=3,
        logprobs=True,
        top_logprobs=2,
    )
    unary = await stub.Generate(req, timeout=20)
    lp = raw["choices"][0]["logprobs"]
    entries = unary.choices[0].logprobs.content
    assert [e.token for e in entries] == lp["tokens"]
    assert [e.logprob for e in entries] == lp["token_logprobs"]
    assert [{t.token: t.logprob for t in e.top_logprobs} for e in entries] == lp["top_logprobs"]


# ----------------------------------------------------------------------- errors


def bad(body: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**body, **extra}


ERRORS: dict[str, tuple[dict[str, Any], grpc.StatusCode, str]] = {
    "unknown-model": (
        bad(chat("g-plain"), model="no-such-model"),
        grpc.StatusCode.NOT_FOUND,
        "model",
    ),
    "max-tokens": (chat("g-plain", max_tokens=-5), grpc.StatusCode.INVALID_ARGUMENT, "max_tokens"),
    "top-logprobs-alone": (
        chat("g-plain", top_logprobs=2),
        grpc.StatusCode.INVALID_ARGUMENT,
        "top_logprobs",
    ),
    "required-without-tools": (
        chat("g-plain", tool_choice="required"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "chat.tool_choice",
    ),
    "named-not-in-tools": (
        chat("g-plain", tools=TOOLS, tool_choice={"type": "function", "function": {"name": "x"}}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "chat.tool_choice",
    ),
    "named-and-format": (
        chat(
            "g-plain",
            tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "weather"}},
            response_format={"type": "json_object"},
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "chat.tool_choice",
    ),
    "bad-schema": (
        chat(
            "g-plain",
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": "nonsense"}},
            },
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "chat.response_format.json_schema.schema_json",
    ),
    "bad-image": (
        {
            "model": VLM,
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}],
                }
            ],
        },
        grpc.StatusCode.INVALID_ARGUMENT,
        "chat.messages[0].parts[0]",
    ),
    "too-many-choices": (chat("g-plain", n=1000), grpc.StatusCode.INVALID_ARGUMENT, "n"),
    "template-kwargs": (
        chat("g-plain", chat_template_kwargs={"messages": []}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "chat.chat_template_kwargs_json",
    ),
}


# Where an error's message names fields, gRPC's names them as the proto does.
PROTO_NAMES: dict[str, list[tuple[str, str]]] = {
    "named-not-in-tools": [("tool_choice", "chat.tool_choice"), ("tools", "chat.tools")],
    "required-without-tools": [("tool_choice", "chat.tool_choice"), ("tools", "chat.tools")],
    "template-kwargs": [("chat_template_kwargs", "chat.chat_template_kwargs_json")],
    "named-and-format": [
        ("tool_choice", "chat.tool_choice"),
        (
            "response_format, structured_outputs or a guided_ field",
            "chat.response_format or structured_outputs",
        ),
    ],
}


def in_proto_terms(case: str, message: str) -> str:
    """HTTP's message for ``case`` with its field names the proto's."""
    for http_name, proto_name in PROTO_NAMES.get(case, ()):
        message = re.sub(rf"(?<![\w.]){re.escape(http_name)}(?![\w])", proto_name, message)
    return message


@pytest.mark.parametrize("case", sorted(ERRORS))
async def test_errors_are_http_s_as_statuses(
    stack: Stack, stub: inference_pb2_grpc.InferenceStub, case: str
) -> None:
    body, code, param = ERRORS[case]
    status, raw = await http(stack, body)
    want = raw["error"]
    before = len(stack.mock.events("query"))
    for call in ("unary", "stream"):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            if call == "unary":
                await stub.Generate(grpc_request(body), timeout=10)
            else:
                await streamed(stub, grpc_request(body))
        err = info.value
        assert err.code() == code, (call, err)
        assert err.details() == in_proto_terms(case, want["message"])
        md = dict(err.trailing_metadata() or ())
        assert md.get("neutrino-error-code") == want["code"]
        assert md.get("neutrino-error-param") == param
        assert parity.kinds_of_http(status, raw) <= grpc_error_answer(err).error  # type: ignore[operator]
    assert len(stack.mock.events("query")) == before  # refused before the engine


def _not_json(r: inference_pb2.GenerateRequest) -> None:
    r.chat.tools[0].parameters_json = "{not json"


def _empty_part(r: inference_pb2.GenerateRequest) -> None:
    r.chat.messages[0].content = ""
    r.chat.messages[0].parts.add()


def _content_and_parts(r: inference_pb2.GenerateRequest) -> None:
    r.chat.messages[0].parts.add(text="also")


def _format_without_type(r: inference_pb2.GenerateRequest) -> None:
    r.chat.response_format.SetInParent()


def _prompt_twice(r: inference_pb2.GenerateRequest) -> None:
    r.completion.CopyFrom(inference_pb2.Completion(prompt="x", prompt_token_ids=[5]))


# Mistakes only a gRPC request can make: INVALID_ARGUMENT naming the proto field.
GRPC_MISTAKES = {
    "chat.tools[0].parameters_json": _not_json,
    "chat.messages[0].parts[0]": _empty_part,
    "chat.messages[0].parts": _content_and_parts,
    "chat.response_format.type": _format_without_type,
    "completion.prompt_token_ids": _prompt_twice,
}


@pytest.mark.parametrize("param", sorted(GRPC_MISTAKES))
async def test_grpc_only_mistakes_name_the_field(
    stub: inference_pb2_grpc.InferenceStub, param: str
) -> None:
    req = grpc_request(chat("g-plain", tools=TOOLS))
    GRPC_MISTAKES[param](req)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Generate(req, timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert dict(info.value.trailing_metadata() or ()).get("neutrino-error-param") == param


# ---------------------------------------------------------------------- cancel


async def test_a_cancelled_n2_stream_cancels_each_choice_once(
    stack: Stack, stub: inference_pb2_grpc.InferenceStub
) -> None:
    before_q = len(stack.mock.events("query"))
    before_c = len(stack.mock.events("cancel"))
    call = stub.GenerateStream(grpc_request(chat("g-stall", n=2, max_tokens=200)), timeout=20)
    seen: set[int] = set()
    async for msg in call:
        seen.add(msg.index)
        if seen == {0, 1}:
            break
    call.cancel()  # the client goes away with both choices stalled on the engine
    cancels = await asyncio.to_thread(stack.mock.wait_event, "cancel", before_c + 2, 10.0)
    await asyncio.sleep(0.3)  # would a third come?
    cancels = stack.mock.events("cancel")[before_c:]
    queries = stack.mock.events("query")[before_q:]
    assert len(queries) == 2 and len(cancels) == 2
    assert sorted(c["request_id"] for c in cancels) == sorted(q["request_id"] for q in queries)
    assert {c["reason"] for c in cancels} == {"client disconnected"}


# ------------------------------------------------------------------- reflection v1


async def test_reflection_v1_lists_and_describes(channel: grpc.aio.Channel) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    requests = [
        reflection_pb2.ServerReflectionRequest(list_services=""),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="neutrino.v1.Inference"),
        reflection_pb2.ServerReflectionRequest(
            file_containing_symbol="grpc.reflection.v1.ServerReflection"
        ),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="no.such.Symbol"),
    ]
    answers = [a async for a in stub.ServerReflectionInfo(iter(requests), timeout=5)]
    assert len(answers) == 4
    names = {s.name for s in answers[0].list_services_response.service}
    assert {
        "neutrino.v1.Inference",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= names
    assert answers[0].original_request.HasField("list_services")
    files = {}
    for raw in answers[1].file_descriptor_response.file_descriptor_proto:
        fd = descriptor_pb2.FileDescriptorProto.FromString(raw)
        files[fd.name] = fd
    inference = files["neutrino/v1/inference.proto"]
    assert "neutrino/v1/common.proto" in files  # with its dependencies
    messages = {m.name: m for m in inference.message_type}
    fields = {f.name for f in messages["GenerateRequest"].field}
    assert {"n", "logprobs", "top_logprobs", "structured_outputs"} <= fields
    assert {"tools", "tool_choice", "response_format"} <= {f.name for f in messages["Chat"].field}
    v1 = [
        descriptor_pb2.FileDescriptorProto.FromString(raw)
        for raw in answers[2].file_descriptor_response.file_descriptor_proto
    ]
    assert [fd.package for fd in v1] == ["grpc.reflection.v1"]
    assert answers[3].error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]
