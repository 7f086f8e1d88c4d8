"""The official openai SDK against real Neutrino + mock_ie processes; schemas from OpenAI's spec."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import openai
import pytest

from neutrino.text.registry import load_tokenizer
from tests.support.openapi import validate
from tests.support.procs import MockIE, NeutrinoProc

MODEL = "qwen2.5-mock"
MESSAGES: list[Any] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Tell me about the weather in Zürich ☀️"},
]


@pytest.fixture(scope="module")
def client(stack: tuple[MockIE, NeutrinoProc]) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack[1].base_url + "/v1", api_key="x", max_retries=0)


@pytest.fixture(scope="module")
def aclient(stack: tuple[MockIE, NeutrinoProc]) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=stack[1].base_url + "/v1", api_key="x", max_retries=0)


def raw_post(server: NeutrinoProc, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    req = urllib.request.Request(
        server.base_url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def sse_payloads(raw: bytes) -> list[str]:
    out = []
    for block in raw.decode().split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: "):
                out.append(line[len("data: ") :])
    return out


def sdk_json(obj: Any) -> Any:
    """An SDK object as the JSON it was parsed from (fields the server sent, nulls kept)."""
    return obj.model_dump(mode="json", exclude_unset=True)


def counts(usage: Any) -> tuple[int, int, int]:
    """A usage's token counts (its timings differ from one request to the next)."""
    assert usage is not None
    return usage.prompt_tokens, usage.completion_tokens, usage.total_tokens


def test_sync_chat_non_stream(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=24, seed=3)
    validate(sdk_json(r), "CreateChatCompletionResponse")
    choice = r.choices[0]
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason in {"stop", "length"}
    assert r.usage is not None and r.usage.completion_tokens <= 24
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    extra = r.usage.model_extra or {}
    for key in ("queue_time", "prompt_time", "completion_time", "total_time"):
        assert isinstance(extra[key], float) and extra[key] >= 0
    assert r.id.startswith("chatcmpl-")


def test_sync_stream_equals_non_stream(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=30, seed=9)
    stream = client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        max_tokens=30,
        seed=9,
        stream=True,
        stream_options={"include_usage": True},
    )
    parts, finish, usage = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            if c.delta.content:
                parts.append(c.delta.content)
            if c.finish_reason:
                finish = c.finish_reason
    assert "".join(parts) == whole.choices[0].message.content
    assert finish == whole.choices[0].finish_reason
    assert usage is not None and whole.usage is not None
    assert usage.completion_tokens == whole.usage.completion_tokens
    assert usage.prompt_tokens == whole.usage.prompt_tokens


async def test_async_streams_validate(aclient: openai.AsyncOpenAI) -> None:
    whole = await aclient.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=20, seed=4
    )
    validate(sdk_json(whole), "CreateChatCompletionResponse")
    stream = await aclient.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        max_tokens=20,
        seed=4,
        stream=True,
        stream_options={"include_usage": True},
    )
    text, usage = "", None
    async for chunk in stream:
        validate(sdk_json(chunk), "CreateChatCompletionStreamResponse")
        usage = chunk.usage or usage
        for c in chunk.choices:
            text += c.delta.content or ""
    assert text == whole.choices[0].message.content
    assert counts(usage) == counts(whole.usage)

    comp = await aclient.completions.create(model=MODEL, prompt="Once", max_tokens=10, seed=4)
    validate(sdk_json(comp), "CreateCompletionResponse")
    cstream = await aclient.completions.create(
        model=MODEL,
        prompt="Once",
        max_tokens=10,
        seed=4,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in cstream]
    for piece in chunks:
        validate(sdk_json(piece), "CreateCompletionStreamChunk")
    *body, last = chunks
    assert "".join(c.choices[0].text for c in body) == comp.choices[0].text
    assert last.choices == [] and counts(last.usage) == counts(comp.usage)


def test_completions_stream_and_not(client: openai.OpenAI) -> None:
    r = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=16, seed=2)
    validate(sdk_json(r), "CreateCompletionResponse")
    assert r.choices[0].text and r.usage is not None
    text = "".join(
        c.choices[0].text
        for c in client.completions.create(
            model=MODEL, prompt="Once upon a time", max_tokens=16, seed=2, stream=True
        )
        if c.choices
    )
    assert text == r.choices[0].text
    text, usage = "", None
    for chunk in client.completions.create(
        model=MODEL,
        prompt="Once upon a time",
        max_tokens=16,
        seed=2,
        stream=True,
        stream_options={"include_usage": True},
    ):
        validate(sdk_json(chunk), "CreateCompletionStreamChunk")
        text += "".join(c.text for c in chunk.choices)
        usage = chunk.usage or usage
    assert text == r.choices[0].text and counts(usage) == counts(r.usage)


CHAT_EXTRAS: list[dict[str, Any]] = [
    {},
    {"n": 2},
    {"logprobs": True, "top_logprobs": 2},
    {"n": 2, "logprobs": True, "top_logprobs": 2},
]
COMPLETION_EXTRAS: list[dict[str, Any]] = [
    {},
    {"n": 2},
    {"logprobs": 2},
    {"echo": True},
    {"n": 2, "logprobs": 2},
]


def raw_cases(stream: bool) -> list[tuple[str, dict[str, Any]]]:
    """Chat and completion requests: plain, n=2, logprobs, both (and echo)."""
    options: list[dict[str, Any]] = [{}]
    if stream:
        options = [
            {"stream": True},
            {"stream": True, "stream_options": {"include_usage": True}},
        ]
    cases = []
    for opt in options:
        for extra in CHAT_EXTRAS:
            body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 8, "seed": 7}
            cases.append(("/v1/chat/completions", {**body, **extra, **opt}))
        for extra in COMPLETION_EXTRAS:
            body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 8, "seed": 7}
            cases.append(("/v1/completions", {**body, **extra, **opt}))
    return cases


def check_raw_stream(raw: bytes, path: str, body: dict[str, Any]) -> None:
    """Every ``data:`` chunk as sent, the usage chunk included, against OpenAI's spec."""
    chat = path == "/v1/chat/completions"
    n = body.get("n", 1)
    include_usage = body.get("stream_options", {}).get("include_usage", False)
    assert raw.startswith(b": ok\n\n")
    payloads = sse_payloads(raw)
    assert payloads[-1] == "[DONE]" and "[DONE]" not in payloads[:-1]
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert chunks
    for chunk in chunks:
        if chat:
            validate(chunk, "CreateChatCompletionStreamResponse")
        else:
            # Completion chunks are CreateCompletionResponse objects; OpenAI sends
            # "finish_reason": null until a choice ends, which the spec's enum lacks.
            validate(chunk, "CreateCompletionStreamChunk")
            if all(c["finish_reason"] is not None for c in chunk["choices"]):
                validate(chunk, "CreateCompletionResponse")
    if include_usage:
        *chunks, last = chunks
        assert last["choices"] == []
        u = last["usage"]
        assert u["prompt_tokens"] > 0 and u["completion_tokens"] > 0
        assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
        # Chat: "usage": null on every other chunk; completions: no usage key at all.
        assert all(("usage" in c) == chat and c.get("usage") is None for c in chunks)
    else:
        assert all("usage" not in c for c in chunks)
    finishes: dict[int, list[str | None]] = {}
    for chunk in chunks:
        assert len(chunk["choices"]) == 1
        choice = chunk["choices"][0]
        finishes.setdefault(choice["index"], []).append(choice["finish_reason"])
    assert sorted(finishes) == list(range(n))
    for fins in finishes.values():
        assert all(f is None for f in fins[:-1]) and fins[-1] in {"stop", "length"}
    if body.get("logprobs"):
        assert any(c["choices"][0]["logprobs"] for c in chunks)


def test_raw_stream_chunks_validate(stack: tuple[MockIE, NeutrinoProc]) -> None:
    for path, body in raw_cases(stream=True):
        status, raw = raw_post(stack[1], path, body)
        assert status == 200, (body, raw)
        try:
            check_raw_stream(raw, path, body)
        except Exception as exc:
            raise AssertionError(f"{path} {body}: {exc}") from exc


def test_raw_non_stream_validates(stack: tuple[MockIE, NeutrinoProc]) -> None:
    for path, body in raw_cases(stream=False):
        status, raw = raw_post(stack[1], path, body)
        assert status == 200, (body, raw)
        got = json.loads(raw)
        chat = path == "/v1/chat/completions"
        validate(got, "CreateChatCompletionResponse" if chat else "CreateCompletionResponse")
        assert [c["index"] for c in got["choices"]] == list(range(body.get("n", 1)))
        assert got["usage"]["total_tokens"] > 0
        if body.get("logprobs"):
            assert all(c["logprobs"] for c in got["choices"])


def test_models(client: openai.OpenAI, stack: tuple[MockIE, NeutrinoProc]) -> None:
    ids = [m.id for m in client.models.list()]
    assert MODEL in ids
    validate(stack[1].get_json("/v1/models"), "ListModelsResponse")
    assert client.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


def test_stop_strings_never_leak(client: openai.OpenAI) -> None:
    base = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=40, seed=11)
    full = base.choices[0].message.content or ""
    words = full.split()
    assert len(words) > 4
    stop = words[3][:3] if len(words[3]) >= 3 else words[3]
    cut = full[: full.find(stop)]
    r = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=40, seed=11, stop=[stop, "zzz-never"]
    )
    assert r.choices[0].message.content == cut
    assert r.choices[0].finish_reason == "stop"
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(
            model=MODEL, messages=MESSAGES, max_tokens=40, seed=11, stop=stop, stream=True
        )
        if c.choices
    )
    assert streamed == cut and stop not in streamed
    kept = client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        max_tokens=40,
        seed=11,
        stop=[stop],
        extra_body={"include_stop_str_in_output": True},
    )
    assert kept.choices[0].message.content == cut + stop


def test_seed_determinism_and_user(client: openai.OpenAI) -> None:
    a = client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        max_tokens=16,
        seed=5,
        user="alice",
        temperature=0.7,
        top_p=0.9,
    )
    b = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=16, seed=5)
    c = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=16, seed=6)
    assert a.choices[0].message.content == b.choices[0].message.content
    assert a.choices[0].message.content != c.choices[0].message.content


def test_n_above_supported_is_a_clear_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, n=9)
    assert isinstance(info.value.body, dict)
    assert info.value.body.get("param") == "n"


def test_n_choices_stream_and_not(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(model=MODEL, messages=MESSAGES, n=3, max_tokens=20, seed=40)
    validate(sdk_json(r), "CreateChatCompletionResponse")
    assert [c.index for c in r.choices] == [0, 1, 2]
    texts = [c.message.content for c in r.choices]
    assert len(set(texts)) == 3  # seeds 40, 41, 42
    one = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=20, seed=41)
    assert one.choices[0].message.content == texts[1]
    assert r.usage is not None and one.usage is not None
    assert r.usage.prompt_tokens == one.usage.prompt_tokens
    streamed = ["", "", ""]
    finishes: dict[int, str] = {}
    usage = None
    for chunk in client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        n=3,
        max_tokens=20,
        seed=40,
        stream=True,
        stream_options={"include_usage": True},
    ):
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            streamed[c.index] += c.delta.content or ""
            if c.finish_reason:
                finishes[c.index] = c.finish_reason
    assert streamed == texts and set(finishes) == {0, 1, 2}
    assert usage is not None and usage.completion_tokens == r.usage.completion_tokens
    comp = client.completions.create(
        model=MODEL, prompt="Once upon a time", n=2, max_tokens=8, seed=1
    )
    assert [c.index for c in comp.choices] == [0, 1]


def test_max_completion_tokens_is_honoured(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_completion_tokens=3, seed=1
    )
    assert r.usage is not None and r.usage.completion_tokens <= 3


def test_llama_family_too(client: openai.OpenAI) -> None:
    models = [m.id for m in client.models.list()]
    if "llama3.2-mock" not in models:
        pytest.skip("llama3 tokenizer package not installed")
    r = client.chat.completions.create(model="llama3.2-mock", messages=MESSAGES, max_tokens=8)
    assert r.choices[0].message.content


def test_completion_echo(client: openai.OpenAI) -> None:
    plain = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=8, seed=2)
    r = client.completions.create(
        model=MODEL, prompt="Once upon a time", max_tokens=8, seed=2, echo=True
    )
    assert r.choices[0].text == "Once upon a time" + plain.choices[0].text
    text = "".join(
        c.choices[0].text
        for c in client.completions.create(
            model=MODEL, prompt="Once upon a time", max_tokens=8, seed=2, echo=True, stream=True
        )
        if c.choices
    )
    assert text == r.choices[0].text
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=MODEL, prompt="x", echo=True, logprobs=1)


def test_stop_reason_is_vllms(stack: tuple[MockIE, NeutrinoProc]) -> None:
    """As vLLM's server reports it: null at the model's own end of sequence, the id of a
    stop token the request named, the stop string that matched."""
    body: dict[str, Any] = {"model": MODEL, "messages": MESSAGES, "max_tokens": 200, "seed": 5}
    status, raw = raw_post(stack[1], "/v1/chat/completions", body)
    plain = json.loads(raw)["choices"][0]
    assert status == 200 and plain["finish_reason"] == "stop"
    assert plain["stop_reason"] is None
    ids = load_tokenizer("qwen2").encode(plain["message"]["content"])
    stop_id = ids[4]
    status, raw = raw_post(stack[1], "/v1/chat/completions", {**body, "stop_token_ids": [stop_id]})
    choice = json.loads(raw)["choices"][0]
    assert (choice["finish_reason"], choice["stop_reason"]) == ("stop", stop_id)
    word = plain["message"]["content"].split()[2]
    status, raw = raw_post(stack[1], "/v1/chat/completions", {**body, "stop": [word]})
    choice = json.loads(raw)["choices"][0]
    assert (choice["finish_reason"], choice["stop_reason"]) == ("stop", word)
