"""The gRPC front end with real processes: a mock engine, Neutrino, and stub clients."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from neutrino.v1 import common_pb2, inference_pb2, inference_pb2_grpc
from tests.support.procs import MockIE, NeutrinoProc, free_port, wait_for

MODEL = "qwen2.5-mock"
PROMPT = "Tell me a long story"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def engine_config(mock: MockIE) -> str:
    return f"""
[[engines]]
socket = "{mock.socket}"
connections = 1
[engine_link]
backoff_initial_s = 0.02
backoff_max_s = 0.2
"""


class Stack:
    """A mock engine and a Neutrino serving gRPC on a free port."""

    def __init__(self, mock: MockIE, server: NeutrinoProc, address: str) -> None:
        self.mock = mock
        self.server = server
        self.address = address


def start_stack(
    mock_factory: Callable[..., MockIE],
    neutrino_factory: Callable[..., NeutrinoProc],
    *mock_args: str,
) -> Stack:
    mock = mock_factory(*mock_args)
    address = f"127.0.0.1:{free_port()}"
    server = neutrino_factory("--grpc-address", address, config=engine_config(mock))
    return Stack(mock, server, address)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One engine and one Neutrino for the tests that do not disturb either."""
    work = tmp_path_factory.mktemp("grpc")
    mock = MockIE(work).start()
    address = f"127.0.0.1:{free_port()}"
    server = NeutrinoProc(work, "--grpc-address", address, config=engine_config(mock))
    try:
        server.start()
        yield Stack(mock, server, address)
    finally:
        server.stop()
        mock.stop()


@pytest.fixture
async def channel(shared: Stack) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(shared.address) as ch:
        yield ch


def chat(**kw: Any) -> inference_pb2.GenerateRequest:
    kw.setdefault("model", MODEL)
    kw.setdefault(
        "chat",
        inference_pb2.Chat(messages=[inference_pb2.ChatMessage(role="user", content=PROMPT)]),
    )
    return inference_pb2.GenerateRequest(**kw)


def http_post(server: NeutrinoProc, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        server.base_url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        out: dict[str, Any] = json.loads(r.read())
        return out


_FINISH = {
    inference_pb2.FINISH_REASON_STOP: "stop",
    inference_pb2.FINISH_REASON_LENGTH: "length",
}


# ---------------------------------------------------------------------- (a) parity


@pytest.mark.parametrize(
    ("kind", "extra"),
    [
        ("chat", {}),
        ("chat", {"stop": True}),
        ("completion", {}),
    ],
)
async def test_unary_and_stream_match_http(
    shared: Stack, channel: grpc.aio.Channel, kind: str, extra: dict[str, Any]
) -> None:
    stub = inference_pb2_grpc.InferenceStub(channel)
    if kind == "chat":
        body: dict[str, Any] = {
            "model": MODEL,
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": 40,
            "seed": 7,
        }
        path = "/v1/chat/completions"
        if extra.get("stop"):  # a stop string from the middle of the text
            full = await asyncio.to_thread(http_post, shared.server, path, body)
            extra = {"stop": [full["choices"][0]["message"]["content"][12:16]]}
        req = chat(max_tokens=40, seed=7, stop=extra.get("stop", []))
    else:
        body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 24, "seed": 7}
        req = inference_pb2.GenerateRequest(
            model=MODEL,
            completion=inference_pb2.Completion(prompt=PROMPT),
            max_tokens=24,
            seed=7,
        )
        path = "/v1/completions"
    body.update(extra)
    http = await asyncio.to_thread(http_post, shared.server, path, body)
    choice = http["choices"][0]
    want_text = choice["message"]["content"] if kind == "chat" else choice["text"]
    want_usage = {k: http["usage"][k] for k in ("prompt_tokens", "completion_tokens")}
    assert want_text

    unary = await stub.Generate(req, timeout=10)
    assert unary.text == want_text
    assert _FINISH[unary.finish_reason] == choice["finish_reason"]
    assert unary.model == MODEL and unary.id and unary.created > 0
    u = unary.usage
    assert {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens} == (
        want_usage
    )
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    assert u.total_time > 0 and u.total_time >= u.completion_time
    if "stop" in extra:
        assert choice["finish_reason"] == "stop"
        assert unary.stop_reason.stop_string == choice["stop_reason"] == extra["stop"][0]

    parts: list[inference_pb2.GenerateStreamResponse] = []
    async for msg in stub.GenerateStream(req, timeout=10):
        parts.append(msg)
    assert "".join(p.delta for p in parts) == want_text
    assert len({(p.id, p.model, p.created) for p in parts}) == 1
    assert all(p.finish_reason == inference_pb2.FINISH_REASON_UNSPECIFIED for p in parts[:-1])
    last = parts[-1]
    assert _FINISH[last.finish_reason] == choice["finish_reason"]
    assert last.usage.prompt_tokens == want_usage["prompt_tokens"]
    assert last.usage.completion_tokens == want_usage["completion_tokens"]


async def test_list_models(shared: Stack, channel: grpc.aio.Channel) -> None:
    stub = inference_pb2_grpc.InferenceStub(channel)
    resp = await stub.ListModels(common_pb2.ListModelsRequest(), timeout=5)
    http = shared.server.get_json("/v1/models")
    assert {m.id for m in resp.models} == {m["id"] for m in http["data"]}
    card = next(m for m in resp.models if m.id == MODEL)
    assert card.context_length > 0 and card.owned_by == "neutrino"


# ---------------------------------------------------------------------- (f) bad input


@pytest.mark.parametrize(
    ("request_", "code", "words"),
    [
        (chat(chat=inference_pb2.Chat()), grpc.StatusCode.INVALID_ARGUMENT, "messages"),
        (chat(model="no-such-model"), grpc.StatusCode.NOT_FOUND, "no-such-model"),
        (chat(max_tokens=-5), grpc.StatusCode.INVALID_ARGUMENT, "max_tokens"),
        (chat(temperature=3.0), grpc.StatusCode.INVALID_ARGUMENT, "temperature"),
        (chat(model=""), grpc.StatusCode.INVALID_ARGUMENT, "model"),
        (inference_pb2.GenerateRequest(model=MODEL), grpc.StatusCode.INVALID_ARGUMENT, "chat"),
        (
            chat(chat=inference_pb2.Chat(messages=[inference_pb2.ChatMessage(role="robot")])),
            grpc.StatusCode.INVALID_ARGUMENT,
            "role",
        ),
        (chat(stop=[""]), grpc.StatusCode.INVALID_ARGUMENT, "stop"),
    ],
)
async def test_bad_input_is_refused_before_the_engine(
    shared: Stack,
    channel: grpc.aio.Channel,
    request_: inference_pb2.GenerateRequest,
    code: grpc.StatusCode,
    words: str,
) -> None:
    stub = inference_pb2_grpc.InferenceStub(channel)
    before = len(shared.mock.events("query"))
    for call in (stub.Generate, stub.GenerateStream):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            result = call(request_, timeout=5)
            if isinstance(result, grpc.aio.UnaryStreamCall):
                async for _ in result:
                    pass
            else:
                await result
        assert info.value.code() == code
        assert words in (info.value.details() or "")
    time.sleep(0.05)
    assert len(shared.mock.events("query")) == before


# ---------------------------------------------------------------------- (d) size limit


async def test_message_over_26mb_is_refused(shared: Stack, channel: grpc.aio.Channel) -> None:
    stub = inference_pb2_grpc.InferenceStub(channel)
    before = len(shared.mock.events("query"))
    big = chat(
        chat=inference_pb2.Chat(
            messages=[inference_pb2.ChatMessage(role="user", content="x" * (30 * 1024 * 1024))]
        )
    )
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Generate(big, timeout=10)
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert len(shared.mock.events("query")) == before
    ok = await stub.Generate(chat(max_tokens=4), timeout=5)  # the server is fine after it
    assert ok.usage.completion_tokens == 4


# ---------------------------------------------------------------------- (g) reflection


async def test_reflection_lists_the_services(channel: grpc.aio.Channel) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    call = stub.ServerReflectionInfo(
        iter(
            [
                reflection_pb2.ServerReflectionRequest(list_services=""),
                reflection_pb2.ServerReflectionRequest(
                    file_containing_symbol="neutrino.v1.Inference"
                ),
            ]
        ),
        timeout=5,
    )
    answers = [a async for a in call]
    names = {s.name for s in answers[0].list_services_response.service}
    assert {
        "neutrino.v1.Inference",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= names
    assert answers[1].file_descriptor_response.file_descriptor_proto


# ---------------------------------------------------------------------- (b) cancel


async def test_cancelled_stream_sends_one_cancel(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    s = start_stack(mock_factory, neutrino_factory, "--itl-ms", "20", "--reply-tokens", "300")
    async with grpc.aio.insecure_channel(s.address) as ch:
        stub = inference_pb2_grpc.InferenceStub(ch)
        call = stub.GenerateStream(chat(max_tokens=400), timeout=10)
        got = 0
        async for msg in call:
            assert msg.delta
            got += 1
            if got == 3:
                break
        call.cancel()  # the client goes away mid-stream
    await asyncio.to_thread(s.mock.wait_event, "cancel", 1)
    await asyncio.sleep(0.3)  # would a second cancel arrive?
    cancels = s.mock.events("cancel")
    queries = s.mock.events("query")
    assert len(cancels) == 1 and len(queries) == 1
    assert cancels[0]["request_id"] == queries[0]["request_id"]
    assert cancels[0]["reason"] == "client disconnected"
    assert wait_for(lambda: s.server.history(1)[0]["state"] == "cancelled")


# ---------------------------------------------------------------------- (c) deadline


async def test_deadline_exceeded_cancels_the_engine_request(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    s = start_stack(mock_factory, neutrino_factory, "--ttft-ms", "300")
    async with grpc.aio.insecure_channel(s.address) as ch:
        stub = inference_pb2_grpc.InferenceStub(ch)
        await stub.Generate(chat(max_tokens=2), timeout=5)  # warm: tokenizer, connection
        n_queries = len(s.mock.events("query"))
        # Now and then a 1 ms deadline passes before the call even reaches Neutrino, and
        # then the engine rightly never hears of it: try a few times.
        for _ in range(5):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.Generate(chat(max_tokens=20), timeout=0.001)
            assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        with pytest.raises(grpc.aio.AioRpcError) as info:
            async for _ in stub.GenerateStream(chat(max_tokens=20), timeout=0.15):
                pass
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    await asyncio.to_thread(s.mock.wait_event, "cancel", 2)
    await asyncio.sleep(0.3)  # would a second cancel arrive?
    queries = s.mock.events("query")[n_queries:]
    cancels = s.mock.events("cancel")
    assert len(queries) >= 2, queries  # the streamed call and at least one 1 ms call
    # Every request that reached the engine got exactly one cancel frame.
    assert sorted(c["request_id"] for c in cancels) == sorted(q["request_id"] for q in queries)
    assert {c["reason"] for c in cancels} <= {"timeout", "client disconnected"}


# ---------------------------------------------------------------------- (e) health


def check(address: str, service: str = "") -> int:
    with grpc.insecure_channel(address) as ch:
        resp = health_pb2_grpc.HealthStub(ch).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=2
        )
        status: int = resp.status
        return status


async def test_health_follows_the_engine(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    s = start_stack(mock_factory, neutrino_factory)
    assert check(s.address) == SERVING
    assert check(s.address, "neutrino.v1.Inference") == SERVING
    s.mock.kill()
    assert await asyncio.to_thread(wait_for, lambda: check(s.address) == NOT_SERVING)
    assert check(s.address, "neutrino.v1.Inference") == NOT_SERVING
    async with grpc.aio.insecure_channel(s.address) as ch:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await inference_pb2_grpc.InferenceStub(ch).Generate(chat(max_tokens=4), timeout=5)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    s.mock.start()
    assert await asyncio.to_thread(wait_for, lambda: check(s.address) == SERVING)
    assert check(s.address, "neutrino.v1.Inference") == SERVING


async def test_draining_reports_not_serving_and_finishes_streams(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    s = start_stack(mock_factory, neutrino_factory, "--itl-ms", "20", "--reply-tokens", "50")
    assert s.server.proc is not None
    async with grpc.aio.insecure_channel(s.address) as ch:
        stub = inference_pb2_grpc.InferenceStub(ch)
        call = stub.GenerateStream(chat(max_tokens=50), timeout=10)
        parts = [await call.read()]
        s.server.proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(wait_for, lambda: check(s.address) == NOT_SERVING, 2)
        while (msg := await call.read()) is not grpc.aio.EOF:
            parts.append(msg)
        assert parts[-1].usage.completion_tokens == 50
    assert await asyncio.to_thread(s.server.proc.wait, 10) == 0
