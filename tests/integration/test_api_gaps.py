"""Requests OpenAI's and vLLM's clients send that Neutrino once refused or answered
differently, each against OpenAI's API reference (``shared/reference/openai-openapi.json``):

* ``reasoning_effort``: the ``ReasoningEffort`` schema's values (``none`` ... ``xhigh``,
  ``max``) reach the chat template as given;
* a legacy function result (``ChatCompletionRequestFunctionMessage``: ``role: "function"``,
  ``name`` required, ``content`` a string or null) is a turn like any other;
* a path served with another method answers 405 with ``Allow`` (RFC 9110), not 404.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from neutrino.text.registry import load_tokenizer
from tests.support.openapi import SPEC_PATH, validate
from tests.support.procs import MockIE, NeutrinoProc, serving

SCHEMAS = json.loads(SPEC_PATH.read_text())["components"]["schemas"]
HARMONY = "gpt-oss-mock"  # the gpt-oss family: its template writes "Reasoning: <effort>"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MockIE, NeutrinoProc]]:
    work = tmp_path_factory.mktemp("gaps")
    mock = MockIE(
        work, "--model", "qwen2.5-mock:qwen2:32768", "--model", f"{HARMONY}:o200k-harmony:32768",
        "--reply-tokens", "2",
    ).start()  # fmt: skip
    with serving(mock, NeutrinoProc(work, "--engine", mock.socket)) as proc:
        yield mock, proc


@pytest.fixture(scope="module")
def client(server: tuple[MockIE, NeutrinoProc]) -> openai.OpenAI:
    return openai.OpenAI(base_url=server[1].base_url + "/v1", api_key="x", max_retries=0)


def _last_prompt(mock: MockIE, tokenizer: str) -> str:
    ids = mock.events("query")[-1]["prompt_ids"]
    return load_tokenizer(tokenizer).decode(ids, skip_special=False)


def test_the_reference_lists_the_efforts_accepted() -> None:
    enum = SCHEMAS["ReasoningEffort"]["anyOf"][0]["enum"]
    from neutrino.pipeline.chat import REASONING_EFFORTS

    assert set(enum) == set(REASONING_EFFORTS)
    assert {"none", "xhigh"} <= set(enum)


@pytest.mark.parametrize("effort", ["none", "minimal", "xhigh", "max"])
def test_reasoning_effort_reaches_the_template_as_given(
    server: tuple[MockIE, NeutrinoProc], client: openai.OpenAI, effort: Any
) -> None:
    mock, _ = server
    done = client.chat.completions.create(
        model=HARMONY,
        messages=[{"role": "user", "content": "Think."}],
        max_tokens=2,
        reasoning_effort=effort,
    )
    assert done.choices[0].finish_reason in ("length", "stop")
    assert f"Reasoning: {effort}\n" in _last_prompt(mock, "o200k-harmony")


def test_an_effort_outside_the_reference_is_refused(client: openai.OpenAI) -> None:
    extreme: Any = "extreme"
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=HARMONY, messages=[{"role": "user", "content": "x"}], reasoning_effort=extreme
        )
    assert info.value.body["param"] == "reasoning_effort"  # type: ignore[index]


def _function_turns(content: str | None) -> list[Any]:
    return [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None,
         "function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"role": "function", "name": "get_weather", "content": content},
    ]  # fmt: skip


@pytest.mark.parametrize("content", [None, '{"c": 21}'])
def test_a_legacy_function_message_is_accepted(
    server: tuple[MockIE, NeutrinoProc], client: openai.OpenAI, content: str | None
) -> None:
    messages = _function_turns(content)
    for m in messages:  # the request's messages are the reference's own shapes
        validate(m, "ChatCompletionRequestMessage")
    done = client.chat.completions.create(model="qwen2.5-mock", messages=messages, max_tokens=2)
    validate(done.model_dump(mode="json", exclude_unset=True), "CreateChatCompletionResponse")
    assert server[0].events("query")[-1]["model"] == "qwen2.5-mock"


def test_a_function_message_without_its_name_is_refused(client: openai.OpenAI) -> None:
    messages = _function_turns("x")
    del messages[2]["name"]
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="qwen2.5-mock", messages=messages, max_tokens=2)
    assert info.value.body["param"] == "messages[2].name"  # type: ignore[index]


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", "/v1/models/qwen2.5-mock", "GET, HEAD"),
        ("POST", "/v1/models/qwen2.5-mock", "GET, HEAD"),
        ("PUT", "/v1/models", "GET, HEAD"),
        ("GET", "/v1/chat/completions", "POST"),
        ("DELETE", "/v1/completions", "POST"),
        ("GET", "/v1/embeddings", "POST"),
        ("GET", "/v1/audio/speech", "POST"),
        ("PATCH", "/v1/responses/resp_1", "DELETE, GET, HEAD"),
        ("POST", "/health", "GET, HEAD"),
        ("GET", "/neutrino/v1/reload", "POST"),
    ],
)
def test_another_method_is_a_405_with_allow(
    server: tuple[MockIE, NeutrinoProc], method: str, path: str, allow: str
) -> None:
    req = urllib.request.Request(server[1].base_url + path, method=method)
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=10)
    assert info.value.code == 405
    assert info.value.headers["Allow"] == allow
    assert json.loads(info.value.read())["error"]["code"] == "method_not_allowed"


def test_an_unknown_path_is_still_a_404(server: tuple[MockIE, NeutrinoProc]) -> None:
    req = urllib.request.Request(server[1].base_url + "/v1/nothing-here", method="GET")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=10)
    assert info.value.code == 404 and "Allow" not in info.value.headers


# ---------------------------------------------------------------- the reference's own examples


def _examples(path: str, method: str) -> list[tuple[str, dict[str, Any]]]:
    """The request bodies of the reference's curl examples for an endpoint."""
    import re

    spec = json.loads(SPEC_PATH.read_text())
    out = []
    for ex in spec["paths"][path][method]["x-oaiMeta"]["examples"]:
        found = re.search(r"-d '(.*)'", ex["request"]["curl"], re.S)
        assert found is not None
        out.append((ex["title"], json.loads(found.group(1))))
    return out


CHAT_EXAMPLES = _examples("/chat/completions", "post")


def _post(server: NeutrinoProc, body: dict[str, Any]) -> tuple[int, bytes]:
    req = urllib.request.Request(server.base_url + "/v1/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.mark.parametrize(("title", "body"), CHAT_EXAMPLES, ids=[t for t, _ in CHAT_EXAMPLES])
def test_the_references_chat_examples_validate(
    server: tuple[MockIE, NeutrinoProc], title: str, body: dict[str, Any]
) -> None:
    """Each of the reference's chat examples, sent as written (its model replaced by one
    served here), answers as the reference's schemas say: a completion, its chunks, or,
    for an image given by a web address (Neutrino fetches nothing), a clear 400."""
    assert len(CHAT_EXAMPLES) >= 5
    status, raw = _post(server[1], {**body, "model": "qwen2.5-mock", "max_tokens": 4})
    if title == "Image input":
        assert status == 400, raw
        validate(json.loads(raw), "ErrorResponse")
        return
    assert status == 200, raw
    if body.get("stream"):
        events = [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        for event in events[:-1]:
            validate(json.loads(event), "CreateChatCompletionStreamResponse")
        return
    answer = json.loads(raw)
    validate(answer, "CreateChatCompletionResponse")
    if body.get("logprobs"):
        assert answer["choices"][0]["logprobs"]["content"]


def test_the_references_model_examples_are_answered(server: tuple[MockIE, NeutrinoProc]) -> None:
    """The reference's retrieve example validates as a Model; its delete example (a
    fine-tuned model) gets a 405 naming what the path takes."""
    with urllib.request.urlopen(server[1].base_url + "/v1/models/qwen2.5-mock", timeout=10) as r:
        validate(json.loads(r.read()), "Model")
    req = urllib.request.Request(server[1].base_url + "/v1/models/qwen2.5-mock", method="DELETE")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=10)
    assert info.value.code == 405 and info.value.headers["Allow"] == "GET, HEAD"
