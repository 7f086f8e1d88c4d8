"""Sans-IO answers of the mock engine to the modality queries.

Everything is deterministic and plausible enough for tests to assert on:

* embeddings: a vector per input seeded by a hash of its token ids, of the requested
  dimension, L2-normalised when asked;
* rerank: the share of the query's distinct tokens found in each document;
* audio: a transcript (the script's reply for the model if any, else a sentence that
  states the audio's duration), cut into segments spread over the audio;
* speech: a sine tone lasting 60 ms per character (scaled by ``speed``), as PCM chunks;
* detection: one "object" box over the centre half of the image, and a "frame" box
  over the whole image whose label carries the size the engine received.
"""

from __future__ import annotations

import hashlib
import math
import random
import struct
from array import array

from mocks.mock_ie.core import MockEngine, MockModel, Tokenizer
from neutrino.engine.messages import (
    AudioQuery,
    AudioResult,
    AudioSegment,
    AudioTask,
    Box,
    Capability,
    DetectQuery,
    DetectResult,
    EmbedQuery,
    EmbedResult,
    EngineError,
    ErrorCode,
    Message,
    RerankQuery,
    RerankResult,
    SpeechQuery,
    SpeechResult,
)

SPEECH_RATE = 24000
SPEECH_SECONDS_PER_CHAR = 0.06
SPEECH_CHUNK_S = 0.25
MAX_EMBED_INPUTS = 2048


def refuse(model: MockModel | None, name: str, capability: Capability) -> EngineError | None:
    """The error a real engine sends for an unknown model or one that cannot do this."""
    if model is None:
        return EngineError(ErrorCode.UNKNOWN_MODEL, f"unknown model {name!r}")
    if capability not in model.capabilities:
        return EngineError(
            ErrorCode.UNSUPPORTED, f"model {name!r} does not support {capability.name.lower()}"
        )
    return None


def embed(model: MockModel, q: EmbedQuery) -> EmbedResult | EngineError:
    native = model.embedding_dimensions or 384
    dims = q.dimensions or native
    if not q.inputs or len(q.inputs) > MAX_EMBED_INPUTS:
        return EngineError(ErrorCode.INVALID_REQUEST, "between 1 and 2048 inputs are accepted")
    if dims > native:
        return EngineError(
            ErrorCode.INVALID_REQUEST, f"dimensions must be at most {native} for {model.name}"
        )
    if any(len(ids) > model.context_length for ids in q.inputs):
        return EngineError(ErrorCode.CONTEXT_LENGTH, "an input exceeds the context length")
    vectors: list[float] = []
    for ids in q.inputs:
        seed = hashlib.blake2b(array("I", ids).tobytes(), digest_size=8).digest()
        rng = random.Random(int.from_bytes(seed, "little"))
        row = [rng.gauss(0.0, 1.0) for _ in range(native)][:dims]
        if q.normalize:
            norm = math.sqrt(sum(v * v for v in row)) or 1.0
            row = [v / norm for v in row]
        vectors.extend(struct.unpack(f"<{dims}f", struct.pack(f"<{dims}f", *row)))
    return EmbedResult(dims, vectors, prompt_tokens=sum(len(ids) for ids in q.inputs))


def rerank(model: MockModel, q: RerankQuery) -> RerankResult | EngineError:
    if not q.query or not q.documents:
        return EngineError(ErrorCode.INVALID_REQUEST, "a query and documents are required")
    wanted = set(q.query)
    scores = [len(wanted & set(doc)) / len(wanted) for doc in q.documents]
    tokens = len(q.query) * len(q.documents) + sum(len(d) for d in q.documents)
    return RerankResult(scores, prompt_tokens=tokens)


def transcribe(
    model: MockModel, tok: Tokenizer, q: AudioQuery, scripted: str | None
) -> AudioResult | EngineError:
    if q.sample_rate <= 0 or len(q.pcm) % 2:
        return EngineError(ErrorCode.INVALID_REQUEST, "audio must be 16-bit PCM with a rate")
    duration = len(q.pcm) / 2 / q.sample_rate
    if scripted is not None:
        text = scripted
    else:
        text = f"This is a mock transcript of {duration:.2f} seconds of audio."
        if q.task is AudioTask.TRANSLATE:
            text = "Translated: " + text
    sentences = [s.strip() for s in text.replace("? ", "?\n").replace(". ", ".\n").splitlines()]
    sentences = [s for s in sentences if s] or [""]
    step = duration / len(sentences)
    segments = []
    for i, sentence in enumerate(sentences):
        piece = sentence if i == 0 else " " + sentence
        segments.append(AudioSegment(i * step, (i + 1) * step, tok.encode(piece)))
    completion = sum(len(s.tokens) for s in segments)
    return AudioResult(q.language or "en", duration, segments, completion)


def speech(model: MockModel, q: SpeechQuery) -> list[SpeechResult] | EngineError:
    if not q.text:
        return EngineError(ErrorCode.INVALID_REQUEST, "there is no text to speak")
    if not 0.25 <= q.speed <= 4.0:
        return EngineError(ErrorCode.INVALID_REQUEST, "speed must be between 0.25 and 4")
    rate = q.sample_rate or SPEECH_RATE
    total = int(len(q.text) * SPEECH_SECONDS_PER_CHAR / q.speed * rate)
    pitch = (
        180.0
        + int.from_bytes(hashlib.blake2b(q.voice.encode(), digest_size=2).digest(), "little") % 200
    )
    chunk = max(1, int(SPEECH_CHUNK_S * rate))
    out: list[SpeechResult] = []
    for start in range(0, total, chunk):
        n = min(chunk, total - start)
        samples = array(
            "h",
            (int(8000 * math.sin(2 * math.pi * pitch * (start + i) / rate)) for i in range(n)),
        )
        out.append(SpeechResult(samples.tobytes(), rate))
    out.append(SpeechResult(b"", rate, final=True))
    return out


def detect(model: MockModel, q: DetectQuery) -> DetectResult | EngineError:
    w, h = q.image.width, q.image.height
    if w <= 0 or h <= 0 or not q.image.data:
        return EngineError(ErrorCode.INVALID_REQUEST, "an image with a size is required")
    boxes = [
        Box("object", 0.9, w / 4, h / 4, 3 * w / 4, 3 * h / 4),
        Box(f"frame {w}x{h}", 0.5, 0.0, 0.0, float(w), float(h)),
    ]
    return DetectResult([b for b in boxes if b.score >= q.threshold])


Query = EmbedQuery | RerankQuery | AudioQuery | SpeechQuery | DetectQuery


def modal_answer(engine: MockEngine, q: Query) -> list[Message] | EngineError:
    """The frames answering ``q`` (in order), or the error to send instead."""
    model = engine.model(q.model)
    if isinstance(q, EmbedQuery):
        err = refuse(model, q.model, Capability.EMBED)
        one: Message | EngineError = err if err else embed(_m(model), q)
    elif isinstance(q, RerankQuery):
        err = refuse(model, q.model, Capability.RERANK)
        one = err if err else rerank(_m(model), q)
    elif isinstance(q, AudioQuery):
        err = refuse(model, q.model, Capability.TRANSCRIBE)
        if err:
            return err
        m = _m(model)
        tok = engine.tokenizer(m.name)
        scripted = engine.scripted_reply(m, tok.decode(q.prompt_tokens))
        one = transcribe(m, tok, q, scripted)
    elif isinstance(q, SpeechQuery):
        err = refuse(model, q.model, Capability.SPEECH)
        if err:
            return err
        chunks = speech(_m(model), q)
        return chunks if isinstance(chunks, EngineError) else list(chunks)
    else:
        err = refuse(model, q.model, Capability.DETECT)
        one = err if err else detect(_m(model), q)
    return one if isinstance(one, EngineError) else [one]


def _m(model: MockModel | None) -> MockModel:
    assert model is not None  # refuse() returned an error otherwise
    return model
