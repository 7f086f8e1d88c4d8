"""/v1/embeddings with the official openai SDK, and /v1/rerank, against real processes."""

from __future__ import annotations

import base64
import json
import math
import urllib.error
import urllib.request
from array import array
from typing import Any

import openai
import pytest

from tests.support.openapi import validate
from tests.support.procs import MockIE, NeutrinoProc

MODEL = "embed-mock"


@pytest.fixture(scope="module")
def client(stack: tuple[MockIE, NeutrinoProc]) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack[1].base_url + "/v1", api_key="x", max_retries=0)


def post(server: NeutrinoProc, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        server.base_url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_sdk_embeddings_float_and_base64(
    client: openai.OpenAI, stack: tuple[MockIE, NeutrinoProc]
) -> None:
    r = client.embeddings.create(model=MODEL, input=["hello world", "bonjour"], dimensions=32)
    validate(r.model_dump(mode="json", exclude_unset=True), "CreateEmbeddingResponse")
    assert [d.index for d in r.data] == [0, 1]
    assert all(len(d.embedding) == 32 for d in r.data)
    assert all(abs(math.sqrt(sum(v * v for v in d.embedding)) - 1) < 1e-4 for d in r.data)
    assert r.usage.prompt_tokens == r.usage.total_tokens > 0
    again = client.embeddings.create(model=MODEL, input="hello world", dimensions=32)
    assert again.data[0].embedding == r.data[0].embedding  # deterministic per input
    status, raw = post(
        stack[1],
        "/v1/embeddings",
        {"model": MODEL, "input": "hello world", "dimensions": 32, "encoding_format": "base64"},
    )
    assert status == 200  # the spec models only float arrays; base64 is a string
    decoded = array("f", base64.b64decode(raw["data"][0]["embedding"])).tolist()
    assert decoded == pytest.approx(r.data[0].embedding, abs=1e-6)


def test_token_array_input(client: openai.OpenAI) -> None:
    r = client.embeddings.create(model=MODEL, input=[[1, 2, 3], [4, 5]])
    assert len(r.data) == 2 and len(r.data[0].embedding) == 384
    assert r.usage.prompt_tokens == 5


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": MODEL, "input": ""}, "input"),
        ({"model": MODEL, "input": []}, "input"),
        ({"model": MODEL, "input": [1.5]}, "input"),
        ({"model": MODEL, "input": "x", "dimensions": 0}, "dimensions"),
        ({"model": MODEL, "input": "x", "dimensions": 4096}, "dimensions"),
        ({"model": MODEL, "input": "x", "encoding_format": "hex"}, "encoding_format"),
        ({"model": "qwen2.5-mock", "input": "x"}, "model"),
        ({"model": MODEL, "input": "word " * 600}, "input"),
    ],
)
def test_bad_embedding_input(
    stack: tuple[MockIE, NeutrinoProc], body: dict[str, Any], param: str
) -> None:
    mock, server = stack
    before = len(mock.events("query"))
    status, err = post(server, "/v1/embeddings", body)
    assert status == 400, err
    validate(err, "ErrorResponse")
    assert err["error"]["param"] == param
    assert len(mock.events("query")) == before


def test_rerank(stack: tuple[MockIE, NeutrinoProc]) -> None:
    _, server = stack
    status, r = post(
        server,
        "/v1/rerank",
        {
            "model": MODEL,
            "query": "red apples",
            "documents": ["green pears", "red apples and red cherries", {"text": "red"}],
            "top_n": 2,
        },
    )
    assert status == 200, r
    assert [x["index"] for x in r["results"]] == [1, 2]
    assert r["results"][0]["relevance_score"] >= r["results"][1]["relevance_score"]
    assert r["results"][0]["document"] == {"text": "red apples and red cherries"}
    assert r["usage"]["total_tokens"] > 0
    status, err = post(
        server, "/v1/rerank", {"model": MODEL, "query": "q", "documents": ["d"] * 1001}
    )
    assert status == 400 and err["error"]["param"] == "documents"
    status, err = post(server, "/v1/rerank", {"model": MODEL, "query": "", "documents": ["d"]})
    assert status == 400 and err["error"]["param"] == "query"
