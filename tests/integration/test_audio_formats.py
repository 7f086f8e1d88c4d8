"""Audio in the formats OpenAI's API takes and gives, through the official openai SDK
against real Neutrino and mock_ie processes.

The same two seconds of speech-like sound (a voiced tone with its harmonics under a
syllable-rate envelope), encoded here with PyAV as flac, mp3, m4a (AAC), ogg (Opus), webm
(Opus) and wav, are transcribed; mock_ie's event log holds the samples each gave the
engine, at the 16 kHz its whisper model declares. The lossless ones give the same samples
to the last bit; the lossy ones the same sound within their codec's loss (a correlation
of 0.97 or more with the lossless samples, at the best alignment within 50 ms, and the
same length within 2 %). Speech comes back in every format OpenAI offers and decodes to
the mock's voice, at its rate.
"""

from __future__ import annotations

import base64
import io
import math
from array import array
from collections.abc import Callable, Iterator
from typing import Any

import av
import openai
import pytest

from neutrino.audio.wav import read_wav
from tests.support.procs import MockIE, NeutrinoProc, serving

STT, TTS = "whisper-mock", "tts-mock"
RATE = 24000  # the source's rate (not the engine's: it is resampled)
ENGINE_RATE = 16000


def speech_like(seconds: float = 2.0, rate: int = RATE) -> bytes:
    """16-bit mono: a 140 Hz voice with four harmonics, its loudness rising and falling
    four times a second, as syllables do."""
    out = array("h")
    for i in range(int(seconds * rate)):
        t = i / rate
        envelope = 0.55 + 0.45 * math.sin(2 * math.pi * 4 * t)
        voice = sum(math.sin(2 * math.pi * 140 * k * t) / k for k in range(1, 5))
        out.append(int(6000 * envelope * voice))
    return out.tobytes()


def encode(pcm: bytes, container: str, codec: str, rate: int = RATE) -> bytes:
    """``pcm`` as a file of ``container`` with ``codec`` (PyAV, as a client's tool would)."""
    buf = io.BytesIO()
    with av.open(buf, "w", format=container) as out:
        stream: Any = out.add_stream(
            codec, rate=48000 if codec == "libopus" else rate, layout="mono"
        )
        resampler = av.AudioResampler(
            format=stream.codec_context.format.name,
            layout="mono",
            rate=stream.codec_context.sample_rate,
        )
        frame = av.AudioFrame(format="s16", layout="mono", samples=len(pcm) // 2)
        frame.planes[0].update(pcm)
        frame.sample_rate = rate
        fifo = av.AudioFifo()
        for piece in [*resampler.resample(frame), *resampler.resample(None)]:
            fifo.write(piece)
        size = stream.codec_context.frame_size or 1024
        while fifo.samples:
            for packet in stream.encode(fifo.read(min(size, fifo.samples))):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


def wav(pcm: bytes, rate: int = RATE) -> bytes:
    from neutrino.audio.wav import wav_header

    return wav_header(rate, data_size=len(pcm)) + pcm


SOURCE = speech_like()
FILES: dict[str, tuple[str, Callable[[], bytes]]] = {
    "flac": ("speech.flac", lambda: encode(SOURCE, "flac", "flac")),
    "wav": ("speech.wav", lambda: wav(SOURCE)),
    "mp3": ("speech.mp3", lambda: encode(SOURCE, "mp3", "libmp3lame")),
    "m4a": ("speech.m4a", lambda: encode(SOURCE, "ipod", "aac")),
    "ogg": ("speech.ogg", lambda: encode(SOURCE, "ogg", "libopus")),
    "webm": ("speech.webm", lambda: encode(SOURCE, "webm", "libopus")),
}
LOSSLESS = ("flac", "wav")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MockIE, NeutrinoProc]]:
    work = tmp_path_factory.mktemp("audio-formats")
    mock = MockIE(work).start()
    with serving(mock, NeutrinoProc(work, "--engine", mock.socket)) as server:
        yield mock, server


@pytest.fixture(scope="module")
def client(stack: tuple[MockIE, NeutrinoProc]) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack[1].base_url + "/v1", api_key="x", max_retries=0)


def _given(mock: MockIE) -> tuple[array[int], int]:
    """The samples and rate of the engine's last audio query."""
    event = [e for e in mock.events("query") if e.get("kind") == "AudioQuery"][-1]
    return array("h", base64.b64decode(event["pcm"])), int(event["sample_rate"])


def _transcribed(stack: tuple[MockIE, NeutrinoProc], client: openai.OpenAI, fmt: str) -> array[int]:
    name, make = FILES[fmt]
    done = client.audio.transcriptions.create(model=STT, file=(name, make()))
    assert done.text
    samples, rate = _given(stack[0])
    assert rate == ENGINE_RATE
    return samples


def _similarity(a: array[int], b: array[int], max_lag: int) -> float:
    """The best normalised correlation of ``a`` and ``b`` shifted by up to ``max_lag``."""
    import numpy as np

    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    best = 0.0
    for lag in range(-max_lag, max_lag + 1, 4):
        xs = x[max(0, lag) :]
        ys = y[max(0, -lag) :]
        n = min(len(xs), len(ys))
        xs, ys = xs[:n], ys[:n]
        denom = math.sqrt(float(np.dot(xs, xs)) * float(np.dot(ys, ys))) or 1.0
        best = max(best, float(np.dot(xs, ys)) / denom)
    return best


@pytest.fixture(scope="module")
def reference(stack: tuple[MockIE, NeutrinoProc], client: openai.OpenAI) -> array[int]:
    return _transcribed(stack, client, "flac")


def test_the_lossless_formats_give_the_same_samples(
    stack: tuple[MockIE, NeutrinoProc], client: openai.OpenAI, reference: array[int]
) -> None:
    assert abs(len(reference) - 2 * ENGINE_RATE) <= 1
    assert _transcribed(stack, client, "wav") == reference


@pytest.mark.parametrize("fmt", ["mp3", "m4a", "ogg", "webm"])
def test_a_lossy_format_gives_the_same_sound(
    stack: tuple[MockIE, NeutrinoProc], client: openai.OpenAI, reference: array[int], fmt: str
) -> None:
    samples = _transcribed(stack, client, fmt)
    assert abs(len(samples) - len(reference)) <= 0.02 * len(reference), (
        len(samples),
        len(reference),
    )
    assert _similarity(samples, reference, max_lag=ENGINE_RATE // 20) >= 0.97


def test_a_file_that_is_not_audio_is_a_400(client: openai.OpenAI) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(200)
    for name, data in (
        ("x.png", png),
        ("x.mp3", FILES["mp3"][1]()[:300]),
        ("x.m4a", b"ftypM4A " * 8),
    ):
        with pytest.raises(openai.BadRequestError) as info:
            client.audio.transcriptions.create(model=STT, file=(name, data))
        assert info.value.body["param"] == "file"  # type: ignore[index]


def _decoded(data: bytes, fmt: str, rate: int) -> tuple[array[int], int]:
    if fmt == "pcm":
        return array("h", data), rate
    if fmt == "wav":
        audio = read_wav(data)
        return array("h", audio.pcm), audio.sample_rate
    container: Any
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
        out = bytearray()
        for frame in container.decode(stream):
            for piece in resampler.resample(frame):
                out += bytes(piece.planes[0])[: 2 * piece.samples]
        return array("h", bytes(out)), stream.codec_context.sample_rate


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav", "pcm"])
def test_speech_comes_back_in_each_format_and_decodes(client: openai.OpenAI, fmt: str) -> None:
    text = "Speech in every format."
    raw = client.audio.speech.with_raw_response.create(model=TTS, voice="alloy", input=text,
                                                       response_format="pcm")  # fmt: skip
    rate = int(raw.headers["X-Sample-Rate"])
    plain = array("h", raw.content)
    got = client.audio.speech.with_raw_response.create(model=TTS, voice="alloy", input=text,
                                                       response_format=fmt)  # type: ignore[arg-type]  # fmt: skip
    expected_type = {"mp3": "audio/mpeg", "opus": "audio/opus", "aac": "audio/aac",
                     "flac": "audio/flac", "wav": "audio/wav", "pcm": "audio/pcm"}[fmt]  # fmt: skip
    assert got.headers["Content-Type"] == expected_type
    samples, native = _decoded(got.content, fmt, rate)
    if fmt == "opus":
        assert native == 48000  # Opus's own rate; decoded back to the mock's here
    else:
        assert native == rate
    if fmt in ("flac", "wav", "pcm"):
        assert samples == plain  # lossless: the mock's samples, each one
    else:
        assert abs(len(samples) - len(plain)) <= 0.05 * len(plain) + 2048
        assert _similarity(samples, plain, max_lag=rate // 20) >= 0.9
