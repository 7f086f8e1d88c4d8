"""Unit tests of the sans-IO mock engine core."""

from __future__ import annotations

import math
from typing import Any

import pytest

from mocks.mock_ie import corpus
from mocks.mock_ie.core import Fault, MockEngine, MockGeneration, MockModel
from mocks.mock_ie.script import Script
from neutrino.engine.messages import (
    EngineError,
    ErrorCode,
    FinishReason,
    Sampling,
    TextQuery,
    TextResult,
)
from neutrino.engine.wire.codec import decode, encode
from neutrino.engine.wire.schema import PROTOCOL_VERSION
from tests.unit.mock_ie.helpers import ByteTokenizer, all_tokens, drain

EOS = 151645  # qwen2 <|im_end|>
MODEL = MockModel("qwen-mock", "qwen2", 4096)


def make_engine(**kwargs: Any) -> MockEngine:
    return MockEngine([MODEL], **kwargs)


@pytest.fixture(scope="module")
def engine() -> MockEngine:
    return make_engine()


def query(prompt: list[int], *, model: str = MODEL.name, **sampling: Any) -> TextQuery:
    sampling.setdefault("max_tokens", 200)
    return TextQuery(model=model, prompt_tokens=prompt, sampling=Sampling(**sampling))


def start(engine: MockEngine, q: TextQuery) -> MockGeneration:
    gen = engine.start(q)
    assert isinstance(gen, MockGeneration), gen
    return gen


def prompt_of(engine: MockEngine, text: str) -> list[int]:
    return engine.tokenizer(MODEL.name).encode(text)


def test_hello_ack() -> None:
    e = MockEngine(
        [MODEL, MockModel("byte-mock", "bytes", 512)],
        capacity=7,
        tokenizers={"bytes": ByteTokenizer()},
    )
    ack = e.hello_ack()
    assert ack.protocol_version == PROTOCOL_VERSION
    assert ack.capacity == 7
    assert [(m.name, m.context_length) for m in ack.models] == [
        ("qwen-mock", 4096),
        ("byte-mock", 512),
    ]
    assert ack.engine.startswith("mock_ie/")


def test_deterministic_and_seed_sensitive(engine: MockEngine) -> None:
    prompt = prompt_of(engine, "Tell me a story about the sea.")
    runs = {}
    for seed in (None, 0, 1, 2, 3, 4, 5):
        first = all_tokens(drain(start(engine, query(prompt, seed=seed))))
        again = all_tokens(drain(start(make_engine(), query(prompt, seed=seed))))
        assert first == again
        runs[seed] = tuple(first)
    assert len(set(runs.values())) == len(runs), "each seed gives its own reply"
    other = all_tokens(drain(start(engine, query([*prompt, 13], seed=1))))
    assert tuple(other) != runs[1]


def test_default_reply_is_corpus_text_within_bounds(engine: MockEngine) -> None:
    tok = engine.tokenizer(MODEL.name)
    text_twice = corpus.TEXT + " " + corpus.TEXT
    for seed in range(20):
        frames = drain(start(engine, query([1, 2, 3], seed=seed)))
        final = frames[-1]
        assert final.finish_reason == FinishReason.STOP
        assert final.stop_token_id == 0  # no stop ids requested: no extra token
        ids = all_tokens(frames)
        assert 8 <= len(ids) <= 48
        assert final.completion_tokens == len(ids)
        text = tok.decode(ids).rstrip("\ufffd")
        assert text and text in text_twice


def test_corpus_has_multibyte_text() -> None:
    for sample in ("café", "naïve", "🙂", "雨の日も楽しい", "你好"):
        assert sample in corpus.TEXT
    assert len(corpus.WORDS) >= 300


def test_stop_appends_end_token(engine: MockEngine) -> None:
    frames = drain(start(engine, query([5, 6, 7], seed=3, stop_token_ids=[EOS, 151643])))
    final = frames[-1]
    ids = all_tokens(frames)
    assert final.finish_reason == FinishReason.STOP
    assert final.stop_token_id == EOS
    assert ids[-1] == EOS and EOS not in ids[:-1]
    assert final.completion_tokens == len(ids)
    assert final.prompt_tokens == 3 and final.cached_tokens == 0
    assert final.prefill_ns > 0 and final.decode_ns > 0
    plain = all_tokens(drain(start(engine, query([5, 6, 7], seed=3))))
    assert ids[:-1] == plain


def test_length_when_max_tokens_reached() -> None:
    e = make_engine(reply_tokens=10)
    frames = drain(start(e, query([1], max_tokens=4, stop_token_ids=[EOS])))
    assert frames[-1].finish_reason == FinishReason.LENGTH
    assert all_tokens(frames) == all_tokens(drain(start(e, query([1], max_tokens=10))))[:4]
    assert frames[-1].completion_tokens == 4
    # A reply exactly max_tokens long has no room for the end token: LENGTH.
    frames = drain(start(e, query([1], max_tokens=10, stop_token_ids=[EOS])))
    assert frames[-1].finish_reason == FinishReason.LENGTH
    assert len(all_tokens(frames)) == 10 and EOS not in all_tokens(frames)
    # One more token of room: STOP with the end token.
    frames = drain(start(e, query([1], max_tokens=11, stop_token_ids=[EOS])))
    assert frames[-1].finish_reason == FinishReason.STOP
    assert len(all_tokens(frames)) == 11 and all_tokens(frames)[-1] == EOS


def test_reply_tokens_and_frame_sizes() -> None:
    one = all_tokens(drain(start(make_engine(reply_tokens=13), query([9], seed=1))))
    assert len(one) == 13
    frames = drain(start(make_engine(reply_tokens=13, tokens_per_frame=5), query([9], seed=1)))
    assert [len(f.tokens) for f in frames] == [5, 5, 3]
    assert all_tokens(frames) == one
    frames = drain(
        start(
            make_engine(reply_tokens=10, tokens_per_frame=5),
            query([9], seed=1, stop_token_ids=[EOS]),
        )
    )
    assert [len(f.tokens) for f in frames] == [5, 5, 1]
    empty = drain(start(make_engine(reply_tokens=0), query([9])))
    assert len(empty) == 1 and empty[0].tokens == [] and empty[0].completion_tokens == 0


def test_ignore_eos_and_min_tokens() -> None:
    e = make_engine(reply_tokens=5)
    frames = drain(start(e, query([1], max_tokens=60, ignore_eos=True, stop_token_ids=[EOS])))
    assert frames[-1].finish_reason == FinishReason.LENGTH
    assert len(all_tokens(frames)) == 60
    frames = drain(start(e, query([1], max_tokens=60, min_tokens=20)))
    assert frames[-1].finish_reason == FinishReason.STOP
    assert len(all_tokens(frames)) == 20


def test_stop_token_inside_reply() -> None:
    script = Script.from_rules([{"match": "*", "reply_tokens": [10, 11, 12, 13, 14]}])
    e = make_engine(script=script, tokens_per_frame=2)
    frames = drain(start(e, query([1], stop_token_ids=[99, 12])))
    assert all_tokens(frames) == [10, 11, 12]
    assert frames[-1].finish_reason == FinishReason.STOP
    assert frames[-1].stop_token_id == 12
    assert frames[-1].completion_tokens == 3
    # min_tokens suppresses an early stop token.
    frames = drain(start(e, query([1], stop_token_ids=[11], min_tokens=3)))
    assert all_tokens(frames) == [10, 11, 12, 13, 14, 11]


def test_logprobs_shapes(engine: MockEngine) -> None:
    prompt = prompt_of(engine, "logprobs please")
    for k in (0, 1, 5, 20):
        frames = drain(start(engine, query(prompt, seed=9, logprobs=True, top_logprobs=k)))
        again = drain(start(engine, query(prompt, seed=9, logprobs=True, top_logprobs=k)))
        assert frames == [_no_timings(a, b) for a, b in zip(again, frames, strict=True)]
        for f in frames:
            n = len(f.tokens)
            assert len(f.logprobs) == n
            assert all(lp < 0 for lp in f.logprobs)
            assert f.top_logprobs == k
            assert len(f.top_token_ids) == n * k
            assert len(f.top_token_logprobs) == n * k
            for i, chosen in enumerate(f.tokens):
                if not k:
                    continue
                ids = list(f.top_token_ids[i * k : (i + 1) * k])
                lps = list(f.top_token_logprobs[i * k : (i + 1) * k])
                assert chosen in ids and len(set(ids)) == k
                assert lps == sorted(lps, reverse=True)
                assert all(lp < 0 for lp in lps)
                assert sum(math.exp(lp) for lp in lps) <= 1.0 + 1e-6
                assert lps[ids.index(chosen)] == f.logprobs[i]
        # Values are float32 already: they survive the wire unchanged.
        for f in frames:
            _, back = decode(encode(5, f))
            assert isinstance(back, TextResult)
            assert list(back.logprobs) == list(f.logprobs)
            assert list(back.top_token_logprobs) == list(f.top_token_logprobs)
    plain = drain(start(engine, query(prompt, seed=9)))
    assert all(not f.logprobs and not f.top_token_ids and f.top_logprobs == 0 for f in plain)


def _no_timings(src: TextResult, like: TextResult) -> TextResult:
    src.prefill_ns, src.decode_ns, src.queue_ns = like.prefill_ns, like.decode_ns, like.queue_ns
    return src


def test_cancel() -> None:
    gen = start(make_engine(reply_tokens=30, tokens_per_frame=2), query([1]))
    gen.next()
    gen.next()
    final = gen.cancel()
    assert final.finish_reason == FinishReason.CANCELLED
    assert final.tokens == []
    assert final.completion_tokens == 4 and final.prompt_tokens == 1
    assert gen.done
    with pytest.raises(RuntimeError):
        gen.next()
    with pytest.raises(RuntimeError):
        gen.cancel()


@pytest.mark.parametrize(
    ("q", "code"),
    [
        (query([1], model="nope"), ErrorCode.UNKNOWN_MODEL),
        (query([1], max_tokens=0), ErrorCode.INVALID_REQUEST),
        (query([1] * 4000, max_tokens=97), ErrorCode.CONTEXT_LENGTH),
        (query([1], logprobs=True, top_logprobs=21), ErrorCode.INVALID_REQUEST),
    ],
)
def test_validation(engine: MockEngine, q: TextQuery, code: ErrorCode) -> None:
    err = engine.start(q)
    assert isinstance(err, EngineError)
    assert err.code == code and err.message


def test_context_exactly_full_is_accepted(engine: MockEngine) -> None:
    assert isinstance(engine.start(query([1] * 4000, max_tokens=96)), MockGeneration)


def test_scripted_text_reply_round_trips_multibyte() -> None:
    reply = "Bonjour, café naïve 🙂 雨の日 你好!"
    script = Script.from_rules(
        [
            {"match": "weather", "reply": "It rains."},
            {"match": "greet", "reply": reply},
            {"match": "*", "reply": "fallback"},
        ]
    )
    e = make_engine(script=script)
    tok = e.tokenizer(MODEL.name)
    frames = drain(start(e, query(tok.encode("please greet me"), stop_token_ids=[EOS])))
    ids = all_tokens(frames)
    assert ids[-1] == EOS and tok.decode(ids[:-1]) == reply
    text = "".join(tok.decode([i]) for i in ids[:-1])
    assert "\ufffd" in text  # single-token decoding splits multi-byte characters
    frames = drain(start(e, query(tok.encode("how is the weather? greet"))))
    assert tok.decode(all_tokens(frames)) == "It rains."
    frames = drain(start(e, query(tok.encode("anything"))))
    assert tok.decode(all_tokens(frames)) == "fallback"


def test_script_finish_length_and_no_match() -> None:
    script = Script.from_rules([{"match": "cut", "reply": "cut short", "finish": "length"}])
    e = make_engine(script=script, reply_tokens=9)
    tok = e.tokenizer(MODEL.name)
    frames = drain(start(e, query(tok.encode("cut"), stop_token_ids=[EOS])))
    assert frames[-1].finish_reason == FinishReason.LENGTH
    assert tok.decode(all_tokens(frames)) == "cut short"
    frames = drain(start(e, query(tok.encode("other"))))
    assert len(all_tokens(frames)) == 9  # no rule: default reply


def _pull(gen: MockGeneration) -> tuple[list[int], TextResult | Fault]:
    ids: list[int] = []
    while True:
        item = gen.next()
        if isinstance(item, Fault) or item.finish_reason != FinishReason.NONE:
            return ids, item
        ids.extend(item.tokens)


@pytest.mark.parametrize("kind", ["drop", "error", "stall"])
def test_faults(kind: str) -> None:
    rule: dict[str, Any] = {"match": "*", "fault": kind, "fault_after": 3}
    if kind == "error":
        rule.update(error_code="overloaded", error_message="busy now")
    e = make_engine(script=Script.from_rules([rule]), reply_tokens=10, tokens_per_frame=2)
    gen = start(e, query([1]))
    ids, item = _pull(gen)
    assert len(ids) == 3
    assert isinstance(item, Fault) and item.kind == kind
    if kind == "error":
        assert item.code == ErrorCode.OVERLOADED and item.message == "busy now"
    if kind == "stall":
        assert not gen.done and gen.stalled
        with pytest.raises(RuntimeError):
            gen.next()
        final = gen.cancel()
        assert final.finish_reason == FinishReason.CANCELLED and final.completion_tokens == 3
    else:
        assert gen.done


def test_fault_after_longer_than_reply_replaces_final() -> None:
    script = Script.from_rules(
        [{"match": "*", "reply_tokens": [1, 2], "fault": "error", "fault_after": 50}]
    )
    gen = start(make_engine(script=script), query([1], stop_token_ids=[7]))
    ids, item = _pull(gen)
    assert ids == [1, 2, 7] and isinstance(item, Fault)
    gen = start(
        make_engine(script=Script.from_rules([{"match": "*", "fault": "drop"}])), query([1])
    )
    assert isinstance(gen.next(), Fault)


def test_stand_in_tokenizer() -> None:
    script = Script.from_rules([{"match": "hi", "reply": "ünï 🙂"}])
    e = MockEngine(
        [MockModel("b", "bytes", 1000)],
        tokenizers={"bytes": ByteTokenizer()},
        script=script,
    )
    q = TextQuery("b", list(b"say hi"), Sampling(max_tokens=50, logprobs=True, top_logprobs=3))
    frames = drain(start(e, q))
    assert bytes(all_tokens(frames)).decode() == "ünï 🙂"
    for f in frames:
        assert all(0 <= t < 256 for t in f.top_token_ids)
    q = TextQuery("b", list(b"other"), Sampling(max_tokens=100, seed=1))
    ids = all_tokens(drain(start(e, q)))
    assert 8 <= len(ids) <= 48


def test_a_continued_request_goes_on_as_an_unbroken_run(engine: MockEngine) -> None:
    prompt = prompt_of(engine, "Continue where the other replica stopped.")
    whole = drain(start(engine, query(prompt, seed=4, logprobs=True, top_logprobs=3)))
    ids = all_tokens(whole)
    for cut in (1, 5, len(ids) - 2):
        moved = TextQuery(
            model=MODEL.name, prompt_tokens=prompt, forced_tokens=ids[:cut],
            sampling=Sampling(max_tokens=200, seed=4, logprobs=True, top_logprobs=3),
        )  # fmt: skip
        rest = drain(start(engine, moved))
        assert all_tokens(rest) == ids[cut:]
        entries = [(t, lp) for f in rest for t, lp in zip(f.tokens, f.logprobs, strict=True)]
        assert entries == [(t, lp) for f in whole for t, lp in zip(f.tokens, f.logprobs,
                                                                    strict=True)][cut:]  # fmt: skip
        assert rest[-1].completion_tokens == whole[-1].completion_tokens
        assert rest[-1].prompt_tokens == len(prompt)
    assert engine.hello_ack().continues


def test_forced_tokens_reaching_max_tokens_are_refused(engine: MockEngine) -> None:
    q = TextQuery(model=MODEL.name, prompt_tokens=[1, 2], forced_tokens=[3, 4],
                  sampling=Sampling(max_tokens=2))  # fmt: skip
    err = engine.start(q)
    assert isinstance(err, EngineError) and err.code is ErrorCode.INVALID_REQUEST


def test_a_fault_comes_after_tokens_of_the_replicas_own() -> None:
    script = Script.from_rules([{"match": "*", "fault": "error", "fault_after": 3,
                                  "error_code": "internal"}])  # fmt: skip
    e = make_engine(script=script, reply_tokens=20)
    prompt = prompt_of(e, "faulty")
    moved = TextQuery(model=MODEL.name, prompt_tokens=prompt, forced_tokens=list(range(5)),
                      sampling=Sampling(max_tokens=200))  # fmt: skip
    gen = start(e, moved)
    out = [gen.next() for _ in range(4)]
    assert sum(len(f.tokens) for f in out[:3] if isinstance(f, TextResult)) == 3
    assert isinstance(out[3], Fault)
    near_end = TextQuery(model=MODEL.name, prompt_tokens=prompt, forced_tokens=list(range(18)),
                         sampling=Sampling(max_tokens=200))  # fmt: skip
    assert drain(start(e, near_end))[-1].finish_reason is FinishReason.STOP  # none left to fail
