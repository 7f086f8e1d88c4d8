"""/v1/audio/{transcriptions,translations,speech} with the official openai SDK, against real
processes (mock_ie and Neutrino)."""

from __future__ import annotations

import asyncio
import io
import json
import math
import struct
import time
import urllib.error
import urllib.request
import uuid
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import aiohttp
import openai
import pytest

from tests.support.openapi import validate
from tests.support.procs import MockIE, NeutrinoProc

STT = "whisper-mock"
TTS = "tts-mock"
SPEECH_RATE = 24000  # the mock's output rate
SECONDS_PER_CHAR = 0.06  # the mock's speech length per character


def tone(seconds: float, *, rate: int = 16000, channels: int = 1, width: int = 2) -> bytes:
    """A WAV file of a sine tone, written with the standard library."""
    n = round(seconds * rate)
    full = (1 << (8 * width - 1)) - 1
    samples = [int(0.3 * full * math.sin(2 * math.pi * 440 * i / rate)) for i in range(n)]
    if width == 1:
        frames = bytes((s + 128) & 0xFF for s in samples for _ in range(channels))
    else:
        frames = b"".join(
            (s & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
            for s in samples
            for _ in range(channels)
        )
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(frames)
    return buf.getvalue()


WAV = tone(1.5)


@pytest.fixture(scope="module")
def client(stack: tuple[MockIE, NeutrinoProc]) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack[1].base_url + "/v1", api_key="x", max_retries=0)


def multipart(fields: list[tuple[str, str | None, bytes]]) -> tuple[bytes, str]:
    """A multipart/form-data body of (name, filename or None, value) parts."""
    boundary = uuid.uuid4().hex
    out = bytearray()
    for name, filename, value in fields:
        disp = f'form-data; name="{name}"'
        if filename is not None:
            disp += f'; filename="{filename}"'
        out += f"--{boundary}\r\nContent-Disposition: {disp}\r\n".encode()
        if filename is not None:
            out += b"Content-Type: application/octet-stream\r\n"
        out += b"\r\n" + value + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out), f"multipart/form-data; boundary={boundary}"


def post(
    server: NeutrinoProc, path: str, body: bytes, content_type: str
) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(
        server.base_url + path, data=body, headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def post_form(
    server: NeutrinoProc, path: str, fields: list[tuple[str, str | None, bytes]]
) -> tuple[int, dict[str, str], bytes]:
    body, ctype = multipart(fields)
    return post(server, path, body, ctype)


def form(**fields: str) -> list[tuple[str, str | None, bytes]]:
    return [(k, None, v.encode()) for k, v in fields.items()]


# ----------------------------------------------------------------------------- transcription


def test_transcription_json(client: openai.OpenAI) -> None:
    raw = client.audio.transcriptions.with_raw_response.create(model=STT, file=("a.wav", WAV))
    assert raw.headers["content-type"].startswith("application/json")
    body = json.loads(raw.content)
    validate(body, "CreateTranscriptionResponseJson")
    assert body["text"] == "This is a mock transcript of 1.50 seconds of audio."
    assert body["usage"] == {"type": "duration", "seconds": 2}
    r = client.audio.transcriptions.create(model=STT, file=("a.wav", WAV), response_format="json")
    assert r.text == body["text"]


def test_transcription_verbose_json(client: openai.OpenAI) -> None:
    raw = client.audio.transcriptions.with_raw_response.create(
        model=STT, file=("a.wav", WAV), response_format="verbose_json", language="fr"
    )
    body = json.loads(raw.content)
    validate(body, "CreateTranscriptionResponseVerboseJson")
    assert body["task"] == "transcribe"
    assert body["language"] == "french"  # the mock echoes the requested language
    assert body["duration"] == pytest.approx(1.5)
    assert body["text"] == "This is a mock transcript of 1.50 seconds of audio."
    (seg,) = body["segments"]
    assert seg["start"] == 0.0 and seg["end"] == pytest.approx(1.5)
    assert seg["text"] == body["text"] and seg["tokens"]
    r = client.audio.transcriptions.create(
        model=STT, file=("a.wav", WAV), response_format="verbose_json"
    )
    assert r.language == "english" and r.segments is not None and len(r.segments) == 1


def test_transcription_text_srt_vtt(client: openai.OpenAI) -> None:
    text = client.audio.transcriptions.create(
        model=STT, file=("a.wav", WAV), response_format="text"
    )
    assert text == "This is a mock transcript of 1.50 seconds of audio.\n"
    srt = client.audio.transcriptions.create(model=STT, file=("a.wav", WAV), response_format="srt")
    assert srt == (
        "1\n00:00:00,000 --> 00:00:01,500\nThis is a mock transcript of 1.50 seconds of audio.\n"
    )
    vtt = client.audio.transcriptions.create(model=STT, file=("a.wav", WAV), response_format="vtt")
    assert vtt == (
        "WEBVTT\n\n00:00:00.000 --> 00:00:01.500\n"
        "This is a mock transcript of 1.50 seconds of audio.\n"
    )
    formats: list[tuple[Literal["text", "srt", "vtt"], str]] = [
        ("text", "text/plain"),
        ("srt", "text/plain"),
        ("vtt", "text/vtt"),
    ]
    for fmt, ctype in formats:
        raw = client.audio.transcriptions.with_raw_response.create(
            model=STT, file=("a.wav", WAV), response_format=fmt
        )
        assert raw.headers["content-type"].startswith(ctype), fmt


@pytest.mark.parametrize(
    ("width", "channels", "rate", "seconds"),
    [(1, 1, 8000, 0.5), (2, 2, 44100, 2.0), (3, 2, 48000, 1.25), (4, 6, 96000, 0.75)],
)
def test_transcription_of_other_wav_formats(
    client: openai.OpenAI, width: int, channels: int, rate: int, seconds: float
) -> None:
    wav = tone(seconds, rate=rate, channels=channels, width=width)
    r = client.audio.transcriptions.create(model=STT, file=("b.wav", wav))
    assert r.text == f"This is a mock transcript of {seconds:.2f} seconds of audio."


@pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning")  # the SDK's translations
def test_translation(client: openai.OpenAI) -> None:
    raw = client.audio.translations.with_raw_response.create(model=STT, file=("a.wav", WAV))
    body = json.loads(raw.content)
    validate(body, "CreateTranslationResponseJson")
    assert body["text"] == "Translated: This is a mock transcript of 1.50 seconds of audio."
    verbose = client.audio.translations.with_raw_response.create(
        model=STT, file=("a.wav", WAV), response_format="verbose_json"
    )
    body = json.loads(verbose.content)
    validate(body, "CreateTranslationResponseVerboseJson")
    assert body["task"] == "translate" and body["language"] == "english"
    srt = client.audio.translations.create(model=STT, file=("a.wav", WAV), response_format="srt")
    assert "Translated: This is" in srt and srt.startswith("1\n00:00:00,000 --> ")


def test_scripted_transcript_follows_the_prompt(
    tmp_path: Path,
    mock_factory: Callable[..., MockIE],
    neutrino_factory: Callable[..., NeutrinoProc],
) -> None:
    script = tmp_path / "script.json"
    reply = "Welcome to Zorblax Industries. The widget ships today? Yes it does."
    script.write_text(json.dumps({"rules": [{"match": "Zorblax glossary", "reply": reply}]}))
    mock = mock_factory("--script", str(script), name="scripted")
    server = neutrino_factory("--engine", mock.socket)
    c = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    prompt = "Zorblax glossary: widget, gizmo."
    r = c.audio.transcriptions.create(model=STT, file=("a.wav", WAV), prompt=prompt)
    assert r.text == reply
    verbose = json.loads(
        c.audio.transcriptions.with_raw_response.create(
            model=STT, file=("a.wav", WAV), prompt=prompt, response_format="verbose_json"
        ).content
    )
    validate(verbose, "CreateTranscriptionResponseVerboseJson")
    texts = [s["text"] for s in verbose["segments"]]
    assert texts == ["Welcome to Zorblax Industries.", " The widget ships today?", " Yes it does."]
    bounds = [t for s in verbose["segments"] for t in (s["start"], s["end"])]
    assert bounds == pytest.approx([0.0, 0.5, 0.5, 1.0, 1.0, 1.5])
    srt = c.audio.transcriptions.create(
        model=STT, file=("a.wav", WAV), prompt=prompt, response_format="srt"
    )
    assert srt == (
        "1\n00:00:00,000 --> 00:00:00,500\nWelcome to Zorblax Industries.\n\n"
        "2\n00:00:00,500 --> 00:00:01,000\nThe widget ships today?\n\n"
        "3\n00:00:01,000 --> 00:00:01,500\nYes it does.\n"
    )
    # Without the prompt the rule does not match: the default transcript.
    plain = c.audio.transcriptions.create(model=STT, file=("a.wav", WAV), prompt="other words")
    assert plain.text.startswith("This is a mock transcript")
    queries = mock.events("query")
    assert len(queries) == 4 and all(q["kind"] == "AudioQuery" for q in queries)


# ----------------------------------------------------------------------------- speech


def test_speech_wav(client: openai.OpenAI) -> None:
    raw = client.audio.speech.with_raw_response.create(
        model=TTS, voice="alloy", input="hello world", response_format="wav"
    )
    assert raw.headers["content-type"] == "audio/wav"
    body = raw.content
    with wave.open(io.BytesIO(body)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, SPEECH_RATE)
        frames = w.readframes(1 << 30)  # a streamed header declares an unknown length
    samples = len(frames) // 2
    assert samples == int(11 * SECONDS_PER_CHAR * SPEECH_RATE)
    assert samples / SPEECH_RATE == pytest.approx(11 * SECONDS_PER_CHAR, abs=1 / SPEECH_RATE)
    assert len(body) == 44 + len(frames)
    assert struct.unpack_from("<I", body, 40)[0] == 0xFFFFFFFF
    assert any(frames)  # not silence


def test_speech_pcm_exact_length(client: openai.OpenAI) -> None:
    raw = client.audio.speech.with_raw_response.create(
        model=TTS, voice="alloy", input="hello world", response_format="pcm"
    )
    assert raw.headers["content-type"] == "audio/pcm"
    pcm = raw.content
    assert len(pcm) == 2 * int(11 * SECONDS_PER_CHAR * SPEECH_RATE)
    wav = client.audio.speech.create(
        model=TTS, voice="alloy", input="hello world", response_format="wav"
    )
    assert wav.content[44:] == pcm  # the same samples, behind a header
    fast = client.audio.speech.create(
        model=TTS, voice={"id": "custom-1"}, input="hello world", response_format="pcm", speed=2.0
    )
    assert len(fast.content) == 2 * int(11 * SECONDS_PER_CHAR / 2.0 * SPEECH_RATE)


def test_speech_streams_and_a_client_that_leaves_cancels_once(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    mock = mock_factory("--itl-ms", "50", name="slow")
    server = neutrino_factory("--engine", mock.socket)
    chunk_bytes = 2 * int(0.25 * SPEECH_RATE)

    async def go() -> tuple[int, float]:
        async with aiohttp.ClientSession() as s:
            t0 = time.monotonic()
            resp = await s.post(
                server.base_url + "/v1/audio/speech",
                json={"model": TTS, "voice": "alloy", "input": "x" * 1500},
            )
            assert resp.status == 200 and resp.headers["Content-Type"] == "audio/wav"
            got = b""
            while len(got) < 44 + 3 * chunk_bytes:
                part = await resp.content.read(65536)
                assert part, "the stream ended early"
                got += part
            elapsed = time.monotonic() - t0
            assert got[:4] == b"RIFF"
            resp.close()  # leave mid-stream
            return len(got), elapsed

    n, elapsed = asyncio.run(go())
    assert n < 44 + 20 * chunk_bytes
    assert elapsed < 8  # all 360 chunks would take 18 s at 50 ms apart
    cancels = mock.wait_event("cancel", timeout=10)
    assert len(cancels) == 1
    time.sleep(0.5)
    assert len(mock.events("cancel")) == 1
    finishes = mock.events("finish")
    assert [f["finish_reason"] for f in finishes] == ["cancelled"]
    for _ in range(100):
        states = [h["state"] for h in server.history()]
        if states:
            break
        time.sleep(0.05)
    assert states == ["cancelled"]


def test_speech_cut_short_by_the_engine_ends_the_body_incomplete(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    """Audio cannot carry an error: a stream that fails midway is cut off before the end
    of its chunked body, so the client sees an incomplete response, not a short file."""
    mock = mock_factory("--itl-ms", "50", name="dying")
    server = neutrino_factory("--engine", mock.socket)

    async def go() -> int:
        async with aiohttp.ClientSession() as s:
            resp = await s.post(
                server.base_url + "/v1/audio/speech",
                json={"model": TTS, "voice": "alloy", "input": "x" * 300, "response_format": "pcm"},
            )
            assert resp.status == 200 and resp.headers["Content-Type"] == "audio/pcm"
            got = await resp.content.read(1000)
            assert got
            await asyncio.to_thread(mock.kill)
            with pytest.raises(aiohttp.ClientPayloadError):
                while await resp.content.read(65536):
                    pass
            return len(got)

    assert asyncio.run(go()) > 0
    for _ in range(100):
        states = [h["state"] for h in server.history()]
        if states:
            break
        time.sleep(0.05)
    assert states == ["failed"]


# ----------------------------------------------------------------------------- bad input

FLAC = b"fLaC\x00\x00\x00\x22" + bytes(64)
TRUNCATED = WAV[: len(WAV) // 2]
EMPTY_WAV = tone(0.0)
RAW_PCM = WAV[44:]

TRANSCRIBE_CASES: list[tuple[str, list[tuple[str, str | None, bytes]], int, str | None, str]] = [
    ("no file", form(model=STT), 400, "file", "file is required"),
    ("no model", [("file", "a.wav", WAV)], 400, "model", "model is required"),
    ("not audio", [*form(model=STT), ("file", "a.wav", b"hello")], 400, "file", "could not be"),
    ("flac", [*form(model=STT), ("file", "a.flac", FLAC)], 400, "file", "could not be decoded"),
    ("raw pcm", [*form(model=STT), ("file", "a.pcm", RAW_PCM)], 400, "file", "could not be"),
    ("truncated", [*form(model=STT), ("file", "a.wav", TRUNCATED)], 400, "file", "truncated"),
    ("no samples", [*form(model=STT), ("file", "a.wav", EMPTY_WAV)], 400, "file", "no audio"),
    ("empty file", [*form(model=STT), ("file", "a.wav", b"")], 400, "file", "empty"),
    (
        "bad response_format",
        [*form(model=STT, response_format="xml"), ("file", "a.wav", WAV)],
        400,
        "response_format",
        "json, text, srt, verbose_json, vtt",
    ),
    (
        "diarized_json",
        [*form(model=STT, response_format="diarized_json"), ("file", "a.wav", WAV)],
        400,
        "response_format",
        "not supported",
    ),
    (
        "temperature",
        [*form(model=STT, temperature="1.5"), ("file", "a.wav", WAV)],
        400,
        "temperature",
        "between 0 and 1",
    ),
    (
        "temperature nan",
        [*form(model=STT, temperature="nan"), ("file", "a.wav", WAV)],
        400,
        "temperature",
        "between 0 and 1",
    ),
    (
        "language",
        [*form(model=STT, language="klingon!"), ("file", "a.wav", WAV)],
        400,
        "language",
        "ISO-639-1",
    ),
    (
        "word timestamps",
        [*form(model=STT), ("timestamp_granularities[]", None, b"word"), ("file", "a", WAV)],
        400,
        "timestamp_granularities",
        "word",
    ),
    (
        "two files",
        [*form(model=STT), ("file", "a.wav", WAV), ("file", "b.wav", WAV)],
        400,
        "file",
        "one file",
    ),
    ("unknown model", [*form(model="nope"), ("file", "a.wav", WAV)], 404, "model", "nope"),
    (
        "chat model",
        [*form(model="qwen2.5-mock"), ("file", "a.wav", WAV)],
        400,
        "model",
        "transcribe",
    ),
    ("tts model", [*form(model=TTS), ("file", "a.wav", WAV)], 400, "model", "transcribe"),
]


_TRANSCRIBE_PARAMS = [
    pytest.param(path, *case, id=f"{path.rsplit('/', 1)[1]}-{case[0]}")
    for path in ("/v1/audio/transcriptions", "/v1/audio/translations")
    for case in TRANSCRIBE_CASES
    if not (path.endswith("translations") and case[0] == "language")  # no language there
]


@pytest.mark.parametrize(("path", "name", "fields", "status", "param", "words"), _TRANSCRIBE_PARAMS)
def test_bad_transcription_input(
    stack: tuple[MockIE, NeutrinoProc],
    path: str,
    name: str,
    fields: list[tuple[str, str | None, bytes]],
    status: int,
    param: str | None,
    words: str,
) -> None:
    mock, server = stack
    before = len(mock.events("query"))
    got, headers, raw = post_form(server, path, fields)
    err = json.loads(raw)
    assert got == status, err
    assert headers["Content-Type"].startswith("application/json")
    validate(err, "ErrorResponse")
    assert err["error"]["param"] == param
    assert words in err["error"]["message"], err
    assert len(mock.events("query")) == before


def test_transcription_needs_multipart(stack: tuple[MockIE, NeutrinoProc]) -> None:
    mock, server = stack
    before = len(mock.events("query"))
    status, _, raw = post(
        server, "/v1/audio/transcriptions", json.dumps({"model": STT}).encode(), "application/json"
    )
    assert status == 400 and "multipart/form-data" in json.loads(raw)["error"]["message"]
    status, _, raw = post(
        server,
        "/v1/audio/transcriptions",
        b"--nope\r\ngarbage",
        "multipart/form-data; boundary=zzz",
    )
    assert status == 400, raw
    validate(json.loads(raw), "ErrorResponse")
    assert len(mock.events("query")) == before


def test_sdk_raises_bad_request(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as exc:
        client.audio.transcriptions.create(model=STT, file=("a.mp3", b"ID3\x04" + bytes(100)))
    assert "could not be decoded" in str(exc.value) and "mp3" in str(exc.value)


def speech(**over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": TTS, "input": "hello", "voice": "alloy"}
    body.update(over)
    return {k: v for k, v in body.items() if v is not None}


SPEECH_CASES: list[tuple[str, dict[str, Any], int, str | None, str]] = [
    ("empty input", speech(input=""), 400, "input", "empty"),
    ("blank input", speech(input="   "), 400, "input", "empty"),
    ("no input", speech(input=None), 400, "input", "required"),
    ("long input", speech(input="x" * 4097), 400, "input", "4096"),
    ("no voice", speech(voice=None), 400, "voice", "voice"),
    ("number voice", speech(voice=5), 400, "voice", "voice"),
    ("empty voice", speech(voice=""), 400, "voice", "voice"),
    ("xyz", speech(response_format="xyz"), 400, "response_format", "must be one of"),
    ("fast", speech(speed=4.5), 400, "speed", "0.25"),
    ("slow", speech(speed=0.1), 400, "speed", "0.25"),
    ("speed text", speech(speed="fast"), 400, "speed", "number"),
    ("sse", speech(stream_format="sse"), 400, "stream_format", "sse"),
    ("no model", speech(model=None), 400, "model", "model"),
    ("unknown model", speech(model="nope"), 404, "model", "nope"),
    ("stt model", speech(model=STT), 400, "model", "speech"),
    ("chat model", speech(model="qwen2.5-mock"), 400, "model", "speech"),
]


@pytest.mark.parametrize(
    ("name", "body", "status", "param", "words"), SPEECH_CASES, ids=[c[0] for c in SPEECH_CASES]
)
def test_bad_speech_input(
    stack: tuple[MockIE, NeutrinoProc],
    name: str,
    body: dict[str, Any],
    status: int,
    param: str | None,
    words: str,
) -> None:
    mock, server = stack
    before = len(mock.events("query"))
    got, headers, raw = post(
        server, "/v1/audio/speech", json.dumps(body).encode(), "application/json"
    )
    err = json.loads(raw)
    assert got == status, err
    assert headers["Content-Type"].startswith("application/json")
    validate(err, "ErrorResponse")
    assert err["error"]["param"] == param
    assert words in err["error"]["message"], err
    assert len(mock.events("query")) == before


def test_method_not_allowed(stack: tuple[MockIE, NeutrinoProc]) -> None:
    for path in ("/v1/audio/transcriptions", "/v1/audio/translations", "/v1/audio/speech"):
        try:
            urllib.request.urlopen(stack[1].base_url + path, timeout=10)
        except urllib.error.HTTPError as e:
            assert e.code == 405, path
        else:
            raise AssertionError(f"GET {path} succeeded")


def test_body_limit(
    stack: tuple[MockIE, NeutrinoProc], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    mock, _ = stack
    server = neutrino_factory(
        config=f'[[engines]]\nsocket = "{mock.socket}"\n[limits]\nmax_upload_bytes = 65536\n'
    )
    before = len(mock.events("query"))
    status, _, raw = post_form(
        server, "/v1/audio/transcriptions", [*form(model=STT), ("file", "a.wav", tone(3.0))]
    )
    assert status == 413, raw
    validate(json.loads(raw), "ErrorResponse")
    ok, _, raw = post_form(
        server, "/v1/audio/transcriptions", [*form(model=STT), ("file", "a.wav", tone(1.0))]
    )
    assert ok == 200 and json.loads(raw)["text"].startswith("This is a mock transcript of 1.00")
    assert len(mock.events("query")) == before + 1


@pytest.mark.parametrize(
    ("name", "parts", "param", "words"),
    [
        # 100,000 one-byte fields before a file took 8.5 s on the event loop before.
        ("many unknown", [("a", None, b"x")] * 60_000, "a", "unknown form field 'a'"),
        ("misspelt", [("modle", None, STT.encode())], "modle", "unknown form field"),
        (
            "too many parts",
            [("timestamp_granularities[]", None, b"segment")] * 40,
            None,
            "more than 32 parts",
        ),
        ("long field", [("prompt", None, b"p" * 70_000)], "prompt", "longer than 65536"),
        ("nameless", [("", None, b"x")], None, "needs a name"),
    ],
)
def test_forms_are_bounded_and_unknown_fields_refused_before_the_file(
    stack: tuple[MockIE, NeutrinoProc],
    name: str,
    parts: list[tuple[str, str | None, bytes]],
    param: str | None,
    words: str,
) -> None:
    mock, server = stack
    before = len(mock.events("query"))
    fields = [*parts, *form(model=STT), ("file", "a.wav", tone(10.0))]
    status, _headers, raw = post_form(server, "/v1/audio/transcriptions", fields)
    err = json.loads(raw)
    assert status == 400, err
    validate(err, "ErrorResponse")
    assert words in err["error"]["message"] and err["error"]["param"] == param
    assert len(mock.events("query")) == before


@pytest.mark.parametrize(
    ("name", "body"),
    [
        # aiohttp read the lines before the first boundary one at a time, with no limit.
        ("a million lines before the form", b"\r\n" * 1_000_000),
        (
            "a part head line of 10 KB",
            b'--B\r\nContent-Disposition: form-data; name="model"; x="'
            + b"y" * 10_000
            + b'"\r\n\r\nwhisper-mock\r\n--B--\r\n',
        ),
        (
            "a part head of 200 lines",
            b"--B\r\n"
            + b"X-A: b\r\n" * 200
            + b'Content-Disposition: form-data; name="model"\r\n\r\nwhisper-mock\r\n--B--\r\n',
        ),
    ],
)
def test_forms_broken_before_their_fields_are_a_400(
    stack: tuple[MockIE, NeutrinoProc], name: str, body: bytes
) -> None:
    mock, server = stack
    before = len(mock.events("query"))
    status, _, raw = post(
        server, "/v1/audio/transcriptions", body, "multipart/form-data; boundary=B"
    )
    assert status == 400, raw[:300]
    validate(json.loads(raw), "ErrorResponse")
    assert len(mock.events("query")) == before
    assert "Traceback" not in server.log_path.read_text()
