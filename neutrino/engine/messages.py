"""Plain Python forms of the engine protocol messages (see ``schemas/ie.capnp``).

The codec turns these into Cap'n Proto frames and back; nothing else in Neutrino
touches pycapnp objects.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field


class FinishReason(enum.IntEnum):
    NONE = 0
    STOP = 1
    LENGTH = 2
    CANCELLED = 3


class ErrorCode(enum.IntEnum):
    INTERNAL = 0
    INVALID_REQUEST = 1
    UNKNOWN_MODEL = 2
    OVERLOADED = 3
    CONTEXT_LENGTH = 4
    UNSUPPORTED = 5
    PROTOCOL = 6


@dataclass(slots=True)
class Hello:
    client: str
    protocol_version: int
    token_batches: bool = False  # the client accepts TokenBatch frames
    token: str = field(default="", repr=False)  # an engine on TCP asks for its secret


class Capability(enum.IntEnum):
    GENERATE = 0
    VISION = 1
    EMBED = 2
    RERANK = 3
    TRANSCRIBE = 4
    SPEECH = 5
    DETECT = 6


class ModelState(enum.IntEnum):
    LOADED = 0
    UNLOADED = 1  # known to its engine, which loads it when asked (LoadModel)
    LOADING = 2


@dataclass(slots=True)
class ModelInfo:
    name: str
    context_length: int
    max_output_tokens: int = 0
    capabilities: tuple[Capability, ...] = ()  # empty: generation only
    embedding_dimensions: int = 0
    state: ModelState = ModelState.LOADED
    size_bytes: int = 0  # what it takes loaded, against its engine's memory budget
    audio_sample_rate: int = 0  # transcribe models: their audio's rate (0: any)

    def can(self, capability: Capability) -> bool:
        if not self.capabilities:
            return capability is Capability.GENERATE
        return capability in self.capabilities


@dataclass(slots=True)
class HelloAck:
    engine: str
    protocol_version: int
    models: list[ModelInfo]
    capacity: int
    memory_budget: int = 0  # bytes its loaded models may take (0: no loading on demand)
    continues: bool = False  # it honours TextQuery.forced_tokens (a migrated answer goes on)
    continues_guided: bool = False  # for guided queries too (the constraint advanced)


@dataclass(slots=True)
class LoadModel:
    """Client to engine: load ``name``; the engine answers with ModelsChanged (or an
    EngineError) under the same request id."""

    name: str


@dataclass(slots=True)
class UnloadModel:
    name: str


@dataclass(slots=True)
class ModelsChanged:
    """Engine to client: every model it knows, with its state (request id 0 when it is
    not the answer to a LoadModel or UnloadModel)."""

    models: list[ModelInfo]


@dataclass(slots=True)
class Sampling:
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    seed: int | None = None
    stop_token_ids: list[int] = field(default_factory=list)
    logprobs: bool = False
    top_logprobs: int = 0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    ignore_eos: bool = False
    min_tokens: int = 0


@dataclass(slots=True)
class Image:
    data: bytes  # encoded (PNG/JPEG), as checked by Neutrino
    mime_type: str
    width: int
    height: int


class GuidedMode(enum.IntEnum):
    NONE = 0
    JSON_OBJECT = 1
    JSON_SCHEMA = 2
    CHOICE = 3
    REGEX = 4
    GRAMMAR = 5


@dataclass(slots=True)
class Guided:
    mode: GuidedMode = GuidedMode.NONE
    json_schema: str = ""
    choices: list[str] = field(default_factory=list)  # mode CHOICE
    pattern: str = ""  # mode REGEX: the regular expression; GRAMMAR: the grammar


@dataclass(slots=True)
class TextQuery:
    model: str
    prompt_tokens: list[int]
    sampling: Sampling
    deadline_ms: int = 0
    traceparent: str = ""
    images: list[Image] = field(default_factory=list)
    guided: Guided | None = None
    # The answer so far, from another replica (a migrated request): the engine takes these
    # as its own output after the prompt and goes on (see schemas/ie.capnp).
    forced_tokens: Sequence[int] = ()


@dataclass(slots=True)
class TextResult:
    tokens: list[int]
    finish_reason: FinishReason = FinishReason.NONE
    # Immutable empty defaults keep construction cheap on the per-token path.
    logprobs: Sequence[float] = ()
    top_logprobs: int = 0
    top_token_ids: Sequence[int] = ()
    top_token_logprobs: Sequence[float] = ()
    stop_token_id: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    queue_ns: int = 0
    prefill_ns: int = 0
    decode_ns: int = 0

    @property
    def plain(self) -> bool:
        """A mid-stream result of token ids only: what a TokenBatch entry stands for."""
        return (
            self.finish_reason is FinishReason.NONE
            and not self.logprobs
            and not self.top_logprobs
            and not (self.stop_token_id or self.prompt_tokens or self.cached_tokens)
            and not (self.completion_tokens or self.queue_ns or self.prefill_ns or self.decode_ns)
        )


@dataclass(slots=True)
class TokenBatch:
    """Plain mid-stream results of many requests in one frame (request id 0).

    Entry ``i`` stands for ``TextResult(tokens=...)`` of ``request_ids[i]``, taking the
    next ``token_counts[i]`` ids of ``tokens``.
    """

    request_ids: list[int]
    token_counts: list[int]
    tokens: list[int]

    def entries(self) -> list[tuple[int, list[int]]]:
        out: list[tuple[int, list[int]]] = []
        pos = 0
        for rid, n in zip(self.request_ids, self.token_counts, strict=True):
            out.append((rid, self.tokens[pos : pos + n]))
            pos += n
        return out


@dataclass(slots=True)
class Cancel:
    reason: str = ""


@dataclass(slots=True)
class EngineError:
    code: ErrorCode
    message: str


@dataclass(slots=True)
class Ping:
    nonce: int


@dataclass(slots=True)
class Pong:
    nonce: int
    running: int = 0  # the engine's own load, from every client (0: not reported)
    waiting: int = 0
    cache_usage: float = 0.0


# ----------------------------------------------------------------------------- modalities


@dataclass(slots=True)
class EmbedQuery:
    model: str
    inputs: list[list[int]]
    dimensions: int = 0
    normalize: bool = True
    traceparent: str = ""


@dataclass(slots=True)
class EmbedResult:
    dimensions: int
    vectors: list[float]  # row-major, len(inputs) * dimensions
    prompt_tokens: int = 0

    def rows(self) -> list[list[float]]:
        d = self.dimensions
        return [self.vectors[i : i + d] for i in range(0, len(self.vectors), d)] if d else []


@dataclass(slots=True)
class RerankQuery:
    model: str
    query: list[int]
    documents: list[list[int]]
    traceparent: str = ""


@dataclass(slots=True)
class RerankResult:
    scores: list[float]
    prompt_tokens: int = 0


class AudioTask(enum.IntEnum):
    TRANSCRIBE = 0
    TRANSLATE = 1


@dataclass(slots=True)
class AudioQuery:
    model: str
    task: AudioTask
    pcm: bytes  # 16-bit LE mono
    sample_rate: int
    language: str = ""
    prompt_tokens: list[int] = field(default_factory=list)
    temperature: float = 0.0
    max_tokens: int = 0
    traceparent: str = ""


@dataclass(slots=True)
class AudioSegment:
    start_s: float
    end_s: float
    tokens: list[int]


@dataclass(slots=True)
class AudioResult:
    language: str
    duration_s: float
    segments: list[AudioSegment]
    completion_tokens: int = 0


@dataclass(slots=True)
class SpeechQuery:
    model: str
    text: str
    voice: str = ""
    sample_rate: int = 0
    speed: float = 1.0
    traceparent: str = ""


@dataclass(slots=True)
class SpeechResult:
    pcm: bytes
    sample_rate: int
    final: bool = False


@dataclass(slots=True)
class DetectQuery:
    model: str
    image: Image
    threshold: float = 0.0
    traceparent: str = ""


@dataclass(slots=True)
class Box:
    label: str
    score: float
    x0: float
    y0: float
    x1: float
    y1: float


@dataclass(slots=True)
class DetectResult:
    boxes: list[Box]


Query = TextQuery | EmbedQuery | RerankQuery | AudioQuery | SpeechQuery | DetectQuery
ModalQuery = EmbedQuery | RerankQuery | AudioQuery | SpeechQuery | DetectQuery
ModalResult = EmbedResult | RerankResult | AudioResult | SpeechResult | DetectResult
MODAL_RESULTS = (EmbedResult, RerankResult, AudioResult, SpeechResult, DetectResult)
Result = TextResult | EmbedResult | RerankResult | AudioResult | SpeechResult | DetectResult
Message = (
    Hello | HelloAck | Query | Result | TokenBatch | Cancel | EngineError | Ping | Pong
    | LoadModel | UnloadModel | ModelsChanged
)  # fmt: skip
MODAL_QUERIES = (EmbedQuery, RerankQuery, AudioQuery, SpeechQuery, DetectQuery)


def is_final(msg: Message) -> bool:
    """Whether ``msg`` is the last frame of its request: a text result with a finish
    reason, a modality result (speech: its final chunk), an error."""
    if type(msg) is TextResult:
        return msg.finish_reason is not FinishReason.NONE
    if isinstance(msg, SpeechResult):
        return msg.final
    return isinstance(msg, (EngineError, ModelsChanged, *MODAL_RESULTS))
