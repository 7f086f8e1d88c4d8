"""pycapnp encoding and decoding of the modality messages (embed, rerank, audio,
speech, detection) and of images. The text messages live in ``codec``; these are
not on a per-token path, so pycapnp's builder and reader are fast enough.
"""

from __future__ import annotations

from typing import Any

from neutrino.engine.messages import (
    AudioQuery,
    AudioResult,
    AudioSegment,
    AudioTask,
    Box,
    DetectQuery,
    DetectResult,
    EmbedQuery,
    EmbedResult,
    Image,
    Message,
    RerankQuery,
    RerankResult,
    SpeechQuery,
    SpeechResult,
)
from neutrino.engine.wire.arrays import pack_f32, pack_u32, unpack_f32, unpack_u32


def fill_image(b: Any, img: Image) -> None:
    b.data = img.data
    b.mimeType = img.mime_type
    b.width = img.width
    b.height = img.height


def read_image(r: Any) -> Image:
    return Image(data=bytes(r.data), mime_type=r.mimeType, width=r.width, height=r.height)


def _data_list(b: Any, name: str, rows: list[list[int]]) -> None:
    out = b.init(name, len(rows))
    for i, row in enumerate(rows):
        out[i] = pack_u32(row)


def fill_body(body: Any, msg: Message) -> bool:
    """Write ``msg`` into the envelope body if it is a modality message."""
    if isinstance(msg, EmbedQuery):
        q = body.init("embedQuery")
        q.model = msg.model
        _data_list(q, "inputs", msg.inputs)
        q.dimensions = msg.dimensions
        q.normalize = msg.normalize
        q.traceparent = msg.traceparent
    elif isinstance(msg, EmbedResult):
        r = body.init("embedResult")
        r.dimensions = msg.dimensions
        r.vectors = pack_f32(msg.vectors)
        r.promptTokens = msg.prompt_tokens
    elif isinstance(msg, RerankQuery):
        q = body.init("rerankQuery")
        q.model = msg.model
        q.query = pack_u32(msg.query)
        _data_list(q, "documents", msg.documents)
        q.traceparent = msg.traceparent
    elif isinstance(msg, RerankResult):
        r = body.init("rerankResult")
        r.scores = pack_f32(msg.scores)
        r.promptTokens = msg.prompt_tokens
    elif isinstance(msg, AudioQuery):
        q = body.init("audioQuery")
        q.model = msg.model
        q.task = int(msg.task)
        q.pcm = msg.pcm
        q.sampleRate = msg.sample_rate
        q.language = msg.language
        q.promptTokens = pack_u32(msg.prompt_tokens)
        q.temperature = msg.temperature
        q.maxTokens = msg.max_tokens
        q.traceparent = msg.traceparent
    elif isinstance(msg, AudioResult):
        r = body.init("audioResult")
        r.language = msg.language
        r.durationS = msg.duration_s
        r.completionTokens = msg.completion_tokens
        segs = r.init("segments", len(msg.segments))
        for i, seg in enumerate(msg.segments):
            segs[i].startS = seg.start_s
            segs[i].endS = seg.end_s
            segs[i].tokens = pack_u32(seg.tokens)
    elif isinstance(msg, SpeechQuery):
        q = body.init("speechQuery")
        q.model = msg.model
        q.text = msg.text
        q.voice = msg.voice
        q.sampleRate = msg.sample_rate
        q.speed = msg.speed
        q.traceparent = msg.traceparent
    elif isinstance(msg, SpeechResult):
        r = body.init("speechResult")
        r.pcm = msg.pcm
        r.sampleRate = msg.sample_rate
        r.final = msg.final
    elif isinstance(msg, DetectQuery):
        q = body.init("detectQuery")
        q.model = msg.model
        fill_image(q.init("image"), msg.image)
        q.threshold = msg.threshold
        q.traceparent = msg.traceparent
    elif isinstance(msg, DetectResult):
        r = body.init("detectResult")
        boxes = r.init("boxes", len(msg.boxes))
        for i, box in enumerate(msg.boxes):
            b = boxes[i]
            b.label = box.label
            b.score = box.score
            b.x0, b.y0, b.x1, b.y1 = box.x0, box.y0, box.x1, box.y1
    else:
        return False
    return True


def read_body(kind: str, body: Any) -> Message | None:
    """The modality message in the envelope body, or None for another kind."""
    if kind == "embedQuery":
        q = body.embedQuery
        return EmbedQuery(
            model=q.model,
            inputs=[unpack_u32(d) for d in q.inputs],
            dimensions=q.dimensions,
            normalize=q.normalize,
            traceparent=q.traceparent,
        )
    if kind == "embedResult":
        r = body.embedResult
        return EmbedResult(
            dimensions=r.dimensions, vectors=unpack_f32(r.vectors), prompt_tokens=r.promptTokens
        )
    if kind == "rerankQuery":
        q = body.rerankQuery
        return RerankQuery(
            model=q.model,
            query=unpack_u32(q.query),
            documents=[unpack_u32(d) for d in q.documents],
            traceparent=q.traceparent,
        )
    if kind == "rerankResult":
        r = body.rerankResult
        return RerankResult(scores=unpack_f32(r.scores), prompt_tokens=r.promptTokens)
    if kind == "audioQuery":
        q = body.audioQuery
        return AudioQuery(
            model=q.model,
            task=AudioTask(q.task.raw),
            pcm=bytes(q.pcm),
            sample_rate=q.sampleRate,
            language=q.language,
            prompt_tokens=unpack_u32(q.promptTokens),
            temperature=q.temperature,
            max_tokens=q.maxTokens,
            traceparent=q.traceparent,
        )
    if kind == "audioResult":
        r = body.audioResult
        return AudioResult(
            language=r.language,
            duration_s=r.durationS,
            segments=[AudioSegment(s.startS, s.endS, unpack_u32(s.tokens)) for s in r.segments],
            completion_tokens=r.completionTokens,
        )
    if kind == "speechQuery":
        q = body.speechQuery
        return SpeechQuery(
            model=q.model,
            text=q.text,
            voice=q.voice,
            sample_rate=q.sampleRate,
            speed=q.speed,
            traceparent=q.traceparent,
        )
    if kind == "speechResult":
        r = body.speechResult
        return SpeechResult(pcm=bytes(r.pcm), sample_rate=r.sampleRate, final=r.final)
    if kind == "detectQuery":
        q = body.detectQuery
        return DetectQuery(
            model=q.model,
            image=read_image(q.image),
            threshold=q.threshold,
            traceparent=q.traceparent,
        )
    if kind == "detectResult":
        return DetectResult(
            boxes=[Box(b.label, b.score, b.x0, b.y0, b.x1, b.y1) for b in body.detectResult.boxes]
        )
    return None
