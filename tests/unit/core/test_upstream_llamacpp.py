"""llama.cpp's server as a token engine, sans-IO: the request body a query becomes, the
results its stream's events become, and its errors as engine errors.

The events are shaped as llama.cpp's server writes them (``tools/server``'s
``to_json_non_oaicompat``); the same dialect is driven against a real server in
``tests/integration/test_upstream_llamacpp.py``.
"""

from __future__ import annotations

import math

import orjson
import pytest

from neutrino.engine.messages import (
    EngineError,
    ErrorCode,
    FinishReason,
    Guided,
    GuidedMode,
    Image,
    Sampling,
    TextQuery,
    TextResult,
)
from neutrino.engine.upstream import llamacpp
from neutrino.engine.upstream.errors import upstream_error


def query(**sampling: object) -> TextQuery:
    return TextQuery("m", [1, 2, 3], Sampling(max_tokens=8, **sampling))  # type: ignore[arg-type]


def body(q: TextQuery, name: str = "up") -> dict[str, object]:
    out = llamacpp.body(q, name)
    assert isinstance(out, bytes), out
    doc: dict[str, object] = orjson.loads(out)
    return doc


def event(**fields: object) -> bytes:
    return orjson.dumps({"index": 0, "content": "", "stop": False, **fields})


def test_the_root_is_the_base_url_without_v1() -> None:
    assert llamacpp.root_of("http://h:8080/v1") == "http://h:8080"
    assert llamacpp.root_of("http://h:8080/v1/") == "http://h:8080"
    assert llamacpp.root_of("http://h:8080") == "http://h:8080"


def test_a_query_becomes_a_streamed_token_prompt() -> None:
    doc = body(query(temperature=0.5, top_k=-1, seed=7, repetition_penalty=1.1), "upstream-name")
    assert doc["prompt"] == [1, 2, 3]
    assert doc["model"] == "upstream-name"
    assert doc["n_predict"] == 8
    assert doc["stream"] is True and doc["return_tokens"] is True
    assert doc["top_k"] == 0  # llama.cpp's "off"
    assert doc["seed"] == 7
    assert doc["repeat_penalty"] == 1.1
    assert "n_probs" not in doc and "grammar" not in doc and "json_schema" not in doc


def test_logprobs_ask_for_at_least_one_probability() -> None:
    assert body(query(logprobs=True))["n_probs"] == 1
    assert body(query(logprobs=True, top_logprobs=3))["n_probs"] == 3


@pytest.mark.parametrize(
    ("guided", "key", "value"),
    [
        (Guided(GuidedMode.JSON_OBJECT), "json_schema", {"type": "object"}),
        (
            Guided(GuidedMode.JSON_SCHEMA, json_schema='{"type":"integer"}'),
            "json_schema",
            {"type": "integer"},
        ),
        (
            Guided(GuidedMode.CHOICE, choices=["yes", 'n"o']),
            "grammar",
            'root ::= "yes" | "n\\"o"\n',
        ),
        (Guided(GuidedMode.GRAMMAR, pattern='root ::= "a"'), "grammar", 'root ::= "a"'),
    ],
)  # fmt: skip
def test_guided_modes_become_schemas_or_grammars(guided: Guided, key: str, value: object) -> None:
    q = query()
    q.guided = guided
    assert body(q)[key] == value


def test_a_regex_becomes_a_grammar_and_what_a_grammar_cannot_say_is_unsupported() -> None:
    q = query()
    q.guided = Guided(GuidedMode.REGEX, pattern="[0-9]+")
    assert "root" in str(body(q)["grammar"])
    q.guided = Guided(GuidedMode.REGEX, pattern="(?=a)a")
    err = llamacpp.body(q, "m")
    assert isinstance(err, EngineError) and err.code is ErrorCode.UNSUPPORTED


@pytest.mark.parametrize("what", ["min_tokens", "images"])
def test_what_the_server_cannot_do_is_refused_as_unsupported(what: str) -> None:
    q = query(min_tokens=2) if what == "min_tokens" else query()
    if what == "images":
        q.images = [Image(b"x", "image/png", 1, 1)]
    err = llamacpp.body(q, "m")
    assert isinstance(err, EngineError) and err.code is ErrorCode.UNSUPPORTED
    assert what in err.message or "images" in err.message


def test_events_become_results_and_the_last_carries_usage_and_times() -> None:
    answer = llamacpp.Answer(query())
    first = answer.event(event(tokens=[10, 11]))
    assert isinstance(first, TextResult) and first.tokens == [10, 11] and first.plain
    assert answer.event(event(tokens=[])) is None  # nothing to pass on
    last = answer.event(
        event(
            tokens=[12],
            stop=True,
            stop_type="limit",
            tokens_evaluated=3,
            timings={"cache_n": 2, "prompt_ms": 1.5, "predicted_ms": 4.0},
        )
    )
    assert isinstance(last, TextResult)
    assert last.finish_reason is FinishReason.LENGTH
    assert (last.prompt_tokens, last.completion_tokens, last.cached_tokens) == (3, 3, 2)
    assert (last.prefill_ns, last.decode_ns) == (1_500_000, 4_000_000)
    assert answer.done


def test_an_end_of_generation_is_a_stop() -> None:
    answer = llamacpp.Answer(query())
    last = answer.event(event(tokens=[2], stop=True, stop_type="eos"))
    assert isinstance(last, TextResult) and last.finish_reason is FinishReason.STOP


def test_a_stop_id_ends_the_answer_where_it_arrives() -> None:
    answer = llamacpp.Answer(query(stop_token_ids=[99]))
    out = answer.event(event(tokens=[5, 99, 6]))
    assert isinstance(out, TextResult)
    assert out.tokens == [5, 99]
    assert out.finish_reason is FinishReason.STOP and out.stop_token_id == 99
    assert out.completion_tokens == 2
    assert answer.done


def test_logprobs_and_their_alternatives_are_read_per_token() -> None:
    answer = llamacpp.Answer(query(logprobs=True, top_logprobs=2))
    first_tops = [{"id": 10, "logprob": -0.5}, {"id": 4, "logprob": -1.5}]
    probs = [
        {"id": 10, "logprob": -0.5, "top_logprobs": first_tops},
        {"id": 11, "logprob": -0.25, "top_logprobs": [{"id": 11, "logprob": -0.25}]},
    ]
    out = answer.event(event(tokens=[10, 11], completion_probabilities=probs))
    assert isinstance(out, TextResult)
    assert list(out.logprobs) == [-0.5, -0.25]
    assert out.top_logprobs == 2
    assert list(out.top_token_ids) == [10, 4, 11, 0]
    assert list(out.top_token_logprobs)[:3] == [-0.5, -1.5, -0.25]
    assert math.isinf(list(out.top_token_logprobs)[3])


@pytest.mark.parametrize(
    "data",
    [b"not json", b"[1]", orjson.dumps({"content": "x", "stop": False})],
    ids=["not-json", "not-an-object", "no-token-ids"],
)
def test_a_malformed_event_ends_the_answer_with_a_protocol_error(data: bytes) -> None:
    answer = llamacpp.Answer(query())
    err = answer.event(data)
    assert isinstance(err, EngineError) and err.code is ErrorCode.PROTOCOL
    assert answer.done


def test_an_error_event_is_the_engine_error_it_names() -> None:
    answer = llamacpp.Answer(query())
    error = {
        "code": 400,
        "message": "the request exceeds the available context size",
        "type": "exceed_context_size_error",
    }
    data = orjson.dumps({"error": error})
    err = answer.event(data)
    assert isinstance(err, EngineError) and err.code is ErrorCode.CONTEXT_LENGTH


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (400, b'{"error":{"message":"bad"}}', ErrorCode.INVALID_REQUEST),
        (404, b'{"error":{"message":"no such model"}}', ErrorCode.UNKNOWN_MODEL),
        (503, b'{"error":{"message":"busy","type":"unavailable_error"}}', ErrorCode.OVERLOADED),
        (400, b'{"error":{"type":"exceed_context_size_error"}}', ErrorCode.CONTEXT_LENGTH),
        (500, b"<html>oops</html>", ErrorCode.INTERNAL),
        (429, b"", ErrorCode.OVERLOADED),
    ],
)  # fmt: skip
def test_error_answers_map_to_engine_errors(status: int, body: bytes, code: ErrorCode) -> None:
    err = upstream_error(status, body)
    assert err.code is code
    assert err.message


def test_props_give_context_and_slots_or_say_it_is_not_llama_cpp() -> None:
    doc = {"total_slots": 4, "default_generation_settings": {"n_ctx": 2048}}
    assert llamacpp.props_of(doc) == (2048, 4)
    assert llamacpp.props_of({"total_slots": 2}) == (0, 2)
    assert llamacpp.props_of({"version": "0.9"}) is None
    assert llamacpp.props_of([]) is None
