"""mock_ie's modality answers: in-process and through the real process's socket."""

from __future__ import annotations

import asyncio
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mocks.mock_ie.core import MockEngine, MockModel
from mocks.mock_ie.modalities import modal_answer
from mocks.mock_ie.script import Script
from neutrino.engine.messages import (
    AudioQuery,
    AudioResult,
    AudioTask,
    Cancel,
    Capability,
    DetectQuery,
    DetectResult,
    EmbedQuery,
    EmbedResult,
    EngineError,
    ErrorCode,
    Hello,
    HelloAck,
    Image,
    RerankQuery,
    RerankResult,
    SpeechQuery,
    SpeechResult,
)
from neutrino.engine.wire.schema import PROTOCOL_VERSION
from tests.unit.mock_ie.test_process import REPO, Client

MODELS = [
    MockModel("chat", "qwen2", 4096),
    MockModel("emb", "qwen2", 512, (Capability.EMBED, Capability.RERANK), 64),
    MockModel("asr", "qwen2", 448, (Capability.TRANSCRIBE,)),
    MockModel("tts", "qwen2", 4096, (Capability.SPEECH,)),
    MockModel("det", "qwen2", 1, (Capability.DETECT,)),
]


@pytest.fixture(scope="module")
def engine() -> MockEngine:
    script = Script.from_rules([{"match": "MEETING", "reply": "Hello there. See you soon."}])
    return MockEngine(MODELS, script=script)


def test_embeddings_are_seeded_sized_and_normalised(engine: MockEngine) -> None:
    a = modal_answer(engine, EmbedQuery("emb", [[1, 2, 3], [4, 5]]))
    b = modal_answer(engine, EmbedQuery("emb", [[1, 2, 3]]))
    assert isinstance(a, list) and isinstance(b, list)
    ra, rb = a[0], b[0]
    assert isinstance(ra, EmbedResult) and isinstance(rb, EmbedResult)
    assert ra.dimensions == 64 and len(ra.vectors) == 128 and ra.prompt_tokens == 5
    assert ra.rows()[0] == rb.rows()[0]  # same input, same vector
    assert ra.rows()[0] != ra.rows()[1]
    assert all(abs(math.sqrt(sum(v * v for v in row)) - 1) < 1e-5 for row in ra.rows())
    short = modal_answer(engine, EmbedQuery("emb", [[1, 2, 3]], dimensions=16, normalize=False))
    assert isinstance(short, list) and isinstance(short[0], EmbedResult)
    assert short[0].rows()[0] == pytest.approx(ra.rows()[0][:16], rel=0, abs=10)
    too_big = modal_answer(engine, EmbedQuery("emb", [[1]], dimensions=65))
    assert isinstance(too_big, EngineError) and too_big.code is ErrorCode.INVALID_REQUEST


def test_rerank_scores_token_overlap(engine: MockEngine) -> None:
    got = modal_answer(engine, RerankQuery("emb", [1, 2], [[1, 2, 9], [2], [7]]))
    assert isinstance(got, list) and isinstance(got[0], RerankResult)
    assert got[0].scores == [1.0, 0.5, 0.0]


def test_transcription_default_and_scripted(engine: MockEngine) -> None:
    pcm = b"\x00\x00" * 16000 * 2  # two seconds at 16 kHz
    got = modal_answer(engine, AudioQuery("asr", AudioTask.TRANSCRIBE, pcm, 16000))
    assert isinstance(got, list) and isinstance(got[0], AudioResult)
    tok = engine.tokenizer("asr")
    text = "".join(tok.decode(s.tokens) for s in got[0].segments)
    assert text == "This is a mock transcript of 2.00 seconds of audio."
    assert got[0].duration_s == pytest.approx(2.0)
    prompt = tok.encode("MEETING notes")
    got = modal_answer(
        engine, AudioQuery("asr", AudioTask.TRANSLATE, pcm, 16000, prompt_tokens=prompt)
    )
    assert isinstance(got, list) and isinstance(got[0], AudioResult)
    segs = got[0].segments
    assert [tok.decode(s.tokens) for s in segs] == ["Hello there.", " See you soon."]
    assert segs[0].start_s == 0 and segs[-1].end_s == pytest.approx(2.0)


def test_speech_length_follows_the_text(engine: MockEngine) -> None:
    got = modal_answer(engine, SpeechQuery("tts", "hello world", sample_rate=8000))
    assert isinstance(got, list) and all(isinstance(c, SpeechResult) for c in got)
    pcm = b"".join(c.pcm for c in got if isinstance(c, SpeechResult))
    assert len(pcm) == 2 * int(11 * 0.06 * 8000)
    assert got[-1].final and not any(c.final for c in got[:-1])  # type: ignore[union-attr]


def test_detection_reports_the_received_size(engine: MockEngine) -> None:
    img = Image(b"\x89PNG", "image/png", 64, 32)
    got = modal_answer(engine, DetectQuery("det", img))
    assert isinstance(got, list) and isinstance(got[0], DetectResult)
    assert [b.label for b in got[0].boxes] == ["object", "frame 64x32"]
    assert got[0].boxes[0].x1 == 48.0


def test_capabilities_are_enforced(engine: MockEngine) -> None:
    err = modal_answer(engine, EmbedQuery("chat", [[1]]))
    assert isinstance(err, EngineError) and err.code is ErrorCode.UNSUPPORTED
    err = modal_answer(engine, EmbedQuery("nope", [[1]]))
    assert isinstance(err, EngineError) and err.code is ErrorCode.UNKNOWN_MODEL


async def test_process_answers_modalities_and_cancels_speech(tmp_path: Path) -> None:
    sock = tmp_path / "m.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mocks.mock_ie", "--socket", str(sock), "--itl-ms", "50"],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    try:
        deadline = time.monotonic() + 20
        while not sock.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            await asyncio.sleep(0.02)
        c = await Client.connect(sock)
        c.send(0, Hello("t", PROTOCOL_VERSION))
        _, ack = await c.recv()
        assert isinstance(ack, HelloAck)
        caps = {m.name: m.capabilities for m in ack.models}
        assert (
            Capability.EMBED in caps["embed-mock"] and Capability.VISION in caps["qwen2.5-vl-mock"]
        )
        c.send(1, EmbedQuery("embed-mock", [[1, 2]], dimensions=8))
        rid, res = await c.recv()
        assert rid == 1 and isinstance(res, EmbedResult) and res.dimensions == 8
        c.send(2, SpeechQuery("tts-mock", "a long sentence to say " * 20))
        rid, first = await c.recv()
        assert rid == 2 and isinstance(first, SpeechResult) and not first.final
        c.send(2, Cancel("client gone"))
        seen = await c.barrier(7)
        assert all(not (isinstance(m, SpeechResult) and m.final) for _, m in seen)
        await c.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
