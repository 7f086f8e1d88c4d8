"""The ``neutrino.v1.Audio`` servicer: ``Transcribe``, ``Translate`` and ``Speak``.

The gRPC twins of ``POST /v1/audio/transcriptions``, ``/v1/audio/translations`` and
``/v1/audio/speech``, with HTTP's rules (``pipeline/modal_rules.py``; params are the
proto's field names): the audio is a WAV file decoded by :mod:`neutrino.audio.wav` to
16-bit mono PCM, the transcript is the segments' text as HTTP renders it, and speech
streams the bytes HTTP would send (for ``wav``, the unknown-length header first) as the
engine produces them. A Speak call that goes away (client gone, deadline passed)
reaches ``close()``, so the engine gets one cancel.
"""

from __future__ import annotations

import functools
import math

from neutrino.audio.codecs import SpeechEncoder
from neutrino.audio.subtitles import transcript
from neutrino.frontends.common import uploaded_audio
from neutrino.frontends.grpc.calls import Arrival, Context, Service, closing, send
from neutrino.frontends.grpc.modal import usage
from neutrino.frontends.grpc.stubs import audio_pb2, audio_pb2_grpc
from neutrino.pipeline import modal_rules as rules
from neutrino.pipeline.call import ModalCall
from neutrino.pipeline.modalities import AudioTask, Speak, SpeechAudio, Transcribe

MAX_CHUNK_BYTES = 1024 * 1024  # per SpeechChunk, far below the message size limit
_OFFLOAD_BYTES = 256 * 1024  # decode bigger uploads off the event loop


# ----------------------------------------------------------------------------- speech to text


def transcription_job(
    msg: audio_pb2.TranscriptionRequest, task: AudioTask, traceparent: str = ""
) -> Transcribe:
    """The job of a TranscriptionRequest, without its audio yet (the HTTP API's rules)."""
    temperature = float(msg.temperature) if msg.HasField("temperature") else None
    return rules.transcribe(
        msg.model,
        task,
        language=msg.language,
        prompt=msg.prompt,
        temperature=temperature,
        traceparent=traceparent,
    )


# ----------------------------------------------------------------------------- text to speech


def speech_job(msg: audio_pb2.SpeechRequest, traceparent: str = "") -> Speak:
    """The job of a SpeechRequest: the HTTP API's rules, with the proto's field names
    (``text``, ``format``) in its errors."""
    speed = float(msg.speed) if msg.HasField("speed") else None
    return rules.speak(
        msg.model,
        msg.text,
        msg.voice,
        msg.format,
        speed,
        at_text=("text",),
        at_format=("format",),
        traceparent=traceparent,
    )


def _chunks(data: bytes, rate: int) -> list[audio_pb2.SpeechChunk]:
    return [
        audio_pb2.SpeechChunk(pcm=data[i : i + MAX_CHUNK_BYTES], sample_rate=rate)
        for i in range(0, len(data), MAX_CHUNK_BYTES)
    ]


# ----------------------------------------------------------------------------- the service


class AudioService(Service, audio_pb2_grpc.AudioServicer):
    async def Transcribe(
        self, request: audio_pb2.TranscriptionRequest, context: Context
    ) -> audio_pb2.TranscriptionResponse | None:
        return await self._transcription(request, context, AudioTask.TRANSCRIBE, "Transcribe")

    async def Translate(
        self, request: audio_pb2.TranscriptionRequest, context: Context
    ) -> audio_pb2.TranscriptionResponse | None:
        return await self._transcription(request, context, AudioTask.TRANSLATE, "Translate")

    async def _transcription(
        self, msg: audio_pb2.TranscriptionRequest, context: Context, task: AudioTask, what: str
    ) -> audio_pb2.TranscriptionResponse | None:
        run = functools.partial(self._audio, msg, context, task)
        return await self.guarded(context, what, "transcribe", run)

    async def _audio(
        self,
        msg: audio_pb2.TranscriptionRequest,
        context: Context,
        task: AudioTask,
        arrival: Arrival,
    ) -> audio_pb2.TranscriptionResponse:
        job = transcription_job(msg, task, arrival.traceparent)
        limit = self.cfg.limits.max_audio_seconds
        audio = await uploaded_audio(msg.audio, self.orch.audio_rate(job.model), limit, "audio")
        job = rules.with_audio(job, audio.pcm, audio.sample_rate)
        prefix = "trsc" if task is AudioTask.TRANSCRIBE else "trsl"
        call, answer = await self.answer(job, prefix, context, arrival)
        result = job.transcript(answer)
        segments = result.segments
        return audio_pb2.TranscriptionResponse(
            id=call.request_id,
            model=job.model,
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
        async def run(arrival: Arrival) -> None:
            job = speech_job(request, arrival.traceparent)
            call = await self.call(job, "speech", context, arrival)
            await closing(context, call, lambda: self._stream(call, job.fmt, context))

        await self.guarded(context, "Speak", "speak", run)

    async def _stream(self, call: ModalCall, fmt: str, context: Context) -> None:
        """Write the audio as it comes; every write is awaited, so a slow client holds
        the stream back instead of growing a buffer."""
        audio = SpeechAudio(call)
        rate = await audio.start()
        encoder = SpeechEncoder(fmt, rate)
        done = False
        while not done:
            pcm, done = await audio.next()
            for chunk in _chunks(encoder.encode(pcm, done), rate):
                await send(context, chunk, self.cfg.limits.send_timeout_s)
