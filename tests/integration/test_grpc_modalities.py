"""The gRPC Embeddings, Audio and Vision services with real processes (mock engine and
Neutrino): the same request over HTTP and over gRPC gives the same answer, bad input
is refused as over HTTP before the engine hears of it, and a Speak call that goes away
sends the engine one cancel frame."""

from __future__ import annotations

import asyncio
import io
import json
import math
import uuid
import wave
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from PIL import Image as PILImage

from neutrino.audio.subtitles import language_name
from neutrino.v1 import (
    audio_pb2,
    audio_pb2_grpc,
    embeddings_pb2,
    embeddings_pb2_grpc,
    vision_pb2,
    vision_pb2_grpc,
)
from tests.integration.test_grpc import Stack, engine_config, start_stack
from tests.support.procs import MockIE, NeutrinoProc, free_port, wait_for

EMBED = "embed-mock"
STT = "whisper-mock"
TTS = "tts-mock"
DETECT = "detect-mock"
INVALID = grpc.StatusCode.INVALID_ARGUMENT


def tone(seconds: float, rate: int = 16000, channels: int = 1) -> bytes:
    """A 16-bit WAV file of a 440 Hz tone."""
    n = round(seconds * rate)
    frames = b"".join(
        int(9000 * math.sin(2 * math.pi * 440 * i / rate)).to_bytes(2, "little", signed=True)
        * channels
        for i in range(n)
    )
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(frames)
    return buf.getvalue()


def picture(fmt: str = "PNG", size: tuple[int, int] = (80, 40)) -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", size, (200, 30, 30)).save(buf, fmt)
    return buf.getvalue()


WAV = tone(1.5, channels=2)
PNG = picture()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One engine and one Neutrino (free HTTP and gRPC ports) for the undisturbing tests."""
    work = tmp_path_factory.mktemp("grpc-modal")
    mock = MockIE(work).start()
    address = f"127.0.0.1:{free_port()}"
    server = NeutrinoProc(work, "--grpc-address", address, config=engine_config(mock))
    try:
        server.start()
        yield Stack(mock, server, address)
    finally:
        server.stop()
        mock.stop()


@pytest.fixture
async def channel(shared: Stack) -> AsyncIterator[grpc.aio.Channel]:
    options = [("grpc.max_send_message_length", 64 * 1024 * 1024)]
    async with grpc.aio.insecure_channel(shared.address, options=options) as ch:
        yield ch


# ----------------------------------------------------------------------------- HTTP helpers


def http(
    server: NeutrinoProc, path: str, body: bytes, ctype: str
) -> tuple[int, dict[str, str], bytes]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(server.base_url + path, data=body, headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def http_json(server: NeutrinoProc, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    status, _, raw = http(server, path, json.dumps(body).encode(), "application/json")
    return status, json.loads(raw)


def http_form(
    server: NeutrinoProc, path: str, audio: bytes, **fields: str
) -> tuple[int, dict[str, str], bytes]:
    boundary = uuid.uuid4().hex
    out = bytearray()
    parts = [(k, None, v.encode()) for k, v in fields.items()] + [("file", "a.wav", audio)]
    for name, filename, value in parts:
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out += f"--{boundary}\r\nContent-Disposition: {disp}\r\n\r\n".encode() + value + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return http(server, path, bytes(out), f"multipart/form-data; boundary={boundary}")


def data_uri(data: bytes) -> str:
    import base64

    return "data:image/png;base64," + base64.b64encode(data).decode()


# ----------------------------------------------------------------------------- parity


async def test_embed_matches_http(shared: Stack, channel: grpc.aio.Channel) -> None:
    stub = embeddings_pb2_grpc.EmbeddingsStub(channel)
    inputs: list[Any] = ["The quick brown fox", [101, 2023, 2003], "jumps over the dog"]
    status, want = await asyncio.to_thread(
        http_json,
        shared.server,
        "/v1/embeddings",
        {"model": EMBED, "input": inputs, "dimensions": 64},
    )
    assert status == 200, want
    req = embeddings_pb2.EmbedRequest(
        model=EMBED,
        input=[
            embeddings_pb2.EmbedInput(text=i)
            if isinstance(i, str)
            else embeddings_pb2.EmbedInput(tokens=embeddings_pb2.TokenIds(ids=i))
            for i in inputs
        ],
        dimensions=64,
    )
    got = await stub.Embed(req, timeout=5)
    assert [e.index for e in got.embeddings] == [d["index"] for d in want["data"]]
    assert [list(e.values) for e in got.embeddings] == [d["embedding"] for d in want["data"]]
    assert all(len(e.values) == 64 for e in got.embeddings)
    assert got.model == EMBED and got.id.startswith("embd-") and got.created > 0
    assert got.usage.prompt_tokens == want["usage"]["prompt_tokens"]
    assert got.usage.total_tokens == want["usage"]["total_tokens"]
    assert got.usage.total_time > 0


@pytest.mark.parametrize("return_documents", [True, False])
async def test_rerank_matches_http(
    shared: Stack, channel: grpc.aio.Channel, return_documents: bool
) -> None:
    stub = embeddings_pb2_grpc.EmbeddingsStub(channel)
    docs = ["a fox in the woods", "quick brown fox", "", "the quick brown fox jumps"]
    body = {
        "model": EMBED,
        "query": "quick brown fox",
        "documents": docs,
        "top_n": 3,
        "return_documents": return_documents,
    }
    status, want = await asyncio.to_thread(http_json, shared.server, "/v1/rerank", body)
    assert status == 200, want
    got = await stub.Rerank(embeddings_pb2.RerankRequest(**body), timeout=5)  # type: ignore[arg-type]
    assert [
        {"index": r.index, "relevance_score": r.relevance_score}
        | ({"document": {"text": r.document}} if r.HasField("document") else {})
        for r in got.results
    ] == want["results"]
    assert len(got.results) == 3
    assert got.usage.total_tokens == want["usage"]["total_tokens"] > 0


async def test_detect_matches_http(shared: Stack, channel: grpc.aio.Channel) -> None:
    stub = vision_pb2_grpc.VisionStub(channel)
    for image, threshold in ((PNG, 0.0), (picture("JPEG", (33, 21)), 0.75)):
        body = {"model": DETECT, "image": data_uri(image), "threshold": threshold}
        status, want = await asyncio.to_thread(http_json, shared.server, "/v1/detect", body)
        assert status == 200, want
        got = await stub.Detect(
            vision_pb2.DetectRequest(model=DETECT, image=image, threshold=threshold), timeout=5
        )
        assert {"width": got.image.width, "height": got.image.height} == want["image"]
        assert [
            {"label": b.label, "score": b.score, "box": [b.x0, b.y0, b.x1, b.y1]} for b in got.boxes
        ] == want["data"]
        assert got.boxes and got.model == DETECT and got.id.startswith("det-")


@pytest.mark.parametrize("task", ["transcriptions", "translations"])
async def test_transcription_matches_http(
    shared: Stack, channel: grpc.aio.Channel, task: str
) -> None:
    stub = audio_pb2_grpc.AudioStub(channel)
    fields = {"model": STT, "response_format": "verbose_json", "prompt": "Hello there"}
    if task == "transcriptions":
        fields["language"] = "French"
    status, _, raw = await asyncio.to_thread(
        http_form, shared.server, f"/v1/audio/{task}", WAV, **fields
    )
    assert status == 200, raw
    want = json.loads(raw)
    req = audio_pb2.TranscriptionRequest(
        model=STT, audio=WAV, prompt="Hello there", language=fields.get("language", "")
    )
    rpc = stub.Transcribe if task == "transcriptions" else stub.Translate
    got = await rpc(req, timeout=5)
    assert got.text == want["text"] and got.text
    assert language_name(got.language) == want["language"]
    assert got.duration == want["duration"] == pytest.approx(1.5)
    assert [(s.id, s.start, s.end, s.text, list(s.tokens)) for s in got.segments] == [
        (s["id"], s["start"], s["end"], s["text"], s["tokens"]) for s in want["segments"]
    ]
    assert got.usage.prompt_tokens > 0  # the prompt, tokenized
    assert got.usage.completion_tokens == sum(len(s.tokens) for s in got.segments)
    if task == "transcriptions":
        assert want["usage"] == {"type": "duration", "seconds": got.seconds}


@pytest.mark.parametrize("fmt", ["wav", "pcm", "mp3", "opus", "aac", "flac"])
async def test_speech_matches_http(shared: Stack, channel: grpc.aio.Channel, fmt: str) -> None:
    stub = audio_pb2_grpc.AudioStub(channel)
    text = "Hello from the mock."
    body = {"model": TTS, "input": text, "voice": "alloy", "speed": 1.25, "response_format": fmt}
    status, headers, want = await asyncio.to_thread(
        http, shared.server, "/v1/audio/speech", json.dumps(body).encode(), "application/json"
    )
    assert status == 200, want
    req = audio_pb2.SpeechRequest(model=TTS, text=text, voice="alloy", speed=1.25, format=fmt)
    chunks = [c async for c in stub.Speak(req, timeout=5)]
    assert chunks and all(c.pcm for c in chunks)
    assert b"".join(c.pcm for c in chunks) == want
    assert {c.sample_rate for c in chunks} == {int(headers["X-Sample-Rate"])}
    if fmt == "wav":
        assert chunks[0].pcm[:4] == b"RIFF" and chunks[0].pcm[40:44] == b"\xff\xff\xff\xff"


# ----------------------------------------------------------------------------- bad input


def _embed(**kw: Any) -> embeddings_pb2.EmbedRequest:
    kw.setdefault("model", EMBED)
    kw.setdefault("input", [embeddings_pb2.EmbedInput(text="hello")])
    return embeddings_pb2.EmbedRequest(**kw)


def _rerank(**kw: Any) -> embeddings_pb2.RerankRequest:
    kw.setdefault("model", EMBED)
    kw.setdefault("query", "q")
    kw.setdefault("documents", ["d"])
    return embeddings_pb2.RerankRequest(**kw)


def _speak(**kw: Any) -> audio_pb2.SpeechRequest:
    kw.setdefault("model", TTS)
    kw.setdefault("text", "Hello")
    kw.setdefault("voice", "alloy")
    return audio_pb2.SpeechRequest(**kw)


# (service, method, request, status, the HTTP twin's path and body or None)
BAD: list[tuple[str, str, Any, grpc.StatusCode, tuple[str, Any] | None]] = [
    ("e", "Embed", _embed(input=[]), INVALID, ("/v1/embeddings", {"model": EMBED, "input": []})),
    (
        "e",
        "Embed",
        _embed(input=[embeddings_pb2.EmbedInput(text="a"), embeddings_pb2.EmbedInput(text="")]),
        INVALID,
        ("/v1/embeddings", {"model": EMBED, "input": ["a", ""]}),
    ),
    (
        "e",
        "Embed",
        _embed(dimensions=0),
        INVALID,
        ("/v1/embeddings", {"model": EMBED, "input": "hello", "dimensions": 0}),
    ),
    (
        "e",
        "Embed",
        _embed(dimensions=385),
        INVALID,
        ("/v1/embeddings", {"model": EMBED, "input": "hello", "dimensions": 385}),
    ),
    (
        "e",
        "Embed",
        _embed(input=[embeddings_pb2.EmbedInput(tokens=embeddings_pb2.TokenIds(ids=[10**9]))]),
        INVALID,
        ("/v1/embeddings", {"model": EMBED, "input": [10**9]}),
    ),
    (
        "e",
        "Embed",
        _embed(model="no-such-model"),
        grpc.StatusCode.NOT_FOUND,
        ("/v1/embeddings", {"model": "no-such-model", "input": "hello"}),
    ),
    (
        "e",
        "Rerank",
        _rerank(documents=["d"] * 1001),
        INVALID,
        ("/v1/rerank", {"model": EMBED, "query": "q", "documents": ["d"] * 1001}),
    ),
    ("e", "Rerank", _rerank(query=""), INVALID, ("/v1/rerank", {"model": EMBED, "query": ""})),
    (
        "e",
        "Rerank",
        _rerank(documents=[]),
        INVALID,
        ("/v1/rerank", {"model": EMBED, "query": "q", "documents": []}),
    ),
    (
        "e",
        "Rerank",
        _rerank(top_n=0),
        INVALID,
        ("/v1/rerank", {"model": EMBED, "query": "q", "documents": ["d"], "top_n": 0}),
    ),
    (
        "v",
        "Detect",
        vision_pb2.DetectRequest(model=DETECT, image=b"\x89PNG\r\n\x1a\nbroken"),
        INVALID,
        ("/v1/detect", {"model": DETECT, "image": data_uri(b"\x89PNG\r\n\x1a\nbroken")}),
    ),
    (
        "v",
        "Detect",
        vision_pb2.DetectRequest(model=DETECT, image=picture("GIF")),
        INVALID,
        ("/v1/detect", {"model": DETECT, "image": data_uri(picture("GIF"))}),
    ),
    (
        "v",
        "Detect",
        vision_pb2.DetectRequest(model=DETECT, image=PNG, threshold=1.5),
        INVALID,
        ("/v1/detect", {"model": DETECT, "image": data_uri(PNG), "threshold": 1.5}),
    ),
    (
        "v",
        "Detect",
        vision_pb2.DetectRequest(model=EMBED, image=PNG),
        INVALID,
        ("/v1/detect", {"model": EMBED, "image": data_uri(PNG)}),
    ),
    (
        "a",
        "Transcribe",
        audio_pb2.TranscriptionRequest(model=STT, audio=b"ID3\x04\x00" + bytes(200)),
        INVALID,
        ("form", b"ID3\x04\x00" + bytes(200)),
    ),
    ("a", "Transcribe", audio_pb2.TranscriptionRequest(model=STT), INVALID, ("form", b"")),
    (
        "a",
        "Translate",
        audio_pb2.TranscriptionRequest(model=STT, audio=WAV[:60]),
        INVALID,
        ("form", WAV[:60]),
    ),
    (
        "a",
        "Transcribe",
        audio_pb2.TranscriptionRequest(model=STT, audio=WAV, temperature=1.5),
        INVALID,
        None,
    ),
    ("a", "Speak", _speak(text="  "), INVALID, None),
    ("a", "Speak", _speak(voice=""), INVALID, None),
    ("a", "Speak", _speak(speed=5.0), INVALID, None),
    ("a", "Speak", _speak(format="ogg"), INVALID, None),
    ("a", "Speak", _speak(model="no-such-model"), grpc.StatusCode.NOT_FOUND, None),
]


def _stub(channel: grpc.aio.Channel, service: str) -> Any:
    if service == "e":
        return embeddings_pb2_grpc.EmbeddingsStub(channel)
    if service == "a":
        return audio_pb2_grpc.AudioStub(channel)
    return vision_pb2_grpc.VisionStub(channel)


async def _status(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        if isinstance(call, grpc.aio.UnaryStreamCall):
            async for _ in call:
                pass
        else:
            await call
    return info.value


@pytest.mark.parametrize(
    ("service", "method", "request_", "code", "twin"),
    BAD,
    ids=[f"{m}-{i}" for i, (_, m, *_) in enumerate(BAD)],
)
async def test_bad_input_is_refused_before_the_engine(
    shared: Stack,
    channel: grpc.aio.Channel,
    service: str,
    method: str,
    request_: Any,
    code: grpc.StatusCode,
    twin: tuple[str, Any] | None,
) -> None:
    before = len(shared.mock.events("query"))
    err = await _status(getattr(_stub(channel, service), method)(request_, timeout=5))
    assert err.code() == code, err.details()
    trailing = dict(err.trailing_metadata() or ())
    if twin is not None:  # the HTTP twin says the same
        path, body = twin
        if path == "form":
            task = "translations" if method == "Translate" else "transcriptions"
            status, _, raw = await asyncio.to_thread(
                http_form, shared.server, f"/v1/audio/{task}", body, model=STT
            )
            want = json.loads(raw)
        else:
            status, want = await asyncio.to_thread(http_json, shared.server, path, body)
        assert status in (400, 404), want
        assert err.details() == want["error"]["message"]
        assert trailing.get("neutrino-error-code") == want["error"]["code"]
    await asyncio.sleep(0.05)
    assert len(shared.mock.events("query")) == before


async def test_messages_over_the_limits(shared: Stack, channel: grpc.aio.Channel) -> None:
    before = len(shared.mock.events("query"))
    audio = audio_pb2_grpc.AudioStub(channel)
    huge = audio_pb2.TranscriptionRequest(model=STT, audio=bytes(27 * 1024 * 1024))
    err = await _status(audio.Transcribe(huge, timeout=10))
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    big = vision_pb2.DetectRequest(model=DETECT, image=PNG + bytes(21 * 1024 * 1024))
    err = await _status(vision_pb2_grpc.VisionStub(channel).Detect(big, timeout=10))
    assert err.code() == INVALID and "at most 20971520 bytes" in (err.details() or "")
    assert len(shared.mock.events("query")) == before
    ok = await audio.Transcribe(audio_pb2.TranscriptionRequest(model=STT, audio=WAV), timeout=5)
    assert ok.text  # the server is fine after them


# ----------------------------------------------------------------------------- discovery


async def test_reflection_and_health_know_the_services(
    shared: Stack, channel: grpc.aio.Channel
) -> None:
    names = ("neutrino.v1.Embeddings", "neutrino.v1.Audio", "neutrino.v1.Vision")
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    requests = [reflection_pb2.ServerReflectionRequest(list_services="")] + [
        reflection_pb2.ServerReflectionRequest(file_containing_symbol=n) for n in names
    ]
    answers = [a async for a in stub.ServerReflectionInfo(iter(requests), timeout=5)]
    listed = {s.name for s in answers[0].list_services_response.service}
    assert set(names) | {"neutrino.v1.Inference"} <= listed
    assert all(a.file_descriptor_response.file_descriptor_proto for a in answers[1:])
    health = health_pb2_grpc.HealthStub(channel)
    for name in names:
        resp = await health.Check(health_pb2.HealthCheckRequest(service=name), timeout=2)
        assert resp.status == health_pb2.HealthCheckResponse.SERVING


# ----------------------------------------------------------------------------- cancel


LONG_TEXT = "A long sentence for the mock to say slowly. " * 5  # ~13 s: ~54 chunks


async def test_cancelled_speak_sends_one_cancel(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    s = start_stack(mock_factory, neutrino_factory, "--itl-ms", "50")
    async with grpc.aio.insecure_channel(s.address) as ch:
        call = audio_pb2_grpc.AudioStub(ch).Speak(_speak(text=LONG_TEXT, format="pcm"), timeout=10)
        got = 0
        async for chunk in call:
            assert chunk.pcm
            got += 1
            if got == 3:
                break
        call.cancel()  # the client goes away mid-stream
    await asyncio.to_thread(s.mock.wait_event, "cancel", 1)
    await asyncio.sleep(0.3)  # would a second cancel arrive?
    cancels = s.mock.events("cancel")
    queries = s.mock.events("query")
    assert len(cancels) == 1 and len(queries) == 1
    assert cancels[0]["request_id"] == queries[0]["request_id"]
    assert cancels[0]["reason"] == "client disconnected"
    assert await asyncio.to_thread(wait_for, lambda: s.server.history(1)[0]["state"] == "cancelled")


async def test_speak_deadline_cancels_the_engine_request(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    s = start_stack(mock_factory, neutrino_factory, "--itl-ms", "50")
    async with grpc.aio.insecure_channel(s.address) as ch:
        stub = audio_pb2_grpc.AudioStub(ch)
        assert [c async for c in stub.Speak(_speak(text="Hi"), timeout=5)]  # warm: tokenizer
        call = stub.Speak(_speak(text=LONG_TEXT), timeout=0.4)
        got = 0
        with pytest.raises(grpc.aio.AioRpcError) as info:
            async for _ in call:
                got += 1
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert got >= 2  # it was streaming when the deadline passed
    await asyncio.to_thread(s.mock.wait_event, "cancel", 1)
    await asyncio.sleep(0.3)  # would a second cancel arrive?
    cancels = s.mock.events("cancel")
    queries = s.mock.events("query")
    assert len(cancels) == 1 and len(queries) == 2
    assert cancels[0]["request_id"] == queries[1]["request_id"]
    assert cancels[0]["reason"] == "timeout"
    assert await asyncio.to_thread(
        wait_for, lambda: s.server.history(1)[0]["state"] in ("failed", "cancelled")
    )
