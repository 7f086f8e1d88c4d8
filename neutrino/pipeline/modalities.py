"""What embed, rerank, transcribe, translate, speak and detect requests mean, once.

A front end parses its protocol into one of these neutral requests and renders what
comes back; the request builds the engine query (token counting and input checks
included), and turns the engine's answer into the shape every protocol renders
(shape checks, ordering), so HTTP and gRPC cannot drift apart.
:meth:`Orchestrator.call` runs any of them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Protocol

from neutrino.audio.codecs import resample
from neutrino.audio.subtitles import Segment
from neutrino.audio.wav import Audio
from neutrino.engine.messages import (
    AudioQuery,
    AudioResult,
    AudioTask,
    Box,
    Capability,
    DetectQuery,
    DetectResult,
    EmbedQuery,
    EmbedResult,
    Image,
    ModalQuery,
    ModalResult,
    ModelInfo,
    RerankQuery,
    RerankResult,
    SpeechQuery,
    SpeechResult,
)
from neutrino.errors import ErrorKind, NeutrinoError, bad_request
from neutrino.pipeline.call import ModalCall
from neutrino.pipeline.inputs import checked_tokens
from neutrino.pipeline.models import ModelText
from neutrino.text.tokenizer import Tokenizer

__all__ = [
    "AudioTask",
    "Box",
    "Capability",
    "Detect",
    "Embed",
    "Image",
    "ModelInfo",
    "Rerank",
    "Speak",
    "SpeechAudio",
    "Transcribe",
    "Transcript",
]


def wrong_shape() -> NeutrinoError:
    return NeutrinoError(ErrorKind.ENGINE_ERROR, "the engine answered with the wrong shape")


class ModalJob(Protocol):
    """A modality request: Embed, Rerank, Transcribe ...
    (its class name, lowercased, is its route label in metrics)."""

    @property
    def model(self) -> str: ...

    @property
    def traceparent(self) -> str: ...

    @property
    def capability(self) -> Capability: ...

    def build(self, text: ModelText, info: ModelInfo) -> tuple[ModalQuery, int]: ...


@dataclass(frozen=True, slots=True)
class Embed:
    """Embeddings of ``inputs`` (texts or token ids), ``dimensions`` long if given."""

    model: str
    inputs: list[str | list[int]]
    dimensions: int | None = None
    traceparent: str = ""
    capability = Capability.EMBED

    def build(self, text: ModelText, info: ModelInfo) -> tuple[ModalQuery, int]:
        native = info.embedding_dimensions
        dims = self.dimensions
        if dims is not None and native and dims > native:
            raise bad_request(f"dimensions must be at most {native} for {self.model}", "dimensions")
        ids = [checked_tokens(text, info, item, "input") for item in self.inputs]
        query = EmbedQuery(
            self.model, ids, dimensions=dims or 0, normalize=True, traceparent=self.traceparent
        )
        return query, sum(len(i) for i in ids)

    def rows(self, result: ModalResult) -> list[list[float]]:
        """One vector per input, in order."""
        if not isinstance(result, EmbedResult) or len(result.rows()) != len(self.inputs):
            raise wrong_shape()
        return result.rows()


@dataclass(frozen=True, slots=True)
class Rerank:
    """``documents`` scored against ``query``; the best ``top_n`` (None: all)."""

    model: str
    query: str
    documents: list[str]
    top_n: int | None = None
    traceparent: str = ""
    capability = Capability.RERANK

    def build(self, text: ModelText, info: ModelInfo) -> tuple[ModalQuery, int]:
        q = checked_tokens(text, info, self.query, "query")
        ids = [checked_tokens(text, info, d, "documents") if d else [] for d in self.documents]
        query = RerankQuery(self.model, q, ids, self.traceparent)
        return query, len(q) * len(ids) + sum(map(len, ids))

    def ranked(self, result: ModalResult) -> list[tuple[int, float]]:
        """(document index, relevance score), best first, at most ``top_n``."""
        if not isinstance(result, RerankResult) or len(result.scores) != len(self.documents):
            raise wrong_shape()
        scores = result.scores
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        return [(i, scores[i]) for i in order[: self.top_n]]


@dataclass(frozen=True, slots=True)
class Transcript:
    segments: list[Segment]
    language: str
    duration_s: float
    completion_tokens: int


@dataclass(slots=True)
class Transcribe:
    """Speech to text (or to English, ``task`` TRANSLATE) of 16-bit mono ``pcm``."""

    model: str
    task: AudioTask
    pcm: bytes
    sample_rate: int
    language: str = ""
    prompt: str = ""
    temperature: float = 0.0
    traceparent: str = ""
    capability = Capability.TRANSCRIBE
    _tokenizer: Tokenizer | None = field(default=None, repr=False)

    def at_rate(self, rate: int) -> Transcribe:
        """This job with its audio resampled to ``rate`` (the rate its model declares)."""
        audio = resample(Audio(self.pcm, self.sample_rate), rate)
        return dataclasses.replace(self, pcm=audio.pcm, sample_rate=audio.sample_rate)

    def build(self, text: ModelText, info: ModelInfo) -> tuple[ModalQuery, int]:
        self._tokenizer = text.tokenizer
        ids = text.tokenizer.encode(self.prompt) if self.prompt else []
        # Like Whisper, keep the end of a prompt longer than half the context.
        room = info.context_length // 2
        if room and len(ids) > room:
            ids = ids[-room:]
        query = AudioQuery(
            model=self.model,
            task=self.task,
            pcm=self.pcm,
            sample_rate=self.sample_rate,
            language=self.language,
            prompt_tokens=ids,
            temperature=self.temperature,
            traceparent=self.traceparent,
        )
        return query, len(ids)

    def transcript(self, result: ModalResult) -> Transcript:
        """The segments' text decoded with the model's tokenizer; the language heard."""
        tok = self._tokenizer
        if not isinstance(result, AudioResult) or tok is None:
            raise wrong_shape()
        segments = [
            Segment(s.start_s, s.end_s, tok.decode(s.tokens), tuple(s.tokens))
            for s in result.segments
        ]
        translate = self.task is AudioTask.TRANSLATE
        language = "en" if translate else (result.language or self.language)
        return Transcript(segments, language, result.duration_s, result.completion_tokens)


@dataclass(frozen=True, slots=True)
class Speak:
    """Text to speech; the input's tokens count as the prompt."""

    model: str
    text: str
    voice: str
    speed: float = 1.0
    traceparent: str = ""
    fmt: str = "wav"  # the audio's container the client asked for ("wav", "pcm")
    capability = Capability.SPEECH

    def build(self, assets: ModelText, info: ModelInfo) -> tuple[ModalQuery, int]:
        query = SpeechQuery(
            model=self.model,
            text=self.text,
            voice=self.voice,
            speed=self.speed,
            traceparent=self.traceparent,
        )
        return query, len(assets.tokenizer.encode(self.text))


class SpeechAudio:
    """A speech call's audio as it comes: one sample rate for the whole stream."""

    __slots__ = ("_call", "_pending", "rate")

    def __init__(self, call: ModalCall) -> None:
        self._call = call
        self._pending: list[ModalResult] = []
        self.rate = 0

    async def start(self) -> int:
        """The sample rate, once the first audio came (an error before any audio raises)."""
        await self._call.wait()
        self._pending = self._call.take()
        if not self._pending:
            raise self._ended("the engine sent no audio")
        first = self._pending[0]
        if not isinstance(first, SpeechResult) or first.sample_rate <= 0:
            raise wrong_shape()
        self.rate = first.sample_rate
        return self.rate

    async def next(self) -> tuple[bytes, bool]:
        """The PCM that came since the last call, and whether the audio is complete."""
        if not self._pending:
            await self._call.wait()
            self._pending = self._call.take()
            if not self._pending:
                raise self._ended("the engine ended the audio early")
        pcm = bytearray()
        done = False
        for r in self._pending:
            if not isinstance(r, SpeechResult) or r.sample_rate != self.rate:
                raise NeutrinoError(ErrorKind.ENGINE_ERROR, "the engine changed the audio format")
            pcm += r.pcm
            done = done or r.final
        self._pending = []
        return bytes(pcm), done

    def _ended(self, why: str) -> NeutrinoError:
        err = self._call.error
        return err.fresh() if err is not None else NeutrinoError(ErrorKind.ENGINE_ERROR, why)


@dataclass(frozen=True, slots=True)
class Detect:
    """Objects found in ``image`` with a score of at least ``threshold``."""

    model: str
    image: Image
    threshold: float = 0.0
    traceparent: str = ""
    capability = Capability.DETECT

    def build(self, text: ModelText, info: ModelInfo) -> tuple[ModalQuery, int]:
        return DetectQuery(self.model, self.image, self.threshold, self.traceparent), 0

    def boxes(self, result: ModalResult) -> list[Box]:
        if not isinstance(result, DetectResult):
            raise wrong_shape()
        return result.boxes
