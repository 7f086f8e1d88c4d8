"""Transcript rendering: SubRip, WebVTT, text and OpenAI's verbose_json."""

from __future__ import annotations

import pytest

from neutrino.audio.subtitles import (
    Segment,
    compression_ratio,
    language_code,
    language_name,
    timestamp,
    to_srt,
    to_text,
    to_vtt,
    transcript,
    verbose_json,
)
from tests.support.openapi import validate

SEGMENTS = [
    Segment(0.0, 1.25, "Hello there.", (9707, 1052, 13)),
    Segment(1.25, 3661.0015, " How are you?", (2585, 525, 498, 30)),
]


@pytest.mark.parametrize(
    ("seconds", "srt", "vtt"),
    [
        (0.0, "00:00:00,000", "00:00:00.000"),
        (1.25, "00:00:01,250", "00:00:01.250"),
        (59.9994, "00:00:59,999", "00:00:59.999"),
        (59.9996, "00:01:00,000", "00:01:00.000"),
        (3661.001, "01:01:01,001", "01:01:01.001"),
        (360000.0, "100:00:00,000", "100:00:00.000"),
        (-3.0, "00:00:00,000", "00:00:00.000"),
        (float("nan"), "00:00:00,000", "00:00:00.000"),
    ],
)
def test_timestamps(seconds: float, srt: str, vtt: str) -> None:
    assert timestamp(seconds) == srt
    assert timestamp(seconds, ".") == vtt


def test_srt() -> None:
    assert to_srt(SEGMENTS) == (
        "1\n00:00:00,000 --> 00:00:01,250\nHello there.\n\n"
        "2\n00:00:01,250 --> 01:01:01,002\nHow are you?\n"
    )


def test_vtt() -> None:
    assert to_vtt(SEGMENTS) == (
        "WEBVTT\n\n"
        "00:00:00.000 --> 00:00:01.250\nHello there.\n\n"
        "00:00:01.250 --> 01:01:01.002\nHow are you?\n"
    )


def test_cues_skip_empty_text_and_blank_lines() -> None:
    segs = [
        Segment(0.0, 1.0, "   "),
        Segment(1.0, 2.0, " first\n\n second "),
        Segment(2.0, 1.5, "a <b> & c --> d"),  # end before start: clamped
    ]
    assert to_srt(segs) == (
        "1\n00:00:01,000 --> 00:00:02,000\nfirst\nsecond\n\n"
        "2\n00:00:02,000 --> 00:00:02,000\na <b> & c --> d\n"
    )
    assert to_vtt(segs) == (
        "WEBVTT\n\n"
        "00:00:01.000 --> 00:00:02.000\nfirst\nsecond\n\n"
        "00:00:02.000 --> 00:00:02.000\na &lt;b&gt; &amp; c --&gt; d\n"
    )
    assert to_srt([]) == ""
    assert to_vtt([]) == "WEBVTT\n"


def test_text() -> None:
    assert transcript(SEGMENTS) == "Hello there. How are you?"
    assert to_text(SEGMENTS) == "Hello there. How are you?\n"
    assert transcript([]) == ""


def test_verbose_json_fits_openai_schema() -> None:
    body = verbose_json(
        task="transcribe", language="english", duration=3661.5, segments=SEGMENTS, temperature=0.2
    )
    validate(body, "CreateTranscriptionResponseVerboseJson")
    validate(body, "CreateTranslationResponseVerboseJson")
    assert body["text"] == "Hello there. How are you?"
    assert body["task"] == "transcribe" and body["duration"] == 3661.5
    first, second = body["segments"]
    assert first["id"] == 0 and second["id"] == 1
    assert first["tokens"] == [9707, 1052, 13]
    assert second["text"] == " How are you?"  # segment texts keep their leading space
    assert first["temperature"] == 0.2
    assert first["seek"] == 0 and second["seek"] == 0
    late = verbose_json(
        task="translate",
        language="english",
        duration=70.0,
        segments=[Segment(65.0, 70.0, "late")],
        temperature=0.0,
    )
    assert late["segments"][0]["seek"] == 6000  # the third 30 s window, in 10 ms frames


def test_compression_ratio() -> None:
    assert compression_ratio("") == 0.0
    assert compression_ratio("ha" * 200) > 2.4  # repetitive text compresses well
    assert 0.0 < compression_ratio("The beach was a popular spot.") < 2.4


def test_languages() -> None:
    assert language_name("en") == "english"
    assert language_name("EN") == "english"
    assert language_name("ht") == "haitian creole"
    assert language_name("xx") == "xx"
    assert language_code("en") == "en"
    assert language_code(" French ") == "fr"
    assert language_code("haw") == "haw"
    assert language_code("qq") == "qq"  # shaped like a code: passed to the engine
    assert language_code("english please") is None
    assert language_code("e1") is None
    assert language_code("") is None
