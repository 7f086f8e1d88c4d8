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


@dataclass(slots=True)
class ModelInfo:
    name: str
    context_length: int
    max_output_tokens: int = 0


@dataclass(slots=True)
class HelloAck:
    engine: str
    protocol_version: int
    models: list[ModelInfo]
    capacity: int


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
class TextQuery:
    model: str
    prompt_tokens: list[int]
    sampling: Sampling
    deadline_ms: int = 0
    traceparent: str = ""


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


Message = Hello | HelloAck | TextQuery | TextResult | Cancel | EngineError | Ping | Pong
