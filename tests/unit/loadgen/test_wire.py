"""The protocols' wire modules: request bodies, and answers (streamed and whole) read into a
probe with a fake clock; errors become kinds."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from neutrino.loadgen import wire_anthropic, wire_openai
from neutrino.loadgen.api import Params
from neutrino.loadgen.drive_grpc import request as grpc_request
from neutrino.loadgen.errors import RequestFailed, classify, http_failure
from neutrino.loadgen.probe import Probe
from neutrino.loadgen.prompts import Prompt

PROMPT = Prompt((("system", "Be brief."), ("user", "Hi")), 16)


def clock(*times: float) -> Iterator[float]:
    yield from times


def probe(*times: float, keep: bool = True) -> Probe:
    it = clock(*times)
    return Probe(lambda: next(it), keep_text=keep)


def test_openai_body() -> None:
    body = json.loads(wire_openai.body(PROMPT, Params("m", True, True, 0.5)))
    assert body == {
        "model": "m",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "max_tokens": 16,
        "temperature": 0.5,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    plain = json.loads(wire_openai.body(Prompt((("user", "x"),), None), Params("m", False)))
    assert plain == {"model": "m", "messages": [{"role": "user", "content": "x"}]}


def _chunk(delta: dict[str, object], usage: dict[str, int] | None = None) -> str:
    obj: dict[str, object] = {"choices": [{"index": 0, "delta": delta}] if delta else []}
    if usage is not None:
        obj["usage"] = usage
    return json.dumps(obj)


def test_openai_stream_times_output_chunks() -> None:
    p = probe(0.0, 0.1, 0.15, 0.35)  # sent, then three output chunks
    s = wire_openai.ChatStream(p)
    s.event("message", _chunk({"role": "assistant", "content": ""}))  # not output
    s.event("message", _chunk({"content": "Hel"}))
    s.event("message", _chunk({"reasoning_content": "hmm"}))
    s.event("message", _chunk({"content": "lo"}))
    s.event("message", _chunk({}, {"prompt_tokens": 9, "completion_tokens": 3}))
    assert not s.done
    s.event("message", "[DONE]")
    assert s.done
    assert p.first == 0.1 and list(p.gaps) == pytest.approx([0.05, 0.2])
    assert (p.prompt_tokens, p.output_tokens, p.text) == (9, 3, "Hello")


def test_openai_stream_error_event() -> None:
    s = wire_openai.ChatStream(probe(0.0))
    with pytest.raises(RequestFailed) as err:
        s.event("message", json.dumps({"error": {"type": "server_error", "code": "engine_lost",
                                                 "message": "gone"}}))  # fmt: skip
    assert (err.value.kind, err.value.message) == ("stream error engine_lost", "gone")


def test_openai_whole_answer() -> None:
    p = probe(0.0)
    answer = {
        "choices": [{"message": {"role": "assistant", "content": "All done"}}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6},
    }
    wire_openai.read_whole(json.dumps(answer).encode(), p)
    assert (p.text, p.prompt_tokens, p.output_tokens, p.first) == ("All done", 4, 2, None)
    with pytest.raises(RequestFailed, match="not JSON"):
        wire_openai.read_whole(b"<html>", p)


def test_first_model() -> None:
    assert wire_openai.first_model(b'{"data": [{"id": "a"}, {"id": "b"}]}') == "a"
    assert wire_openai.first_model(b'{"data": []}') is None


def test_anthropic_body_moves_the_system_prompt() -> None:
    body = json.loads(wire_anthropic.body(PROMPT, Params("m", True)))
    assert body == {
        "model": "m",
        "max_tokens": 16,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
    }
    assert wire_anthropic.headers("k")["x-api-key"] == "k"
    with pytest.raises(ValueError):
        wire_anthropic.body(Prompt((("user", "x"),), None), Params("m"))


def test_anthropic_stream() -> None:
    p = probe(0.0, 0.2, 0.3)
    s = wire_anthropic.MessageStream(p)
    events = [
        ("message_start", {"type": "message_start",
                           "message": {"usage": {"input_tokens": 12, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("ping", {"type": "ping"}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Hi "}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "you"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 2}}),
    ]  # fmt: skip
    for name, obj in events:
        s.event(name, json.dumps(obj))
    assert not s.done
    s.event("message_stop", '{"type": "message_stop"}')
    assert s.done
    assert (p.first, list(p.gaps)) == (0.2, pytest.approx([0.1]))
    assert (p.prompt_tokens, p.output_tokens, p.text) == (12, 2, "Hi you")
    with pytest.raises(RequestFailed, match="overloaded") as err:
        error = {"type": "overloaded_error", "message": "overloaded"}
        s.event("error", json.dumps({"type": "error", "error": error}))
    assert err.value.kind == "stream error overloaded_error"


def test_anthropic_whole_answer() -> None:
    p = probe(0.0)
    answer = {"content": [{"type": "thinking", "thinking": "..."}, {"type": "text", "text": "Yes"}],
              "usage": {"input_tokens": 3, "output_tokens": 8}}  # fmt: skip
    wire_anthropic.read_whole(json.dumps(answer).encode(), p)
    assert (p.text, p.prompt_tokens, p.output_tokens) == ("Yes", 3, 8)


def test_grpc_request() -> None:
    req = grpc_request(PROMPT, Params("m", True, True))
    assert req.model == "m" and req.max_tokens == 16 and req.ignore_eos
    assert [(m.role, m.content) for m in req.chat.messages] == list(PROMPT.messages)
    assert not req.HasField("temperature")
    assert not grpc_request(Prompt((("user", "x"),), None), Params("m")).HasField("max_tokens")


def test_error_kinds() -> None:
    openai = b'{"error": {"message": "no such model", "type": "invalid_request_error", '
    openai += b'"param": "model", "code": "model_not_found"}}'
    assert http_failure(404, openai).kind == "http 404 model_not_found"
    anthropic = b'{"type": "error", "error": {"type": "not_found_error", "message": "m"}}'
    assert http_failure(404, anthropic).kind == "http 404 not_found_error"
    bare = http_failure(502, b"Bad Gateway")
    assert (bare.kind, bare.message) == ("http 502", "Bad Gateway")
    assert classify(TimeoutError())[0] == "timeout"
    assert classify(ConnectionRefusedError("refused"))[0] == "connection"
    assert classify(ValueError("x")) == ("error ValueError", "x")
