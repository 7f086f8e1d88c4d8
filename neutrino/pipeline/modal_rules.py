"""Each modality's request rules, once, for every protocol (sans-IO).

A front end translates its syntax (OpenAI's JSON or form fields, a gRPC message) into
plain values and calls the validator of its job here, naming the fields whose names
differ in its protocol; the validator checks what the values mean (non-empty, counts,
ranges, formats served) and builds the job of ``pipeline/modalities.py``. An error names
the field as the client's protocol does (:mod:`neutrino.pipeline.fields`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from neutrino.audio.subtitles import language_code
from neutrino.engine.messages import AudioTask, Image
from neutrino.pipeline.fields import Loc, invalid, is_int, is_num
from neutrino.pipeline.inputs import MAX_DOCUMENTS, MAX_INPUTS
from neutrino.pipeline.modalities import Detect, Embed, Rerank, Speak, Transcribe

# OpenAI's speech formats (neutrino.audio.codecs encodes each), and raw 16-bit PCM.
SPEECH_FORMATS = ("wav", "pcm", "mp3", "opus", "aac", "flac")
MAX_SPEECH_CHARS = 4096
MAX_VOICE_CHARS = 256


def model_name(v: object, text: str = "model is required and must be a string") -> str:
    if not isinstance(v, str) or not v:
        raise invalid(("model",), text)
    return v


def embed(
    model: object, inputs: Sequence[object], dimensions: object, traceparent: str = ""
) -> Embed:
    """``inputs``: each a non-empty text or non-empty token ids; ``dimensions``: None or a
    positive integer. Errors name ``input`` (the message says which item)."""
    name = model_name(model)
    if not inputs:
        raise invalid(("input",), "input must not be empty")
    if len(inputs) > MAX_INPUTS:
        raise invalid(("input",), f"input accepts at most {MAX_INPUTS} items")
    items: list[str | list[int]] = []
    for i, item in enumerate(inputs):
        if isinstance(item, str):
            if not item:
                raise invalid(("input", i), "{at} is an empty string", param=("input",))
            items.append(item)
        elif isinstance(item, list) and item and all(is_int(t) and t >= 0 for t in item):
            items.append(item)
        else:
            raise invalid(
                ("input", i),
                "{at} must be a non-empty string or array of token ids",
                param=("input",),
            )
    if dimensions is not None and (not is_int(dimensions) or dimensions < 1):
        raise invalid(("dimensions",), "dimensions must be a positive integer")
    return Embed(name, items, dimensions, traceparent)


def rerank(
    model: object, query: object, documents: Sequence[str], top_n: object, traceparent: str = ""
) -> Rerank:
    """``documents`` scored against ``query``; ``top_n`` None (all) or a positive integer."""
    name = model_name(model)
    if not isinstance(query, str) or not query:
        raise invalid(("query",), "query must be a non-empty string")
    if not documents:
        raise invalid(("documents",), "documents must be a non-empty array")
    if len(documents) > MAX_DOCUMENTS:
        raise invalid(("documents",), f"at most {MAX_DOCUMENTS} documents are accepted")
    n = len(documents) if top_n is None else top_n
    if not is_int(n) or n < 1:
        raise invalid(("top_n",), "top_n must be a positive integer")
    return Rerank(name, query, list(documents), n, traceparent)


def detect(model: object, image: Image, threshold: object, traceparent: str = "") -> Detect:
    """Objects in ``image``; ``threshold`` None (0) or a number from 0 to 1."""
    name = model_name(model)
    value = 0.0 if threshold is None else threshold
    if not is_num(value) or math.isnan(value) or not 0 <= value <= 1:
        raise invalid(("threshold",), "threshold must be a number between 0 and 1")
    return Detect(name, image, float(value), traceparent)


def transcribe(
    model: object,
    task: AudioTask,
    *,
    language: str | None,
    prompt: str,
    temperature: float | None,
    traceparent: str = "",
) -> Transcribe:
    """Speech to text; ``language`` (transcriptions only) an ISO-639-1 code or a name.
    The audio comes after these checks (:func:`with_audio`): decoding it is the dearer
    step."""
    name = model_name(model, "model is required")
    temp = 0.0 if temperature is None else temperature
    if not 0.0 <= temp <= 1.0:  # also refuses NaN
        raise invalid(("temperature",), "temperature must be between 0 and 1")
    code = ""
    if task is AudioTask.TRANSCRIBE and language:
        found = language_code(language)
        if found is None:
            raise invalid(("language",), "language must be an ISO-639-1 code such as 'en' or 'fr'")
        code = found
    return Transcribe(
        model=name,
        task=task,
        pcm=b"",
        sample_rate=0,
        language=code,
        prompt=prompt,
        temperature=temp,
        traceparent=traceparent,
    )


def with_audio(job: Transcribe, pcm: bytes, sample_rate: int) -> Transcribe:
    """``job`` with its audio: 16-bit mono PCM at ``sample_rate``."""
    return dataclasses.replace(job, pcm=pcm, sample_rate=sample_rate)


def speak(
    model: object,
    text: object,
    voice: str,
    fmt: object,
    speed: object,
    *,
    at_text: Loc = ("input",),
    at_format: Loc = ("response_format",),
    traceparent: str = "",
) -> Speak:
    """Text to speech: a non-blank text of at most 4,096 characters, a voice name, a
    served format (OpenAI's others are UNSUPPORTED) and a speed from 0.25 to 4."""
    name = model_name(model)
    if not isinstance(text, str):
        raise invalid(at_text, "{at} is required and must be a string")
    if not text.strip():
        raise invalid(at_text, "{at} must not be empty")
    if len(text) > MAX_SPEECH_CHARS:
        raise invalid(
            at_text,
            f"{{at}} is {len(text)} characters long; at most {MAX_SPEECH_CHARS} are accepted",
        )
    if not voice.strip() or len(voice) > MAX_VOICE_CHARS:
        raise invalid(("voice",), "voice is required: a voice name such as 'alloy'")
    fmt = "wav" if fmt is None or fmt == "" else fmt
    if fmt not in SPEECH_FORMATS:
        supported = ", ".join(f"'{f}'" for f in SPEECH_FORMATS)
        raise invalid(at_format, f"{{at}} must be one of {supported}")
    value = 1.0 if speed is None else speed
    if not is_num(value) or not 0.25 <= value <= 4.0:
        raise invalid(("speed",), "speed must be a number between 0.25 and 4.0")
    return Speak(name, text, voice, float(value), traceparent, str(fmt))
