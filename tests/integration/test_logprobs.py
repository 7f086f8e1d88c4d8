"""logprobs and top_logprobs, chat and completions, streamed and not."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.support.openapi import validate
from tests.support.procs import MockIE, NeutrinoProc

MODEL = "qwen2.5-mock"
MESSAGES: list[Any] = [{"role": "user", "content": "Write about a café ☕ in Zürich"}]


@pytest.fixture(scope="module")
def client(stack: tuple[MockIE, NeutrinoProc]) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack[1].base_url + "/v1", api_key="x", max_retries=0)


def test_chat_logprobs_stream_and_not(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=40, seed=3, logprobs=True, top_logprobs=3
    )
    validate(r.model_dump(mode="json", exclude_unset=True), "CreateChatCompletionResponse")
    choice = r.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content is not None
    entries = choice.logprobs.content
    assert r.usage is not None
    shown = r.usage.completion_tokens - (1 if choice.finish_reason == "stop" else 0)
    assert len(entries) == shown  # the end token is not reported
    assert b"".join(bytes(e.bytes or []) for e in entries).decode() == choice.message.content
    for e in entries:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        lps = [t.logprob for t in e.top_logprobs]
        assert lps == sorted(lps, reverse=True)
    streamed: list[Any] = []
    text = ""
    for chunk in client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        max_tokens=40,
        seed=3,
        logprobs=True,
        top_logprobs=3,
        stream=True,
    ):
        validate(
            chunk.model_dump(mode="json", exclude_unset=True), "CreateChatCompletionStreamResponse"
        )
        for c in chunk.choices:
            text += c.delta.content or ""
            if c.logprobs is not None and c.logprobs.content:
                streamed += c.logprobs.content
    assert text == choice.message.content
    assert [(e.token, e.logprob) for e in streamed] == [(e.token, e.logprob) for e in entries]


def test_completion_logprobs(client: openai.OpenAI) -> None:
    r = client.completions.create(
        model=MODEL, prompt="Once upon a time", max_tokens=12, seed=5, logprobs=2
    )
    validate(r.model_dump(mode="json", exclude_unset=True), "CreateCompletionResponse")
    lp = r.choices[0].logprobs
    assert lp is not None and lp.tokens and lp.token_logprobs and lp.top_logprobs
    assert "".join(lp.tokens) == r.choices[0].text
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(len(lp.tokens))]
    assert all(len(alts) <= 2 for alts in lp.top_logprobs)
    tokens: list[str] = []
    for chunk in client.completions.create(
        model=MODEL, prompt="Once upon a time", max_tokens=12, seed=5, logprobs=2, stream=True
    ):
        if chunk.choices and chunk.choices[0].logprobs is not None:
            tokens += chunk.choices[0].logprobs.tokens or []
    assert tokens == lp.tokens


def test_logprob_parameters_are_checked(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, top_logprobs=3)
    assert isinstance(info.value.body, dict)
    assert info.value.body.get("param") == "top_logprobs"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model=MODEL, messages=MESSAGES, logprobs=True, top_logprobs=21
        )
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=MODEL, prompt="x", logprobs=6)
