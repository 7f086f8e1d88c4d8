"""neutrino.audio.codecs: uploads decoded within their bounds (length, time, formats),
hostile and broken files refused, resampling, and the speech encoders' streams."""

from __future__ import annotations

import io
from array import array
from typing import Any

import av
import pytest

from neutrino.audio.codecs import SPEECH_FORMATS, AudioError, SpeechEncoder, decode_upload, resample
from neutrino.audio.wav import Audio, read_wav
from tests.integration.test_audio_formats import encode, speech_like, wav

MP3 = encode(speech_like(3.0), "mp3", "libmp3lame")
M4A = encode(speech_like(1.0), "ipod", "aac")


def test_a_file_is_decoded_at_the_rate_asked_or_its_own() -> None:
    assert decode_upload(MP3, rate=16000, max_seconds=10).sample_rate == 16000
    own = decode_upload(MP3, max_seconds=10)
    assert own.sample_rate == 24000 and abs(len(own.pcm) // 2 - 3 * 24000) < 50


def test_a_file_longer_than_the_bound_is_refused_as_it_decodes() -> None:
    with pytest.raises(AudioError, match="longer than 2 seconds"):
        decode_upload(MP3, rate=16000, max_seconds=2)
    with pytest.raises(AudioError, match="longer than 2 seconds"):
        decode_upload(wav(speech_like(3.0)), max_seconds=2)


def test_a_decode_past_its_time_is_stopped() -> None:
    with pytest.raises(AudioError, match="too long to decode"):
        decode_upload(MP3, max_seconds=10, max_decode_s=0)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"hello, this is not audio" * 10,
        b"\x89PNG\r\n\x1a\n" + bytes(500),
        MP3[:200],
        M4A[: len(M4A) // 2],
        M4A[:64],
        b"fLaC" + bytes(100),
        b"OggS" + bytes(200),
        b"RIFF\x00\x00\x00\x00WAVEfmt " + bytes(40),
    ],
    ids=["empty", "text", "png", "mp3 head", "half m4a", "m4a head", "flac zeros", "ogg zeros",
         "wav zeros"],
)  # fmt: skip
def test_broken_and_hostile_files_are_an_audio_error(data: bytes) -> None:
    with pytest.raises(AudioError):
        decode_upload(data, rate=16000, max_seconds=30)


def test_a_video_without_audio_is_refused() -> None:
    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        stream = out.add_stream("mpeg4", rate=10)
        stream.width = stream.height = 16
        stream.pix_fmt = "yuv420p"
        for _ in range(3):
            frame = av.VideoFrame(16, 16, "yuv420p")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    with pytest.raises(AudioError, match="no audio stream"):
        decode_upload(buf.getvalue(), max_seconds=30)


def test_a_rate_outside_the_bounds_is_refused() -> None:
    with pytest.raises(AudioError, match="sample rate"):
        decode_upload(MP3, rate=4000, max_seconds=30)


def test_resampling_keeps_the_length_in_seconds() -> None:
    audio = Audio(speech_like(1.5), 24000)
    out = resample(audio, 16000)
    assert out.sample_rate == 16000 and abs(len(out.pcm) // 2 - 24000) < 40
    assert resample(audio, 24000) is audio


@pytest.mark.parametrize("fmt", sorted(SPEECH_FORMATS))
def test_the_speech_encoder_streams_each_format(fmt: str) -> None:
    pcm = speech_like(1.0)
    enc = SpeechEncoder(fmt, 24000)
    out = b"".join(enc.feed(pcm[k : k + 4800]) for k in range(0, len(pcm), 4800)) + enc.finish()
    assert enc.content_type == SPEECH_FORMATS[fmt][3]
    if fmt == "pcm":
        assert out == pcm
        return
    if fmt == "wav":
        assert out[:4] == b"RIFF" and out[44:] == pcm
        return
    container: Any
    with av.open(io.BytesIO(out)) as container:
        samples = sum(f.samples for f in container.decode(audio=0))
        rate = container.streams.audio[0].codec_context.sample_rate
    assert abs(samples / rate - 1.0) < 0.1, (samples, rate)


def test_the_speech_encoder_gives_the_same_bytes_for_the_same_audio() -> None:
    pcm = speech_like(0.5)
    runs = []
    for _ in range(2):
        enc = SpeechEncoder("opus", 24000)
        runs.append(enc.feed(pcm) + enc.finish())
    assert runs[0] == runs[1]


def test_a_wav_upload_takes_the_exact_reader() -> None:
    data = wav(speech_like(0.5))
    assert decode_upload(data, max_seconds=5).pcm == read_wav(data).pcm
    assert array("h", decode_upload(data, rate=16000, max_seconds=5).pcm)
