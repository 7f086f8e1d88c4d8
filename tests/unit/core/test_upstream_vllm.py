"""vLLM's OpenAI server as a token engine, sans-IO: the completions body a query becomes,
and the chunks (shaped as vLLM writes them with ``return_token_ids``) as results; the
same dialect runs against vLLM's own server in ``tests/integration/test_vllm_engine.py``."""

from __future__ import annotations

import math

import orjson

from neutrino.engine.messages import (
    EngineError,
    ErrorCode,
    FinishReason,
    Guided,
    GuidedMode,
    Sampling,
    TextQuery,
    TextResult,
)
from neutrino.engine.upstream import vllm


def query(**sampling: object) -> TextQuery:
    return TextQuery("m", [1, 2, 3], Sampling(max_tokens=8, **sampling))  # type: ignore[arg-type]


def chunk(ids: list[int], finish: str | None = None, **extra: object) -> bytes:
    choice = {"index": 0, "text": "", "token_ids": ids, "finish_reason": finish, **extra}
    return orjson.dumps({"object": "text_completion", "choices": [choice]})


def test_a_query_is_a_streamed_token_prompt_with_usage() -> None:
    q = query(top_k=-1, seed=5, min_tokens=2, stop_token_ids=[9])
    q.guided = Guided(GuidedMode.CHOICE, choices=["a", "b"])
    out = vllm.body(q, "up")
    assert isinstance(out, bytes)
    doc = orjson.loads(out)
    assert (doc["model"], doc["prompt"], doc["max_tokens"]) == ("up", [1, 2, 3], 8)
    assert doc["stream"] and doc["return_token_ids"] and doc["stream_options"]["include_usage"]
    assert (doc["top_k"], doc["seed"], doc["min_tokens"], doc["stop_token_ids"]) == (0, 5, 2, [9])
    assert doc["structured_outputs"] == {"choice": ["a", "b"]}
    assert "logprobs" not in doc


def test_the_last_result_waits_for_the_usage() -> None:
    answer = vllm.Answer(query())
    first = answer.event(chunk([4, 5]))
    assert isinstance(first, TextResult) and first.tokens == [4, 5]
    assert answer.event(chunk([6], "stop", stop_reason=6)) is None  # held for the usage
    usage = {
        "prompt_tokens": 3,
        "completion_tokens": 3,
        "prompt_tokens_details": {"cached_tokens": 2},
    }
    last = answer.event(orjson.dumps({"choices": [], "usage": usage}))
    assert isinstance(last, TextResult) and last.tokens == [6]
    assert last.finish_reason is FinishReason.STOP and last.stop_token_id == 6
    assert (last.prompt_tokens, last.completion_tokens, last.cached_tokens) == (3, 3, 2)
    assert answer.done and answer.event("[DONE]") is None


def test_without_usage_the_end_of_the_stream_gives_the_last_result() -> None:
    answer = vllm.Answer(query())
    assert answer.event(chunk([4], "length")) is None
    last = answer.event("[DONE]")
    assert isinstance(last, TextResult) and last.finish_reason is FinishReason.LENGTH


def test_a_stream_that_ends_unfinished_is_an_error() -> None:
    answer = vllm.Answer(query())
    answer.event(chunk([4]))
    err = answer.event("[DONE]")
    assert isinstance(err, EngineError) and err.code is ErrorCode.INTERNAL


def test_logprobs_are_read_by_token_id() -> None:
    q = query(logprobs=True, top_logprobs=2)
    assert orjson.loads(vllm.body(q, "m"))["return_tokens_as_token_ids"] is True  # type: ignore[arg-type]
    answer = vllm.Answer(q)
    lp = {
        "tokens": ["token_id:4", "token_id:5"],
        "token_logprobs": [-0.5, -1.0],
        "top_logprobs": [{"token_id:4": -0.5, "token_id:7": -2.0}, {"token_id:5": -1.0}],
    }
    out = answer.event(chunk([4, 5], logprobs=lp))
    assert isinstance(out, TextResult)
    assert list(out.logprobs) == [-0.5, -1.0]
    assert list(out.top_token_ids) == [4, 7, 5, 0]
    assert math.isinf(list(out.top_token_logprobs)[3])


def test_an_error_event_is_the_engine_error_it_names() -> None:
    answer = vllm.Answer(query())
    err = answer.event(orjson.dumps({"error": {"message": "too long", "code": 400}}))
    assert isinstance(err, EngineError) and err.code is ErrorCode.INVALID_REQUEST
    assert answer.done


def test_vllm_says_its_version() -> None:
    assert vllm.version_of({"version": "0.32.0"}) == "0.32.0"
    assert vllm.version_of({"total_slots": 4}) is None
