"""One request, every protocol, the same answer.

The same deterministic requests (a seeded, scripted ``mock_ie``) go over HTTP/1.1, HTTP/3,
gRPC and, where the feature exists there, Anthropic's Messages API and OpenAI's Responses
API, streamed and not. Each answer is read into one form (tests/support/parity.py) and
compared with HTTP/1.1's: tokens and text, reasoning, tool calls, logprobs, finish
reasons, usage counts and error kinds. A client that leaves mid-stream costs exactly one
engine cancel, whatever protocol it spoke.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from PIL import Image

from neutrino.loadgen.h3 import H3Client
from neutrino.v1.inference_pb2_grpc import InferenceStub
from tests.support import parity
from tests.support.grpc_parity import (
    grpc_answer,
    grpc_error_answer,
    grpc_request,
    grpc_stream_answer,
)
from tests.support.parity import Answer
from tests.support.procs import MockIE, NeutrinoProc, free_port, serving

MODEL = "qwen3-mock"  # Qwen3: <think> reasoning and Hermes-style <tool_call> blocks
VLM = "qwen2.5-vl-mock"
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a city up.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "convert",
            "description": "Convert an amount.",
            "parameters": {
                "type": "object",
                "properties": {"amount": {"type": "number"}},
                "required": ["amount"],
            },
        },
    },
]
RULES: list[dict[str, Any]] = [
    {"match": "parity-plain", "reply": "Hello from every protocol: ünïcödé 你好 ✓."},
    {"match": "parity-think", "reply": "<think>Weigh it: 6 ⋅ 7 ≠ 41.</think>The answer is 42."},
    {
        "match": "parity-tool",
        "reply": 'Checking.<tool_call>\n{"name": "lookup", "arguments": {"city": "Zürich"}}'
        "\n</tool_call>",
    },
    {"match": "parity-stop", "reply": "alpha beta HALT gamma delta"},
    # Cut by max_tokens inside 🫠 (three byte-level tokens): no broken character shown.
    {"match": "parity-melt-think", "reply": "<think>hm 🫠</think>ok"},
    {"match": "parity-melt", "reply": "ok 🫠 done"},
    {"match": "parity-drop", "fault": "drop", "fault_after": 3},
    {"match": "parity-stall", "fault": "stall", "fault_after": 2},
]


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def chat(text: str, **extra: Any) -> dict[str, Any]:
    """A chat request; with no seed, mock_ie's reply depends on the prompt's ids alone, so
    protocols without a seed (Anthropic's, the Responses API) get the same sampled reply
    when they template the same prompt."""
    body: dict[str, Any] = {"model": MODEL, "messages": user(text), "max_tokens": 40}
    body.update(extra)
    return body


def png_data_uri(size: tuple[int, int]) -> str:
    buf = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


# ------------------------------------------------------------------------ the stack


class Stack:
    def __init__(
        self, mock: MockIE, server: NeutrinoProc, grpc_address: str, metrics_port: int
    ) -> None:
        self.mock = mock
        self.server = server
        self.grpc_address = grpc_address
        self.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"

    @property
    def http(self) -> str:
        return self.server.base_url

    @property
    def grpc(self) -> str:
        return self.grpc_address

    @property
    def quic_port(self) -> int:
        return self.server.quic_port()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work: Path = tmp_path_factory.mktemp("parity")
    script = work / "script.json"
    script.write_text(json.dumps({"rules": RULES}))
    mock = MockIE(
        work,
        "--script",
        str(script),
        "--model",
        "qwen3-mock:qwen3:32768",
        "--model",
        "qwen2.5-vl-mock:qwen2:32768:generate+vision",
        "--itl-ms",
        "2",
    ).start()
    grpc_address, metrics_port = f"127.0.0.1:{free_port()}", free_port()
    server = NeutrinoProc(
        work,
        "--engine",
        mock.socket,
        "--quic-address",
        "127.0.0.1:0",
        "--grpc-address",
        grpc_address,
        "--metrics-address",
        f"127.0.0.1:{metrics_port}",
    )
    with serving(mock, server):
        yield Stack(mock, server, grpc_address, metrics_port)


# ---------------------------------------------------------------------- the drivers


async def _post(url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as resp:
        return resp.status, await resp.read()


async def http_chat(stack: Stack, body: dict[str, Any]) -> Answer:
    status, raw = await _post(stack.http + "/v1/chat/completions", body)
    return parity.openai_answer(status, json.loads(raw))


async def http_chat_stream(stack: Stack, body: dict[str, Any]) -> Answer:
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    status, raw = await _post(stack.http + "/v1/chat/completions", body)
    return parity.openai_stream_answer(status, raw)


async def _h3_post(stack: Stack, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    async with H3Client("127.0.0.1", stack.quic_port) as client:
        resp = await client.request(
            "POST", path, {"content-type": "application/json"}, json.dumps(body).encode()
        )
        return resp.status, await resp.read()


async def h3_chat(stack: Stack, body: dict[str, Any]) -> Answer:
    status, raw = await _h3_post(stack, "/v1/chat/completions", body)
    return parity.openai_answer(status, json.loads(raw))


async def h3_chat_stream(stack: Stack, body: dict[str, Any]) -> Answer:
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    status, raw = await _h3_post(stack, "/v1/chat/completions", body)
    return parity.openai_stream_answer(status, raw)


async def anthropic(stack: Stack, body: dict[str, Any]) -> Answer:
    status, raw = await _post(stack.http + "/v1/messages", parity.to_anthropic(body))
    return parity.anthropic_answer(status, json.loads(raw))


async def anthropic_stream(stack: Stack, body: dict[str, Any]) -> Answer:
    request = {**parity.to_anthropic(body), "stream": True}
    status, raw = await _post(stack.http + "/v1/messages", request)
    return parity.anthropic_stream_answer(status, raw)


async def responses(stack: Stack, body: dict[str, Any]) -> Answer:
    status, raw = await _post(stack.http + "/v1/responses", parity.to_responses(body))
    return parity.responses_answer(status, json.loads(raw))


async def responses_stream(stack: Stack, body: dict[str, Any]) -> Answer:
    request = {**parity.to_responses(body), "stream": True}
    status, raw = await _post(stack.http + "/v1/responses", request)
    return parity.responses_stream_answer(status, raw)


async def grpc_unary(stack: Stack, body: dict[str, Any]) -> Answer:
    async with grpc.aio.insecure_channel(stack.grpc) as ch:
        try:
            resp = await InferenceStub(ch).Generate(grpc_request(body), timeout=30)
        except grpc.aio.AioRpcError as err:
            return grpc_error_answer(err)
        return grpc_answer(resp)


async def grpc_stream(stack: Stack, body: dict[str, Any]) -> Answer:
    async with grpc.aio.insecure_channel(stack.grpc) as ch:
        msgs = []
        try:
            async for msg in InferenceStub(ch).GenerateStream(grpc_request(body), timeout=30):
                msgs.append(msg)
        except grpc.aio.AioRpcError as err:
            return grpc_error_answer(err)
        return grpc_stream_answer(msgs)


Driver = Callable[[Stack, dict[str, Any]], Awaitable[Answer]]
DRIVERS: dict[str, Driver] = {
    "http": http_chat,
    "http-stream": http_chat_stream,
    "h3": h3_chat,
    "h3-stream": h3_chat_stream,
    "grpc": grpc_unary,
    "grpc-stream": grpc_stream,
    "anthropic": anthropic,
    "anthropic-stream": anthropic_stream,
    "responses": responses,
    "responses-stream": responses_stream,
}
ALL = tuple(DRIVERS)
# n, logprobs, seed: OpenAI's chat and Neutrino's gRPC API
OPENAI = ("http", "http-stream", "h3", "h3-stream", "grpc", "grpc-stream")
NO_STOP = tuple(d for d in ALL if not d.startswith("responses"))  # Responses has no stop
NO_ANTHROPIC = tuple(d for d in ALL if not d.startswith("anthropic"))  # no response_format

# ------------------------------------------------------------------------ the cases

# name -> (request as an OpenAI chat body, the protocols that carry its features)
CASES: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "plain": (chat("parity-plain"), ALL),
    "sampled": (chat("say something", max_tokens=12), ALL),
    "seeded": (chat("say something", max_tokens=12, seed=7), OPENAI),
    "reasoning": (chat("parity-think"), ALL),
    "tools-auto": (chat("parity-tool", tools=TOOLS), ALL),
    "tools-required": (chat("pick one", tools=TOOLS, tool_choice="required"), ALL),
    "tools-named": (
        chat(
            "convert it",
            tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "convert"}},
        ),
        ALL,
    ),
    "logprobs": (chat("parity-plain", logprobs=True, top_logprobs=2), OPENAI),
    "n2": (chat("two ways", n=2, max_tokens=8, seed=3), OPENAI),
    "structured": (
        chat(
            "a city as JSON",
            response_format={
                "type": "json_schema",
                "json_schema": {
                    "name": "city",
                    "strict": True,
                    "schema": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "size": {"type": "integer"}},
                        "required": ["name", "size"],
                        "additionalProperties": False,
                    },
                },
            },
        ),
        NO_ANTHROPIC,
    ),
    "stop": (chat("parity-stop", stop=["HALT"]), NO_STOP),
    "length": (chat("parity-plain", max_tokens=3), ALL),
    "cut-character": (chat("parity-melt", max_tokens=3, logprobs=True), ALL),
    "images": (
        {
            "model": VLM,
            "max_tokens": 40,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is in these images?"},
                        {"type": "image_url", "image_url": {"url": png_data_uri((64, 32))}},
                        {"type": "image_url", "image_url": {"url": png_data_uri((20, 10))}},
                    ],
                }
            ],
        },
        ALL,
    ),
    "cut-character-reasoning": (chat("parity-melt-think", max_tokens=4), ALL),
    "unknown-model": ({**chat("parity-plain"), "model": "no-such-model"}, ALL),
    "bad-input": (chat("parity-plain", max_tokens=-5), ALL),
    "engine-loss": (chat("parity-drop"), ALL),
}


@pytest.fixture(scope="module")
def baselines() -> dict[str, Answer]:
    return {}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_same_answer_on_every_protocol(
    stack: Stack, baselines: dict[str, Answer], case: str
) -> None:
    body, protocols = CASES[case]
    base = await http_chat(stack, body)
    assert base.error is None or len(base.error) == 1, base
    for name in protocols:
        got = await DRIVERS[name](stack, body)
        _same(case, name, base, got)


def _same(case: str, protocol: str, base: Answer, got: Answer) -> None:
    where = f"{case} over {protocol}"
    if base.error is not None:
        assert got.error is not None and base.error <= got.error, (where, base, got)
        return
    assert got.error is None, (where, got)
    assert got.prompt_tokens == base.prompt_tokens, where
    assert got.completion_tokens == base.completion_tokens, where
    assert len(got.choices) == len(base.choices), where
    for b, g in zip(base.choices, got.choices, strict=True):
        assert g.text == b.text, where
        assert g.reasoning == b.reasoning, where
        assert g.calls == b.calls, where
        assert g.finish == b.finish, where
        if b.logprobs is not None and protocol in OPENAI:  # the others carry none
            assert g.logprobs == b.logprobs, where


async def test_the_cases_say_what_they_test(stack: Stack) -> None:
    """The baseline answers are what each case is about (so a parity of empty answers
    cannot pass)."""
    got = {name: await http_chat(stack, body) for name, (body, _) in CASES.items()}
    assert got["plain"].one.text == "Hello from every protocol: ünïcödé 你好 ✓."
    assert got["reasoning"].one.reasoning == "Weigh it: 6 ⋅ 7 ≠ 41."
    assert got["reasoning"].one.text == "The answer is 42."
    assert got["tools-auto"].one.calls == [("lookup", {"city": "Zürich"})]
    assert got["tools-auto"].one.finish == "tool_calls"
    assert [c[0] for c in got["tools-required"].one.calls] in (["lookup"], ["convert"])
    assert [c[0] for c in got["tools-named"].one.calls] == ["convert"]
    lp = got["logprobs"].one.logprobs
    assert lp and all(len(top) == 2 for _, _, top in lp)
    assert len(got["n2"].choices) == 2
    assert set(json.loads(got["structured"].one.text)) == {"name", "size"}
    assert got["stop"].one.text == "alpha beta " and got["stop"].one.finish == "stop"
    assert got["length"].one.finish == "length" and got["length"].completion_tokens == 3
    cut = got["cut-character"]
    assert (cut.one.text, cut.one.finish, cut.completion_tokens) == ("ok ", "length", 3)
    assert [t for t, _, _ in cut.one.logprobs or []] == ["ok", " \ufffd"]  # "\xab": none
    cut = got["cut-character-reasoning"]
    assert (cut.one.reasoning, cut.one.text, cut.completion_tokens) == ("hm ", "", 4)
    assert got["unknown-model"].error == frozenset({"MODEL_NOT_FOUND"})
    assert got["bad-input"].error == frozenset({"BAD_REQUEST"})
    assert got["engine-loss"].error is not None
    assert got["images"].one.text == "I see 2 image(s): 64x32 image/png, 20x10 image/png."


# ------------------------------------------------------------------ client cancels


Settle = Callable[[], Awaitable[None]]


async def _leave(url: str, body: dict[str, Any]) -> None:
    """Open a stream, read its first bytes, leave (close the connection)."""
    async with aiohttp.ClientSession() as session:
        resp = await session.post(url, json={**body, "stream": True})
        await resp.content.readany()  # the stream is open: the request is on the engine
        resp.close()


async def _cancel_http(stack: Stack, body: dict[str, Any], settle: Settle) -> None:
    await _leave(stack.http + "/v1/chat/completions", body)
    await settle()


async def _cancel_anthropic(stack: Stack, body: dict[str, Any], settle: Settle) -> None:
    await _leave(stack.http + "/v1/messages", parity.to_anthropic(body))
    await settle()


async def _cancel_responses(stack: Stack, body: dict[str, Any], settle: Settle) -> None:
    await _leave(stack.http + "/v1/responses", parity.to_responses(body))
    await settle()


async def _cancel_h3(stack: Stack, body: dict[str, Any], settle: Settle) -> None:
    """HTTP/3: the client resets its request stream; the cancel must come while the
    connection is still up (not from its close)."""
    async with H3Client("127.0.0.1", stack.quic_port) as client:
        resp = await client.request(
            "POST",
            "/v1/chat/completions",
            {"content-type": "application/json"},
            json.dumps({**body, "stream": True}).encode(),
        )
        async for _ in resp.chunks():
            break
        resp.reset()
        await settle()


async def _cancel_grpc(stack: Stack, body: dict[str, Any], settle: Settle) -> None:
    """gRPC: the client cancels its call after the first message; the cancel must come
    while the channel is still open (not from its close)."""
    async with grpc.aio.insecure_channel(stack.grpc) as ch:
        call = InferenceStub(ch).GenerateStream(grpc_request(body), timeout=30)
        await call.read()
        call.cancel()
        await settle()


CANCELS: dict[str, Callable[[Stack, dict[str, Any], Settle], Awaitable[None]]] = {
    "grpc": _cancel_grpc,
    "http": _cancel_http,
    "h3": _cancel_h3,
    "anthropic": _cancel_anthropic,
    "responses": _cancel_responses,
}


@pytest.mark.parametrize("protocol", sorted(CANCELS))
async def test_a_client_that_leaves_costs_one_engine_cancel(stack: Stack, protocol: str) -> None:
    before = len(stack.mock.events("cancel"))
    events: list[dict[str, Any]] = []

    async def settle() -> None:
        """Wait for the cancel, and a while for a second one, before the client closes."""
        events[:] = await asyncio.to_thread(stack.mock.wait_event, "cancel", before + 1, 10.0)
        await asyncio.sleep(0.3)

    await CANCELS[protocol](stack, chat("parity-stall", max_tokens=200), settle)
    assert len(events) == before + 1, protocol
    await asyncio.sleep(0.3)  # nor after the client closed
    assert len(stack.mock.events("cancel")) == before + 1, protocol
    assert events[before]["reason"] == "client disconnected"


async def test_metrics_name_each_protocol_and_api(stack: Stack) -> None:
    """Every protocol's requests are counted under its own labels: the transport
    (http, quic, grpc) and the API's route (chat, messages, responses)."""
    body = chat("parity-plain")
    for driver in (http_chat, h3_chat, grpc_unary, anthropic, responses):
        assert (await driver(stack, body)).error is None
    async with aiohttp.ClientSession() as session, session.get(stack.metrics_url) as resp:
        text = await resp.text()
    seen = set()
    for line in text.splitlines():
        if line.startswith("neutrino_requests_total{") and 'outcome="ok"' in line:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line.partition("}")[0]))
            if float(line.rpartition(" ")[2]) > 0:
                seen.add((labels["protocol"], labels["route"]))
    expected = {
        ("http", "chat"),
        ("quic", "chat"),
        ("grpc", "chat"),
        ("http", "messages"),
        ("http", "responses"),
    }
    assert expected <= seen, seen
