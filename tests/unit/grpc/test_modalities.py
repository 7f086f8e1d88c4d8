"""The Embeddings, Audio and Vision servicers against the in-process mock engine, and
their validation next to the HTTP front end's (same limits, same messages)."""

from __future__ import annotations

import asyncio
import io
import math
import struct
from typing import Any

import grpc
import pytest
from PIL import Image as PILImage

from mocks.mock_ie.core import MockEngine, MockModel
from mocks.mock_ie.server import MockServer
from neutrino.audio.wav import encode_wav
from neutrino.config import Config, LimitsConfig
from neutrino.engine.messages import (
    AudioTask,
    Capability,
    EmbedQuery,
    Message,
    ModalQuery,
    RerankQuery,
    SpeechQuery,
)
from neutrino.engines.inprocess import InProcessEngineClient
from neutrino.errors import NeutrinoError
from neutrino.frontends.common import uploaded_audio
from neutrino.frontends.grpc import audio, calls, embeddings, vision
from neutrino.frontends.http.modal import audio as http_audio
from neutrino.frontends.http.modal import embeddings as http_embeddings
from neutrino.pipeline import modal_rules as rules
from neutrino.pipeline.history import History
from neutrino.pipeline.models import ModelTexts
from neutrino.pipeline.orchestrator import Orchestrator
from neutrino.v1 import audio_pb2, embeddings_pb2, vision_pb2
from tests.unit.grpc.test_service import TRACEPARENT, FakeContext, failed

MODELS = [
    MockModel("embed-mock", "qwen2", 512, (Capability.EMBED, Capability.RERANK), 384),
    MockModel("whisper-mock", "qwen2", 448, (Capability.TRANSCRIBE,)),
    MockModel("tts-mock", "qwen2", 4096, (Capability.SPEECH,)),
    MockModel("detect-mock", "qwen2", 1, (Capability.DETECT,)),
]


class EndlessSpeech(MockEngine):
    """Speech that never ends: the first two chunks, never the final one."""

    def answer(self, query: ModalQuery) -> list[Message] | Any:
        got = super().answer(query)
        if isinstance(query, SpeechQuery) and isinstance(got, list):
            return got[:2]
        return got


def make(
    core: type[MockEngine] = MockEngine,
) -> tuple[Config, Orchestrator, InProcessEngineClient]:
    engine = MockServer(core(MODELS, capacity=4)).in_process()
    cfg = Config(limits=LimitsConfig(request_timeout_s=30.0))
    return cfg, Orchestrator(cfg, engine, ModelTexts(cfg.model), History(100)), engine


def png(size: tuple[int, int] = (80, 40)) -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", size).save(buf, "PNG")
    return buf.getvalue()


def wav(seconds: float = 1.0, rate: int = 16000) -> bytes:
    n = int(seconds * rate)
    return encode_wav(struct.pack(f"<{n}h", *(int(3000 * math.sin(i / 9)) for i in range(n))), rate)


def text_inputs(*texts: str) -> list[embeddings_pb2.EmbedInput]:
    return [embeddings_pb2.EmbedInput(text=t) for t in texts]


def message(fn: Any, *args: Any) -> tuple[str, str | None]:
    with pytest.raises(NeutrinoError) as info:
        fn(*args)
    return info.value.message, info.value.param


# ----------------------------------------------------------------------------- parity with HTTP
# Both front ends translate into the jobs of pipeline/modal_rules.py, whose rules exist
# once; these tests hold each protocol's translation to the same messages and params.


@pytest.mark.parametrize(
    ("grpc_input", "http_input"),
    [
        ([], []),
        (text_inputs("a", ""), ["a", ""]),
        ([embeddings_pb2.EmbedInput()], [{}]),
        ([embeddings_pb2.EmbedInput(tokens=embeddings_pb2.TokenIds())], [[]]),
        (text_inputs(*["x"] * 2049), ["x"] * 2049),
    ],
)
def test_embed_input_errors_are_http_errors(grpc_input: Any, http_input: Any) -> None:
    msg = embeddings_pb2.EmbedRequest(model="m", input=grpc_input)
    http = message(http_embeddings.embed_job, {"model": "m", "input": http_input})
    assert message(embeddings.embed_job, msg) == http
    assert http[1] == "input"


def test_embed_inputs_and_dimensions() -> None:
    ids = embeddings_pb2.EmbedInput(tokens=embeddings_pb2.TokenIds(ids=[1, 2]))
    msg = embeddings_pb2.EmbedRequest(model="m", input=[*text_inputs("hi"), ids])
    job = embeddings.embed_job(msg)
    assert (job.inputs, job.dimensions) == (["hi", [1, 2]], None)
    msg = embeddings_pb2.EmbedRequest(model="m", input=text_inputs("hi"), dimensions=8)
    assert embeddings.embed_job(msg).dimensions == 8
    for bad in (0, -3):
        msg = embeddings_pb2.EmbedRequest(model="m", input=text_inputs("hi"), dimensions=bad)
        body = {"model": "m", "input": "hi", "dimensions": bad}
        assert message(embeddings.embed_job, msg) == message(http_embeddings.embed_job, body)
        assert message(embeddings.embed_job, msg) == (
            "dimensions must be a positive integer",
            "dimensions",
        )


def test_rerank_defaults() -> None:
    job, docs_back = embeddings.rerank_job(
        embeddings_pb2.RerankRequest(model="m", query="q", documents=["a", "", "c"])
    )
    assert (job.top_n, docs_back, job.documents) == (3, True, ["a", "", "c"])
    job, docs_back = embeddings.rerank_job(
        embeddings_pb2.RerankRequest(
            model="m", query="q", documents=["a"], top_n=9, return_documents=False
        )
    )
    assert (job.top_n, docs_back) == (9, False)


@pytest.mark.parametrize(
    "changes",
    [{"model": ""}, {"query": ""}, {"documents": []}, {"documents": ["d"] * 1001}, {"top_n": 0}],
)
def test_rerank_errors_are_http_errors(changes: dict[str, Any]) -> None:
    body: dict[str, Any] = {"model": "m", "query": "q", "documents": ["a", "b"]} | changes
    http = message(http_embeddings.rerank_job, body)
    assert message(embeddings.rerank_job, embeddings_pb2.RerankRequest(**body)) == http


@pytest.mark.parametrize(
    ("changes", "param"),
    [
        ({"model": ""}, "model"),
        ({"input": ""}, "input"),
        ({"input": " \n"}, "input"),
        ({"input": "x" * 4097}, "input"),
        ({"voice": ""}, "voice"),
        ({"voice": "v" * 257}, "voice"),
        ({"response_format": "ogg"}, "response_format"),
        ({"response_format": "mp4"}, "response_format"),
        ({"speed": 0.1}, "speed"),
        ({"speed": 4.5}, "speed"),
    ],
)
def test_speech_errors_are_http_errors(changes: dict[str, Any], param: str) -> None:
    body: dict[str, Any] = {"model": "tts", "input": "Hello", "voice": "alloy"} | changes
    names = {"input": "text", "response_format": "format"}  # the proto's names for them
    msg = audio_pb2.SpeechRequest(**{names.get(k, k): v for k, v in body.items()})
    with pytest.raises(NeutrinoError) as http_err:
        http_audio.speech_job(body)
    with pytest.raises(NeutrinoError) as grpc_err:
        audio.speech_job(msg)
    assert http_err.value.kind is grpc_err.value.kind
    assert http_err.value.param == param
    assert grpc_err.value.param == names.get(param, param)
    want = http_err.value.message
    for old, new in names.items():
        want = want.replace(old, new)
    assert grpc_err.value.message == want


def test_speech_defaults() -> None:
    job = audio.speech_job(audio_pb2.SpeechRequest(model="m", text="Hi", voice="v"))
    assert (job.fmt, job.speed) == ("wav", 1.0)


def test_transcription_fields() -> None:
    task = AudioTask
    msg = audio_pb2.TranscriptionRequest(model="m", language="French", temperature=0.5)
    assert audio.transcription_job(msg, task.TRANSCRIBE).language == "fr"
    assert audio.transcription_job(msg, task.TRANSLATE).language == ""  # ignored
    bad = audio_pb2.TranscriptionRequest(model="m", language="not a language")
    assert message(audio.transcription_job, bad, task.TRANSCRIBE)[1] == "language"
    hot = audio_pb2.TranscriptionRequest(model="m", temperature=float("nan"))
    assert message(audio.transcription_job, hot, task.TRANSCRIBE) == (
        "temperature must be between 0 and 1",
        "temperature",
    )
    text, param = message(
        lambda d: asyncio.run(uploaded_audio(d, 0, 60, "audio")), b"fLaC" + bytes(40)
    )
    assert param == "audio" and "could not be decoded" in text


def test_detect_fields() -> None:
    image = vision.image(png((5, 7)))
    assert image.width == 5
    assert rules.detect("m", image, vision.threshold(vision_pb2.DetectRequest())).threshold == 0.0
    for bad in (-0.1, 1.5, float("nan")):
        score = vision.threshold(vision_pb2.DetectRequest(threshold=bad))
        assert message(rules.detect, "m", image, score) == (
            "threshold must be a number between 0 and 1",
            "threshold",
        )
    assert message(vision.image, b"") == ("the image is empty", "image")


def test_deadline_is_the_timeout() -> None:
    cfg = Config(limits=LimitsConfig(request_timeout_s=30.0))
    ctx: Any = FakeContext(remaining=2.5)
    assert calls.timeout_s(ctx, cfg) == 2.5
    assert calls.timeout_s(FakeContext(remaining=1e6), cfg) == 30.0  # type: ignore[arg-type]
    assert calls.timeout_s(FakeContext(remaining=None), cfg) is None  # type: ignore[arg-type]
    assert calls.timeout_s(FakeContext(remaining=-1), cfg) == 0.001  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- the servicers


async def test_embed_and_rerank() -> None:
    _cfg, orch, engine = make()
    svc = embeddings.EmbeddingsService(orch)
    ctx: Any = FakeContext()
    got = await svc.Embed(
        embeddings_pb2.EmbedRequest(model="embed-mock", input=text_inputs("a", "b"), dimensions=8),
        ctx,
    )
    assert got is not None
    assert [len(e.values) for e in got.embeddings] == [8, 8]
    assert got.usage.prompt_tokens == got.usage.total_tokens > 0
    q = engine.queries[-1]
    assert isinstance(q, EmbedQuery) and q.dimensions == 8 and q.traceparent == TRACEPARENT
    ranked = await svc.Rerank(
        embeddings_pb2.RerankRequest(
            model="embed-mock",
            query="the red fox",
            documents=["blue sky", "the red fox", "the red fox jumps"],
            top_n=2,
        ),
        ctx,
    )
    assert ranked is not None
    assert [r.index for r in ranked.results] == [1, 2]
    assert ranked.results[0].document == "the red fox"
    assert isinstance(engine.queries[-1], RerankQuery)
    assert orch.inflight == 0 and not engine.cancels


async def test_detect_transcribe_speak() -> None:
    _cfg, orch, engine = make()
    ctx: Any = FakeContext()
    det = await vision.VisionService(orch).Detect(
        vision_pb2.DetectRequest(model="detect-mock", image=png(), threshold=0.8), ctx
    )
    assert det is not None
    assert (det.image.width, det.image.height) == (80, 40)
    assert [(b.label, b.x0, b.y1) for b in det.boxes] == [("object", 20.0, 30.0)]
    svc = audio.AudioService(orch)
    tr = await svc.Transcribe(
        audio_pb2.TranscriptionRequest(model="whisper-mock", audio=wav(1.0), language="de"), ctx
    )
    assert tr is not None
    assert tr.text == "This is a mock transcript of 1.00 seconds of audio."
    assert (tr.language, tr.duration, tr.seconds) == ("de", 1.0, 1)
    assert tr.segments[0].text == tr.text and tr.usage.completion_tokens > 0
    await svc.Speak(audio_pb2.SpeechRequest(model="tts-mock", text="Hello", voice="v"), ctx)
    chunks = ctx.written
    assert chunks[0].pcm.startswith(b"RIFF") and {c.sample_rate for c in chunks} == {24000}
    assert sum(len(c.pcm) for c in chunks) == 44 + 2 * int(5 * 0.06 * 24000)
    assert orch.inflight == 0 and not engine.cancels


@pytest.mark.parametrize(("remaining", "reason"), [(5.0, "client disconnected"), (0.0, "timeout")])
async def test_cancelled_speak_cancels_the_engine_once(remaining: float, reason: str) -> None:
    _cfg, orch, engine = make(EndlessSpeech)
    ctx = FakeContext(remaining=5.0)
    svc = audio.AudioService(orch)
    req = audio_pb2.SpeechRequest(model="tts-mock", text="Hello there", voice="v", format="pcm")
    task = asyncio.ensure_future(svc.Speak(req, ctx))  # type: ignore[arg-type]
    for _ in range(100):
        await asyncio.sleep(0)
        if ctx.written:
            break
    assert ctx.written and not task.done()
    ctx.remaining = remaining
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [r for _, r in engine.cancels] == [reason]
    assert orch.inflight == 0
    assert orch.history.latest(1)[0]["state"] == "cancelled"


@pytest.mark.parametrize(
    ("call", "code", "param"),
    [
        (
            lambda s, ctx: s["e"].Embed(embeddings_pb2.EmbedRequest(model="embed-mock"), ctx),
            grpc.StatusCode.INVALID_ARGUMENT,
            "input",
        ),
        (
            lambda s, ctx: s["e"].Embed(
                embeddings_pb2.EmbedRequest(model="tts-mock", input=text_inputs("a")),
                ctx,
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "model",
        ),
        (
            lambda s, ctx: s["e"].Rerank(
                embeddings_pb2.RerankRequest(model="nope", query="q", documents=["d"]),
                ctx,
            ),
            grpc.StatusCode.NOT_FOUND,
            "model",
        ),
        (
            lambda s, ctx: s["v"].Detect(
                vision_pb2.DetectRequest(model="detect-mock", image=b"junk"), ctx
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "image",
        ),
        (
            lambda s, ctx: s["a"].Translate(
                audio_pb2.TranscriptionRequest(model="whisper-mock", audio=b"RIFF"), ctx
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "audio",
        ),
        (
            lambda s, ctx: s["a"].Speak(
                audio_pb2.SpeechRequest(model="tts-mock", text="x", voice="v", format="ogg"),
                ctx,
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "format",
        ),
    ],
)
async def test_errors_map_to_statuses(call: Any, code: grpc.StatusCode, param: str) -> None:
    _cfg, orch, engine = make()
    services = {
        "e": embeddings.EmbeddingsService(orch),
        "a": audio.AudioService(orch),
        "v": vision.VisionService(orch),
    }
    got = await failed(lambda ctx: call(services, ctx))
    assert got.code is code
    assert got.metadata["neutrino-error-param"] == param
    assert not engine.queries
