"""OpenAI's audio endpoints over the engine's audio and speech queries.

* ``POST /v1/audio/transcriptions`` and ``POST /v1/audio/translations``: a
  multipart form with a ``file`` in any of OpenAI's formats (flac, mp3, mp4, mpeg, mpga,
  m4a, ogg, wav, webm; decoded here to 16-bit mono PCM at the rate the model's engine
  declares, ``neutrino.audio.codecs``), ``model``,
  ``language``, ``prompt`` (tokenized with the model's tokenizer), ``temperature``
  and ``response_format`` (json, text, verbose_json, srt, vtt);
* ``POST /v1/audio/speech``: JSON in, audio streamed out as the engine produces it, in
  any of OpenAI's formats (mp3, opus, aac, flac, wav, pcm); a client that leaves makes the
  engine get one cancel.
"""

from __future__ import annotations

import contextlib
import logging
import math
from dataclasses import dataclass, field
from typing import Any

from aiohttp import BodyPartReader, MultipartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from neutrino.audio.codecs import SpeechEncoder
from neutrino.audio.subtitles import (
    language_name,
    to_srt,
    to_text,
    to_vtt,
    transcript,
    verbose_json,
)
from neutrino.errors import ErrorKind, NeutrinoError, bad_request, unsupported
from neutrino.frontends.common import new_id, uploaded_audio
from neutrino.frontends.http.exchange import json_response, read_json
from neutrino.frontends.http.guard import caller, received_at
from neutrino.frontends.http.modal import answered
from neutrino.frontends.http.routes import AiohttpHandler, RouteGroup
from neutrino.frontends.http.sse import SlowClient, within
from neutrino.pipeline import modal_rules as rules
from neutrino.pipeline.call import ModalCall
from neutrino.pipeline.modalities import AudioTask, Speak, SpeechAudio, Transcript

log = logging.getLogger("neutrino.http")

TRANSCRIPT_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
_READ_CHUNK = 64 * 1024

_CONTENT_TYPES = {
    "json": "application/json",
    "verbose_json": "application/json",
    "text": "text/plain; charset=utf-8",
    "srt": "text/plain; charset=utf-8",
    "vtt": "text/vtt; charset=utf-8",
}


def _too_large(max_bytes: int) -> NeutrinoError:
    return NeutrinoError(ErrorKind.PAYLOAD_TOO_LARGE, f"the request body exceeds {max_bytes} bytes")


# ----------------------------------------------------------------------------- the form


@dataclass(slots=True)
class Form:
    """A multipart form: the uploaded file and the text fields (repeats kept)."""

    file: bytes | None = None
    filename: str | None = None
    fields: dict[str, list[str]] = field(default_factory=dict)

    def text(self, name: str) -> str | None:
        values = self.fields.get(name)
        return values[-1] if values else None

    def all(self, *names: str) -> list[str]:
        return [v for n in names for v in self.fields.get(n, ())]


# The fields of OpenAI's transcription and translation forms; any other is refused as
# soon as its part's headers are read, before its value is.
FORM_FIELDS = frozenset(
    {
        "file",
        "model",
        "language",
        "prompt",
        "response_format",
        "temperature",
        "timestamp_granularities[]",
        "timestamp_granularities",
        "stream",
        "include[]",
        "chunking_strategy",
    }
)
_MAX_PREAMBLE_LINES = 16
MAX_PARTS = 32  # parts in one form (a known field may repeat, as timestamp_granularities[])
MAX_FIELD_BYTES = 64 * 1024  # each text field


async def read_form(request: web.Request, max_bytes: int) -> Form:
    """Read a multipart/form-data body within ``max_bytes``, at most ``MAX_PARTS`` parts
    of known fields (text fields of at most ``MAX_FIELD_BYTES``); 400 if it is malformed."""
    if request.content_type != "multipart/form-data":
        raise bad_request(
            "the request body must be multipart/form-data with the audio in a 'file' part"
        )
    length = request.content_length
    if length is not None and length > max_bytes:
        raise _too_large(max_bytes)
    form = Form()
    total = 0
    try:
        reader = _FormReader(request.headers, request.content)
        for _ in range(MAX_PARTS + 1):
            part = await reader.next()
            if part is None:
                return form
            if not isinstance(part, BodyPartReader):
                raise bad_request("nested multipart bodies are not accepted")
            name = _known_part(part)
            limit = max_bytes - total if name == "file" else MAX_FIELD_BYTES
            buf = await _read_part(part, limit, name, max_bytes)
            total += len(buf)
            _add(form, name, part, buf)
        raise bad_request(f"the form has more than {MAX_PARTS} parts")
    except NeutrinoError:
        raise
    except web.HTTPRequestEntityTooLarge:
        raise _too_large(max_bytes) from None
    except (ValueError, LookupError, AssertionError, RuntimeError, HttpProcessingError):
        # HttpProcessingError: a part's head too long or with too many lines.
        raise bad_request("the multipart/form-data body is malformed") from None


class _FormReader(MultipartReader):
    """aiohttp's reader, but the lines before the first boundary (a preamble, which no
    client sends) are bounded: a body of a million empty lines took seconds of the
    event loop, a line at a time."""

    async def _read_until_first_boundary(self) -> None:
        for _ in range(_MAX_PREAMBLE_LINES):
            chunk = await self._readline()
            if chunk == b"":
                break
            chunk = chunk.rstrip()
            if chunk == self._boundary:
                return
            if chunk == self._boundary + b"--":
                self._at_eof = True
                return
        raise ValueError("no boundary where the form should start")


def _known_part(part: BodyPartReader) -> str:
    """The part's field name, if it is a known field of the form."""
    name = part.name
    if not name:
        raise bad_request("every form part needs a name (Content-Disposition: form-data)")
    if name not in FORM_FIELDS:
        shown = name if len(name) <= 64 else name[:61] + "..."
        raise bad_request(f"unknown form field {shown!r}", shown)
    return name


async def _read_part(part: BodyPartReader, limit: int, name: str, max_bytes: int) -> bytearray:
    buf = bytearray()
    while chunk := await part.read_chunk(_READ_CHUNK):
        buf += chunk
        if len(buf) > limit:
            if name == "file":
                raise _too_large(max_bytes)
            raise bad_request(f"{name} is longer than {MAX_FIELD_BYTES} bytes", name)
    return buf


def _add(form: Form, name: str, part: BodyPartReader, buf: bytearray) -> None:
    if name == "file":
        if form.file is not None:
            raise bad_request("send exactly one file", "file")
        form.file = bytes(buf)
        form.filename = part.filename
        return
    try:
        value = buf.decode("utf-8")
    except UnicodeDecodeError:
        raise bad_request(f"{name} is not valid UTF-8 text", name) from None
    form.fields.setdefault(name, []).append(value)


def _temperature(form: Form) -> float | None:
    """The form's temperature as a number (its range is the job's rule)."""
    raw = form.text("temperature")
    if raw is None or not raw.strip():
        return None
    try:
        return float(raw)
    except ValueError:
        raise bad_request("temperature must be a number", "temperature") from None


def _response_format(form: Form) -> str:
    fmt = form.text("response_format")
    if fmt is None or fmt == "":
        return "json"
    if fmt in TRANSCRIPT_FORMATS:
        return fmt
    supported = ", ".join(TRANSCRIPT_FORMATS)
    if fmt == "diarized_json":
        raise unsupported(
            f"response_format 'diarized_json' is not supported; use one of {supported}",
            "response_format",
        )
    raise bad_request(f"response_format must be one of {supported}", "response_format")


# ----------------------------------------------------------------------------- speech input


def speech_job(body: Any, traceparent: str = "") -> Speak:
    """The job of an OpenAI speech body (its rules: modal_rules.speak); the JSON-only
    parts are checked here: the ``{"id": ...}`` voice, ``stream_format``, ``instructions``."""
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    raw_voice = body.get("voice")
    voice = raw_voice.get("id") if isinstance(raw_voice, dict) else raw_voice
    if not isinstance(voice, str):
        raise bad_request(
            "voice is required: a voice name such as 'alloy', or {'id': 'voice-id'}", "voice"
        )
    fmt = body.get("response_format", "wav")
    job = rules.speak(
        body.get("model"),
        body.get("input"),
        voice,
        "" if fmt is None else fmt,
        body.get("speed"),
        traceparent=traceparent,
    )
    stream_format = body.get("stream_format")
    if stream_format not in (None, "audio"):
        if stream_format == "sse":
            raise unsupported("stream_format 'sse' is not supported; use 'audio'", "stream_format")
        raise bad_request("stream_format must be 'audio'", "stream_format")
    instructions = body.get("instructions")
    if instructions is not None and (
        not isinstance(instructions, str) or len(instructions) > rules.MAX_SPEECH_CHARS
    ):
        raise bad_request(
            f"instructions must be a string of at most {rules.MAX_SPEECH_CHARS} characters",
            "instructions",
        )
    return job


# ----------------------------------------------------------------------------- routes


class AudioRoutes(RouteGroup):
    def aiohttp_routes(self) -> list[tuple[str, str, AiohttpHandler]]:
        return [
            ("POST", "/v1/audio/transcriptions", self.transcriptions),
            ("POST", "/v1/audio/translations", self.translations),
            ("POST", "/v1/audio/speech", self.speech),
        ]

    async def transcriptions(self, request: web.Request) -> web.StreamResponse:
        return await self._audio(request, AudioTask.TRANSCRIBE)

    async def translations(self, request: web.Request) -> web.StreamResponse:
        return await self._audio(request, AudioTask.TRANSLATE)

    # ------------------------------------------------------------------ speech to text

    async def _audio(self, request: web.Request, task: AudioTask) -> web.StreamResponse:
        principal = caller(self.orch.keys, request)
        form = await read_form(request, self.cfg.limits.max_upload_bytes)
        model = rules.model_name(form.text("model"), "model is required")
        fmt = _response_format(form)
        job = rules.transcribe(
            model,
            task,
            language=form.text("language"),
            prompt=form.text("prompt") or "",
            temperature=_temperature(form),
            traceparent=request.headers.get("traceparent", ""),
        )
        if (form.text("stream") or "").strip().lower() in ("true", "1"):
            raise unsupported("streaming transcription is not supported", "stream")
        for g in form.all("timestamp_granularities[]", "timestamp_granularities"):
            if g == "word":
                raise unsupported(
                    "word timestamps are not supported; segment timestamps are",
                    "timestamp_granularities",
                )
            if g != "segment":
                raise bad_request(
                    "timestamp_granularities accepts 'segment' (and 'word')",
                    "timestamp_granularities",
                )
        if form.file is None:
            raise bad_request("file is required: send the audio as a multipart 'file' part", "file")
        limit = self.cfg.limits.max_audio_seconds
        audio = await uploaded_audio(form.file, self.orch.audio_rate(model), limit, "file")
        job = rules.with_audio(job, audio.pcm, audio.sample_rate)
        prefix = "trsc" if task is AudioTask.TRANSCRIBE else "trsl"
        _, answer = await answered(self.orch, request, job, principal, new_id(prefix))
        result = job.transcript(answer)
        return self._render(fmt, task, result, job.language, job.temperature)

    def _render(
        self,
        fmt: str,
        task: AudioTask,
        result: Transcript,
        language: str,
        temperature: float,
    ) -> web.Response:
        segments = result.segments
        ctype = _CONTENT_TYPES[fmt]
        usage = {"type": "duration", "seconds": math.ceil(result.duration_s)}
        translate = task is AudioTask.TRANSLATE
        if fmt == "json":
            body: dict[str, object] = {"text": transcript(segments)}
            if not translate:
                body["usage"] = usage
            return json_response(body)
        if fmt == "verbose_json":
            body = verbose_json(
                task="translate" if translate else "transcribe",
                language="english" if translate else language_name(result.language),
                duration=result.duration_s,
                segments=segments,
                temperature=temperature,
            )
            if not translate:
                body["usage"] = usage
            return json_response(body)
        render = {"text": to_text, "srt": to_srt, "vtt": to_vtt}[fmt]
        return web.Response(body=render(segments).encode(), headers={"Content-Type": ctype})

    # ------------------------------------------------------------------ text to speech

    async def speech(self, request: web.Request) -> web.StreamResponse:
        principal = caller(self.orch.keys, request)
        body = await read_json(request, self.cfg.limits)
        job = speech_job(body, request.headers.get("traceparent", ""))
        call = await self.orch.call(
            job, received_ns=received_at(request), principal=principal, request_id=new_id("speech")
        )
        try:
            return await self._stream_speech(request, call, job.fmt)
        finally:
            call.close()

    async def _stream_speech(
        self, request: web.Request, call: ModalCall, fmt: str
    ) -> web.StreamResponse:
        audio = SpeechAudio(call)
        rate = await audio.start()  # an error before any audio is a plain error answer
        encoder = SpeechEncoder(fmt, rate)
        resp = web.StreamResponse(
            headers={"Content-Type": encoder.content_type, "X-Sample-Rate": str(rate)}
        )
        await resp.prepare(request)
        try:
            done = False
            while not done:
                try:
                    pcm, done = await audio.next()
                except NeutrinoError as exc:
                    self._abort(request, resp, exc.message)
                    return resp
                out = encoder.encode(pcm, done)
                if out:
                    send = resp.write(out)
                    await within(send, request.transport, self.cfg.limits.send_timeout_s)
            await resp.write_eof()
        except SlowClient:
            call.close("client too slow")  # its connection is reset: it read nothing
        except ConnectionError:
            pass  # the client left; the caller's close() cancels the engine request
        return resp

    def _abort(self, request: web.Request, resp: web.StreamResponse, why: str) -> None:
        """End a stream that failed after it started: the only signal left is to cut the
        connection before the end of the body."""
        log.warning("speech stream for %s %s aborted: %s", request.method, request.path, why)
        resp.force_close()
        transport = request.transport
        if transport is not None:
            with contextlib.suppress(Exception):
                transport.close()
