"""What a relayed answer says of itself (``pipeline/relay.py``'s ``Tally``), sans-IO: the
tokens, usage and finish reason of OpenAI and Anthropic answers, streamed and whole,
however the bytes are cut."""

from __future__ import annotations

import orjson
import pytest

from neutrino.pipeline.relay import Tally


def sse(*docs: object) -> bytes:
    return b"".join(b"data: " + orjson.dumps(d) + b"\n\n" for d in docs)


def chunk(content: str, finish: str | None = None) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]}


def feed_cut(tally: Tally, data: bytes, size: int) -> None:
    for i in range(0, len(data), size):
        tally.feed(data[i : i + size])


@pytest.mark.parametrize("size", [1, 7, 4096])
def test_an_openai_stream_counts_its_chunks_until_the_usage_says(size: int) -> None:
    t = Tally(streamed=True)
    feed_cut(t, sse(chunk("a"), chunk("b"), chunk("", "stop")), size)
    assert not t.finished  # the stream's last event has not come
    feed_cut(t, b"data: [DONE]\n\n", size)
    assert (t.completion_tokens, t.finish_reason, t.output) == (2, "stop", True)
    assert t.finished
    t = Tally(streamed=True)
    usage = {
        "prompt_tokens": 9,
        "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 4},
    }
    feed_cut(t, sse(chunk("a"), {"choices": [], "usage": usage}), size)
    assert (t.prompt_tokens, t.completion_tokens, t.cached_tokens) == (9, 5, 4)


def test_an_anthropic_stream() -> None:
    t = Tally(streamed=True)
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 12, "output_tokens": 1}}},
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "!"}},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 3},
        },
    ]
    t.feed(sse(*events))
    assert (t.prompt_tokens, t.completion_tokens, t.finish_reason) == (12, 3, "end_turn")
    assert t.output and t.error is None and not t.finished
    t.feed(sse({"type": "message_stop"}))
    assert t.finished


def test_whole_answers_of_both_apis() -> None:
    t = Tally(streamed=False)
    openai_answer = {
        "choices": [{"message": {"content": "x"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 2, "completion_tokens": 1},
    }
    t.whole(orjson.dumps(openai_answer))
    assert (t.prompt_tokens, t.completion_tokens, t.finish_reason) == (2, 1, "length")
    t = Tally(streamed=False)
    anthropic_answer = {
        "type": "message",
        "content": [{"type": "text", "text": "x"}],
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 4, "output_tokens": 2},
    }
    t.whole(orjson.dumps(anthropic_answer))
    assert (t.prompt_tokens, t.completion_tokens, t.finish_reason) == (4, 2, "max_tokens")


def test_an_error_event_is_the_requests_error() -> None:
    t = Tally(streamed=True)
    t.feed(sse(chunk("a"), {"error": {"message": "out of memory"}}))
    assert t.error is not None and "out of memory" in t.error.message
    t = Tally(streamed=True)
    t.feed(sse({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}))
    assert t.error is not None and "busy" in t.error.message
