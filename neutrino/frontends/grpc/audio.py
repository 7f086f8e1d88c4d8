"""The ``neutrino.v1.Audio`` servicer: ``Transcribe``, ``Translate`` and ``Speak``.

The gRPC twins of ``POST /v1/audio/transcriptions``, ``/v1/audio/translations`` and
``/v1/audio/speech``, with HTTP's checks and messages (params are the proto's field
names): the audio is a WAV file decoded by :mod:`neutrino.audio.wav` to 16-bit mono PCM,
the transcript is the segments' text as HTTP renders it, and speech streams the bytes
HTTP would send (for ``wav``, the unknown-length header first) as the engine produces
them. A Speak call that goes away (client gone, deadline passed) reaches ``close()``,
so the engine gets one cancel.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

from neutrino.audio.subtitles import language_code, transcript
from neutrino.audio.wav import Audio, WavError, read_wav, wav_header
from neutrino.config import Config
from neutrino.errors import bad_request, unsupported
from neutrino.frontends.common import new_id
from neutrino.frontends.grpc.calls import (
    Context,
    caller,
    closing,
    guarded,
    metadata,
    refusals,
    send,
    timeout_s,
)
from neutrino.frontends.grpc.modal import usage
from neutrino.frontends.grpc.stubs import audio_pb2, audio_pb2_grpc
from neutrino.pipeline.call import ModalCall
from neutrino.pipeline.modalities import AudioTask, Speak, SpeechAudio, Transcribe
from neutrino.pipeline.orchestrator import Orchestrator

SPEECH_FORMATS = ("wav", "pcm")  # as over HTTP
OPENAI_SPEECH_FORMATS = ("mp3", "opus", "aac", "flac")  # OpenAI's, not served here
MAX_SPEECH_CHARS = 4096
MAX_VOICE_CHARS = 256
MAX_CHUNK_BYTES = 1024 * 1024  # per SpeechChunk, far below the message size limit
_OFFLOAD_BYTES = 256 * 1024  # decode bigger uploads off the event loop


# ----------------------------------------------------------------------------- speech to text


@dataclass(frozen=True, slots=True)
class Transcription:
    model: str
    language: str  # "" when not given (and always for translations)
    prompt: str
    temperature: float


def transcription_request(msg: audio_pb2.TranscriptionRequest, task: AudioTask) -> Transcription:
    """The checked fields besides the audio (raises BAD_REQUEST, as HTTP does)."""
    if not msg.model:
        raise bad_request("model is required", "model")
    temperature = 0.0
    if msg.HasField("temperature"):
        temperature = float(msg.temperature)
        if not 0.0 <= temperature <= 1.0:  # also refuses NaN
            raise bad_request("temperature must be between 0 and 1", "temperature")
    language = ""
    if task is AudioTask.TRANSCRIBE and msg.language:
        code = language_code(msg.language)
        if code is None:
            raise bad_request("language must be an ISO-639-1 code such as 'en' or 'fr'", "language")
        language = code
    return Transcription(msg.model, language, msg.prompt, temperature)


def decode_audio(data: bytes) -> Audio:
    """16-bit mono PCM of a WAV upload (raises BAD_REQUEST with the WAV reader's words)."""
    try:
        return read_wav(data)
    except WavError as exc:
        raise bad_request(str(exc), "audio") from None


# ----------------------------------------------------------------------------- text to speech


@dataclass(frozen=True, slots=True)
class Speech:
    model: str
    text: str
    voice: str
    fmt: str
    speed: float


def speech_request(msg: audio_pb2.SpeechRequest) -> Speech:
    """The checked speech request (BAD_REQUEST, or UNSUPPORTED for OpenAI's formats)."""
    if not msg.model:
        raise bad_request("model is required and must be a string", "model")
    text = msg.text
    if not text.strip():
        raise bad_request("text must not be empty", "text")
    if len(text) > MAX_SPEECH_CHARS:
        raise bad_request(
            f"text is {len(text)} characters long; at most {MAX_SPEECH_CHARS} are accepted",
            "text",
        )
    voice = msg.voice
    if not voice.strip() or len(voice) > MAX_VOICE_CHARS:
        raise bad_request("voice is required: a voice name such as 'alloy'", "voice")
    fmt = msg.format or "wav"
    if fmt not in SPEECH_FORMATS:
        supported = "'wav' or 'pcm'"
        if fmt in OPENAI_SPEECH_FORMATS:
            raise unsupported(
                f"format {fmt!r} is not supported by this server; use {supported}", "format"
            )
        raise bad_request(f"format must be {supported}", "format")
    speed = float(msg.speed) if msg.HasField("speed") else 1.0
    if not 0.25 <= speed <= 4.0:  # also refuses NaN
        raise bad_request("speed must be a number between 0.25 and 4.0", "speed")
    return Speech(msg.model, text, voice, fmt, speed)


def _chunks(data: bytes, rate: int) -> list[audio_pb2.SpeechChunk]:
    return [
        audio_pb2.SpeechChunk(pcm=data[i : i + MAX_CHUNK_BYTES], sample_rate=rate)
        for i in range(0, len(data), MAX_CHUNK_BYTES)
    ]


# ----------------------------------------------------------------------------- the service


class AudioService(audio_pb2_grpc.AudioServicer):
    @property
    def cfg(self) -> Config:
        """The running configuration (the orchestrator's: a reload swaps it)."""
        return self.orch.cfg

    def __init__(self, cfg: Config, orchestrator: Orchestrator) -> None:
        self.orch = orchestrator

    async def Transcribe(
        self, request: audio_pb2.TranscriptionRequest, context: Context
    ) -> audio_pb2.TranscriptionResponse | None:
        return await guarded(
            context,
            "Transcribe",
            lambda: self._audio(request, context, AudioTask.TRANSCRIBE),
            refusals(self.orch, "transcribe"),
        )

    async def Translate(
        self, request: audio_pb2.TranscriptionRequest, context: Context
    ) -> audio_pb2.TranscriptionResponse | None:
        return await guarded(
            context,
            "Translate",
            lambda: self._audio(request, context, AudioTask.TRANSLATE),
            refusals(self.orch, "transcribe"),
        )

    async def _audio(
        self, msg: audio_pb2.TranscriptionRequest, context: Context, task: AudioTask
    ) -> audio_pb2.TranscriptionResponse:
        received = time.monotonic_ns()
        principal = caller(context, self.orch.keys)
        req = transcription_request(msg, task)
        data = msg.audio
        if len(data) > _OFFLOAD_BYTES:
            audio = await asyncio.to_thread(decode_audio, data)
        else:
            audio = decode_audio(data)
        job = Transcribe(
            model=req.model,
            task=task,
            pcm=audio.pcm,
            sample_rate=audio.sample_rate,
            language=req.language,
            prompt=req.prompt,
            temperature=req.temperature,
            traceparent=metadata(context, "traceparent"),
        )
        prefix = "trsc" if task is AudioTask.TRANSCRIBE else "trsl"
        call = await self.orch.call(
            job,
            request_id=new_id(prefix),
            timeout_s=timeout_s(context, self.cfg),
            principal=principal,
            protocol="grpc",
            received_ns=received,
        )
        result = job.transcript(await closing(context, call, call.result))
        segments = result.segments
        return audio_pb2.TranscriptionResponse(
            id=call.request_id,
            model=req.model,
            created=call.created,
            text=transcript(segments),
            language=result.language,
            duration=result.duration_s,
            segments=[
                audio_pb2.TranscriptionSegment(
                    id=i, start=s.start, end=s.end, text=s.text, tokens=s.tokens
                )
                for i, s in enumerate(segments)
            ],
            usage=usage(call, result.completion_tokens),
            seconds=math.ceil(result.duration_s),
        )

    async def Speak(self, request: audio_pb2.SpeechRequest, context: Context) -> None:
        async def run() -> None:
            received = time.monotonic_ns()
            principal = caller(context, self.orch.keys)
            req = speech_request(request)
            traceparent = metadata(context, "traceparent")

            job = Speak(req.model, req.text, req.voice, req.speed, traceparent)
            call = await self.orch.call(
                job,
                request_id=new_id("speech"),
                timeout_s=timeout_s(context, self.cfg),
                principal=principal,
                protocol="grpc",
                received_ns=received,
            )
            await closing(context, call, lambda: self._stream(call, req.fmt, context))

        await guarded(context, "Speak", run, refusals(self.orch, "speak"))

    async def _stream(self, call: ModalCall, fmt: str, context: Context) -> None:
        """Write the audio as it comes; every write is awaited, so a slow client holds
        the stream back instead of growing a buffer."""
        audio = SpeechAudio(call)
        rate = await audio.start()
        head = wav_header(rate) if fmt == "wav" else b""
        done = False
        while not done:
            pcm, done = await audio.next()
            for chunk in _chunks(head + pcm, rate):
                await send(context, chunk, self.cfg.limits.send_timeout_s)
            head = b""
