"""Bounds on one request that users of the field expect, each refused with a 400 that
names its param, against a real server and mock engine: logit_bias (entries, key form,
range, vocabulary), a JSON schema's depth (and no schema ever a 500), and the size of a
non-streamed answer (n * max_tokens * (1 + top_logprobs))."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from typing import Any

from tests.support.procs import MockIE, NeutrinoProc

MODEL = "qwen2.5-mock"  # a vocabulary of 151,665 ids


def _chat(server: NeutrinoProc, **extra: Any) -> tuple[int, Any]:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    body.update(extra)
    return server.post_json("/v1/chat/completions", json.dumps(body).encode())


def _refused(answer: tuple[int, Any], param: str, words: str) -> None:
    status, body = answer
    assert status == 400, body
    assert body["error"]["param"] == param, body
    assert words in body["error"]["message"], body


def test_logit_bias_is_checked(stack: tuple[MockIE, NeutrinoProc]) -> None:
    _, server = stack
    assert _chat(server, logit_bias={"15": 5, "151664": -100})[0] == 200
    _refused(_chat(server, logit_bias={"151665": 1}), "logit_bias", "vocabulary size 151665")
    _refused(_chat(server, logit_bias={"abc": 1}), "logit_bias", "not a token id")
    _refused(_chat(server, logit_bias={"-1": 1}), "logit_bias", "not a token id")
    _refused(_chat(server, logit_bias={"7": 101}), "logit_bias", "between -100 and 100")
    _refused(_chat(server, logit_bias=[1, 2]), "logit_bias", "object")
    many = {str(i): 1 for i in range(1025)}  # [limits] max_logit_bias = 1024
    _refused(_chat(server, logit_bias=many), "logit_bias", "at most 1024")
    completion = {"model": MODEL, "prompt": "hi", "logit_bias": {"999999": 1}}
    answer = server.post_json("/v1/completions", json.dumps(completion).encode())
    _refused(answer, "logit_bias", "vocabulary")


def _deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_a_json_schema_too_deep_or_unusable_is_a_400(stack: tuple[MockIE, NeutrinoProc]) -> None:
    _, server = stack
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": _deep(20)}}
    assert _chat(server, response_format=fmt)[0] == 200
    param = "response_format.json_schema.schema"
    for levels in (40, 400):  # 40 objects nest 81 levels of JSON: over the 64 allowed
        fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": _deep(levels)}}
        _refused(_chat(server, response_format=fmt), param, "more than 64 levels")
    deep = json.dumps(_deep(400))  # a schema given as a string: parsed, then measured
    _refused(_chat(server, structured_outputs={"json": deep}), "structured_outputs.json", "64")
    _refused(_chat(server, guided_json="[" * 5000), "guided_json", "must be a JSON schema")
    odd = {"type": "object", "properties": {"a": {"$ref": "#/no/such/place"}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": odd, "strict": True}}
    status, body = _chat(server, response_format=fmt)
    assert status in (200, 400, 502), body  # never a 500: checked, or a broken format


def test_a_non_streamed_answer_has_a_budget(stack: tuple[MockIE, NeutrinoProc]) -> None:
    """[limits] max_unstreamed_tokens = 2**20: 8 * 4000 * 21 = 672,000 would be served
    (test_loop_budget serves it), 8 * 8000 * 21 = 1,344,000 is refused unless streamed."""
    _, server = stack
    big = {"n": 8, "logprobs": True, "top_logprobs": 20, "ignore_eos": True}
    _refused(_chat(server, **big, max_tokens=8000), "max_tokens", "1,344,000")
    big["top_logprobs"] = 4
    _refused(_chat(server, **big, max_tokens=30000), "max_tokens", "1,200,000")
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    request = urllib.request.Request(
        server.base_url + "/v1/chat/completions",
        data=json.dumps({**body, **big, "max_tokens": 30000}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as r:  # a stream has no such budget
        assert r.status == 200
        assert r.read(6) == b": ok\n\n"


def test_without_max_tokens_a_non_streamed_answer_is_held_to_the_budget(
    stack: tuple[MockIE, NeutrinoProc], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    mock, _ = stack
    config = "[limits]\nmax_unstreamed_tokens = 1000\n"
    server = neutrino_factory("--engine", mock.socket, config=config)
    status, body = _chat(
        server, n=2, logprobs=True, top_logprobs=4, ignore_eos=True, max_tokens=None
    )
    assert status == 200, body
    assert [c["finish_reason"] for c in body["choices"]] == ["length", "length"]
    assert body["usage"]["completion_tokens"] == 2 * (1000 // 10)
    _refused(_chat(server, n=2, max_tokens=501), "max_tokens", "1,002")
