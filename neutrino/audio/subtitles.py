"""Transcripts in OpenAI's response formats: text, json, verbose_json, SubRip and WebVTT.

Sans-IO: segments (times in seconds and their decoded text) in, strings or JSON-ready
dicts out.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Segment:
    start: float
    end: float
    text: str
    tokens: tuple[int, ...] = ()


# ISO 639-1 codes and the English names OpenAI reports in verbose_json.
_LANGUAGE_TABLE = (
    "af=afrikaans am=amharic ar=arabic as=assamese az=azerbaijani ba=bashkir "
    "be=belarusian bg=bulgarian bn=bengali bo=tibetan br=breton bs=bosnian ca=catalan "
    "cs=czech cy=welsh da=danish de=german el=greek en=english es=spanish et=estonian "
    "eu=basque fa=persian fi=finnish fo=faroese fr=french gl=galician gu=gujarati "
    "ha=hausa haw=hawaiian he=hebrew hi=hindi hr=croatian ht=haitian_creole "
    "hu=hungarian hy=armenian id=indonesian is=icelandic it=italian ja=japanese "
    "jw=javanese ka=georgian kk=kazakh km=khmer kn=kannada ko=korean la=latin "
    "lb=luxembourgish ln=lingala lo=lao lt=lithuanian lv=latvian mg=malagasy mi=maori "
    "mk=macedonian ml=malayalam mn=mongolian mr=marathi ms=malay mt=maltese my=myanmar "
    "ne=nepali nl=dutch nn=nynorsk no=norwegian oc=occitan pa=punjabi pl=polish "
    "ps=pashto pt=portuguese ro=romanian ru=russian sa=sanskrit sd=sindhi si=sinhala "
    "sk=slovak sl=slovenian sn=shona so=somali sq=albanian sr=serbian su=sundanese "
    "sv=swedish sw=swahili ta=tamil te=telugu tg=tajik th=thai tk=turkmen tl=tagalog "
    "tr=turkish tt=tatar uk=ukrainian ur=urdu uz=uzbek vi=vietnamese yi=yiddish "
    "yo=yoruba yue=cantonese zh=chinese"
)
_LANGUAGES = {
    code: name.replace("_", " ")
    for code, _, name in (pair.partition("=") for pair in _LANGUAGE_TABLE.split())
}
_CODES = {name: code for code, name in _LANGUAGES.items()}


def language_name(code: str) -> str:
    """``en`` -> ``english``; unknown codes are returned as given."""
    return _LANGUAGES.get(code.lower(), code)


def language_code(value: str) -> str | None:
    """A client's ``language`` (an ISO 639-1 code or an English name) as a lowercase
    code, or None if it is neither a known name nor shaped like a code."""
    v = value.strip().lower()
    if v in _LANGUAGES:
        return v
    if v in _CODES:
        return _CODES[v]
    if 2 <= len(v) <= 3 and v.isascii() and v.isalpha():
        return v
    return None


# ----------------------------------------------------------------------------- timing


def _millis(seconds: float) -> int:
    if not math.isfinite(seconds) or seconds <= 0:
        return 0
    return round(seconds * 1000)


def timestamp(seconds: float, decimal: str = ",") -> str:
    """``HH:MM:SS,mmm`` (SubRip) or, with ``decimal="."``, ``HH:MM:SS.mmm`` (WebVTT)."""
    ms = _millis(seconds)
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs, ms = divmod(ms, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{decimal}{ms:03d}"


def _span(seg: Segment, decimal: str) -> str:
    end = max(seg.end, seg.start) if math.isfinite(seg.end) else seg.start
    return f"{timestamp(seg.start, decimal)} --> {timestamp(end, decimal)}"


def _cue_lines(text: str) -> list[str]:
    """A cue's text lines: no blank lines (a blank line ends a cue in both formats)."""
    return [line.strip() for line in text.strip().splitlines() if line.strip()]


# ----------------------------------------------------------------------------- formats


def transcript(segments: Sequence[Segment]) -> str:
    """The whole text: the segments' texts joined, without surrounding space."""
    return "".join(s.text for s in segments).strip()


def to_text(segments: Sequence[Segment]) -> str:
    return transcript(segments) + "\n"


def to_srt(segments: Sequence[Segment]) -> str:
    out: list[str] = []
    for seg in segments:
        lines = _cue_lines(seg.text)
        if lines:
            out.append(f"{len(out) + 1}\n{_span(seg, ',')}\n" + "\n".join(lines) + "\n")
    return "\n".join(out)


def _vtt_escape(line: str) -> str:
    return line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_vtt(segments: Sequence[Segment]) -> str:
    out = ["WEBVTT\n"]
    for seg in segments:
        lines = _cue_lines(seg.text)
        if lines:
            cue = "\n".join(_vtt_escape(line) for line in lines)
            out.append(f"{_span(seg, '.')}\n{cue}\n")
    return "\n".join(out)


def compression_ratio(text: str) -> float:
    """Whisper's repetition measure: UTF-8 length over zlib-compressed length."""
    raw = text.encode()
    return len(raw) / len(zlib.compress(raw)) if raw else 0.0


def verbose_json(
    *,
    task: str,
    language: str,
    duration: float,
    segments: Sequence[Segment],
    temperature: float,
) -> dict[str, Any]:
    """OpenAI's ``verbose_json`` object (CreateTranscriptionResponseVerboseJson).

    The engine reports neither log probabilities nor no-speech probabilities, so
    ``avg_logprob`` and ``no_speech_prob`` are 0; ``seek`` is the start of the
    segment's 30-second window in 10 ms frames, as Whisper counts it.
    """
    return {
        "task": task,
        "language": language,
        "duration": duration,
        "text": transcript(segments),
        "segments": [
            {
                "id": i,
                "seek": int(max(seg.start, 0.0) // 30) * 3000 if math.isfinite(seg.start) else 0,
                "start": seg.start,
                "end": seg.end,
                "text": seg.text,
                "tokens": list(seg.tokens),
                "temperature": temperature,
                "avg_logprob": 0.0,
                "compression_ratio": compression_ratio(seg.text),
                "no_speech_prob": 0.0,
            }
            for i, seg in enumerate(segments)
        ],
    }
