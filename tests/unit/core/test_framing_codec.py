from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neutrino.engine.messages import (
    AudioQuery,
    AudioResult,
    AudioSegment,
    AudioTask,
    Box,
    Cancel,
    Capability,
    DetectQuery,
    DetectResult,
    EmbedQuery,
    EmbedResult,
    EngineError,
    ErrorCode,
    FinishReason,
    Guided,
    GuidedMode,
    Hello,
    HelloAck,
    Image,
    ModelInfo,
    Ping,
    Pong,
    RerankQuery,
    RerankResult,
    Sampling,
    SpeechQuery,
    SpeechResult,
    TextQuery,
    TextResult,
)
from neutrino.engine.wire.codec import (
    DecodeError,
    decode,
    decode_slow,
    encode,
    encode_capnp,
)
from neutrino.engine.wire.framing import FrameDecoder, FrameTooLarge
from neutrino.engine.wire.reader import decode_tokens
from neutrino.engine.wire.schema import MAX_FRAME_BYTES
from tests.support.capnp_tool import capnp_decode

u32 = st.integers(0, 2**32 - 1)
f32 = st.sampled_from([0.0, -0.5, -1.25, -3.0, -10.5])


@st.composite
def results(draw: st.DrawFn) -> TextResult:
    n = draw(st.integers(0, 6))
    k = draw(st.integers(0, 3))
    lp = draw(st.booleans())
    return TextResult(
        tokens=draw(st.lists(u32, min_size=n, max_size=n)),
        finish_reason=draw(st.sampled_from(list(FinishReason))),
        logprobs=draw(st.lists(f32, min_size=n, max_size=n)) if lp else (),
        top_logprobs=k if lp and n else 0,
        top_token_ids=draw(st.lists(u32, min_size=n * k, max_size=n * k)) if lp and n and k else (),
        top_token_logprobs=draw(st.lists(f32, min_size=n * k, max_size=n * k))
        if lp and n and k
        else (),
        stop_token_id=draw(u32),
        prompt_tokens=draw(u32),
        cached_tokens=draw(u32),
        completion_tokens=draw(u32),
        queue_ns=draw(st.integers(0, 2**63)),
        prefill_ns=draw(st.integers(0, 2**63)),
        decode_ns=draw(st.integers(0, 2**63)),
    )


def _norm(msg: TextResult) -> tuple[object, ...]:
    return tuple(
        list(v) if isinstance(v, list | tuple) else v
        for v in (getattr(msg, f) for f in msg.__slots__)
    )


@settings(max_examples=200, deadline=None)
@given(results(), st.integers(0, 2**64 - 1), st.booleans())
def test_fast_reader_equals_pycapnp(result: TextResult, rid: int, by_pycapnp: bool) -> None:
    """Frames from our writer and from pycapnp's builder read back the same, both ways."""
    frame = encode_capnp(rid, result) if by_pycapnp else encode(rid, result)
    fast_rid, fast = decode(frame)
    slow_rid, slow = decode_slow(frame)
    assert fast_rid == slow_rid == rid
    assert isinstance(fast, TextResult) and isinstance(slow, TextResult)
    assert _norm(fast) == _norm(slow) == _norm(result)
    hot = decode_tokens(frame)
    if hot is not None:  # the per-token path agrees with the full reader
        assert result.finish_reason is FinishReason.NONE and not result.logprobs
        assert hot == (rid, list(result.tokens))


@settings(max_examples=200, deadline=None)
@given(st.lists(u32, max_size=40), st.integers(0, 2**64 - 1), st.booleans())
def test_plain_mid_stream_results_take_the_hot_path(
    tokens: list[int], rid: int, by_pycapnp: bool
) -> None:
    """What engines send per token (token ids only) is read by ``decode_tokens``."""
    result = TextResult(tokens)
    frame = encode_capnp(rid, result) if by_pycapnp else encode(rid, result)
    assert decode_tokens(frame) == (rid, tokens)


@pytest.mark.parametrize(
    "result",
    [
        TextResult([5], FinishReason.LENGTH),
        TextResult([5], completion_tokens=1),
        TextResult([5], prompt_tokens=3),
        TextResult([5], stop_token_id=2),
        TextResult([5], decode_ns=7),
        TextResult([5], logprobs=[-0.5]),
        TextResult(
            [5], logprobs=[-0.5], top_logprobs=1, top_token_ids=[6], top_token_logprobs=[-1.0]
        ),
    ],
)
@pytest.mark.parametrize("by_pycapnp", [False, True])
def test_anything_more_than_token_ids_goes_to_the_full_reader(
    result: TextResult, by_pycapnp: bool
) -> None:
    frame = encode_capnp(9, result) if by_pycapnp else encode(9, result)
    assert decode_tokens(frame) is None
    rid, msg = decode(frame)
    assert rid == 9 and isinstance(msg, TextResult) and _norm(msg) == _norm(result)


OTHER = [
    TextQuery("m", [1, 2, 3], Sampling(max_tokens=7, seed=5, stop_token_ids=[9], top_k=3)),
    Cancel("client disconnected"),
    EngineError(ErrorCode.OVERLOADED, "busy"),
    Ping(7),
    Pong(8),
    Pong(9, running=3, waiting=2, cache_usage=0.5),  # the engine's load
    Hello("neutrino/0.1.0", 1),
    HelloAck("mock", 1, [ModelInfo("a", 4096, 0), ModelInfo("b", 8192, 512)], 64),
    HelloAck(
        "mock",
        1,
        [ModelInfo("e", 512, 0, (Capability.EMBED, Capability.RERANK), 384)],
        8,
    ),
    TextQuery(
        "vlm",
        [1, 2],
        Sampling(max_tokens=3),
        images=[Image(b"\x89PNG...", "image/png", 640, 480)],
    ),
    EmbedQuery("e", [[1, 2, 3], [4]], dimensions=128, normalize=False, traceparent="tp"),
    TextQuery("m", [1], Sampling(max_tokens=2), guided=Guided(GuidedMode.JSON_OBJECT)),
    TextQuery(
        "m", [1], Sampling(max_tokens=2), guided=Guided(GuidedMode.JSON_SCHEMA, '{"type": "array"}')
    ),
    EmbedResult(2, [0.5, -0.25, 1.0, 0.0], prompt_tokens=4),
    RerankQuery("r", [1, 2], [[3], [4, 5], []]),
    RerankResult([0.5, 0.25, -1.0], prompt_tokens=6),
    AudioQuery("w", AudioTask.TRANSLATE, b"\x00\x01" * 8, 16000, "de", [7], 0.5, 100, "tp"),
    AudioResult("de", 2.5, [AudioSegment(0.0, 1.25, [1, 2]), AudioSegment(1.25, 2.5, [3])], 3),
    SpeechQuery("tts", "hello", "alloy", 24000, 1.5, "tp"),
    SpeechResult(b"\x00\x00" * 10, 24000, final=True),
    DetectQuery("det", Image(b"\xff\xd8jpeg", "image/jpeg", 32, 16), 0.25),
    DetectResult([Box("cat", 0.75, 1.0, 2.0, 30.0, 15.5)]),
]


@pytest.mark.parametrize("msg", OTHER, ids=lambda m: type(m).__name__)
def test_round_trip_every_message(msg: object) -> None:
    assert decode(encode(3, msg)) == (3, msg)  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(st.lists(results(), min_size=1, max_size=8), st.data())
def test_decoder_splits_any_chunking(msgs: list[TextResult], data: st.DataObject) -> None:
    blob = b"".join(encode(i, m) for i, m in enumerate(msgs))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(blob)), max_size=10)))
    dec = FrameDecoder()
    frames: list[bytes] = []
    prev = 0
    for c in [*cuts, len(blob)]:
        frames += dec.feed(blob[prev:c])
        prev = c
    assert [decode(f)[0] for f in frames] == list(range(len(msgs)))
    assert dec.buffered == 0


def test_oversized_frame_is_refused_from_its_header() -> None:
    dec = FrameDecoder()
    words = MAX_FRAME_BYTES // 8 + 1
    header = (0).to_bytes(4, "little") + words.to_bytes(4, "little")
    with pytest.raises(FrameTooLarge):
        dec.feed(header)  # refused before any body byte arrives


def test_garbage_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        decode(b"\x00\x00\x00\x00\x01\x00\x00\x00" + b"\xff" * 8)


def test_capnp_tool_decodes_our_frame() -> None:
    frame = encode(42, TextQuery("qwen2.5-mock", [1, 2, 3], Sampling(max_tokens=16, seed=7)))
    out = capnp_decode(frame)
    assert "requestId = 42" in out
    assert 'model = "qwen2.5-mock"' in out
    assert "maxTokens = 16" in out and "seed = 7" in out and "hasSeed = true" in out
    frame = encode(5, TextResult(tokens=[1], finish_reason=FinishReason.LENGTH))
    out = capnp_decode(frame)
    assert "finishReason = length" in out and "requestId = 5" in out


f32_exact = st.sampled_from([0.0, 0.5, 1.0, 0.25, 1.5, 2.0, -2.0, -0.75])


@st.composite
def queries(draw: st.DrawFn) -> TextQuery:
    return TextQuery(
        model=draw(st.text(max_size=40)),
        prompt_tokens=draw(st.lists(u32, max_size=50)),
        sampling=Sampling(
            max_tokens=draw(u32),
            temperature=draw(f32_exact),
            top_p=draw(f32_exact),
            top_k=draw(st.integers(-1, 1000)),
            min_p=draw(f32_exact),
            seed=draw(st.none() | st.integers(0, 2**64 - 1)),
            stop_token_ids=draw(st.lists(u32, max_size=5)),
            logprobs=draw(st.booleans()),
            top_logprobs=draw(st.integers(0, 20)),
            presence_penalty=draw(f32_exact),
            frequency_penalty=draw(f32_exact),
            repetition_penalty=draw(f32_exact),
            ignore_eos=draw(st.booleans()),
            min_tokens=draw(u32),
        ),
        deadline_ms=draw(u32),
        traceparent=draw(st.text(max_size=60)),
    )


@settings(max_examples=200, deadline=None)
@given(queries(), st.integers(0, 2**64 - 1))
def test_query_writer_is_read_back_by_pycapnp(q: TextQuery, rid: int) -> None:
    """Our hand-laid textQuery frames mean exactly what pycapnp reads."""
    assert decode_slow(encode(rid, q)) == (rid, q)
