"""Sans-IO codec between engine protocol frames and ``messages`` objects.

Encoding always goes through pycapnp builders. Decoding of the hot message,
``textResult``, uses a small reader of the standard Cap'n Proto wire format whose
field offsets are taken from the compiled schema at import time; it costs a
fraction of a pycapnp reader per frame. Anything it does not handle (several
segments, far pointers, other message kinds) is decoded by pycapnp.
"""

from __future__ import annotations

from typing import Any

from neutrino.engine.messages import (
    Cancel,
    Capability,
    EngineError,
    ErrorCode,
    FinishReason,
    Guided,
    GuidedMode,
    Hello,
    HelloAck,
    LoadModel,
    Message,
    ModelInfo,
    ModelsChanged,
    ModelState,
    Ping,
    Pong,
    Sampling,
    TextQuery,
    TextResult,
    TokenBatch,
    UnloadModel,
)
from neutrino.engine.wire.arrays import (
    pack_f32,
    pack_u32,
    pack_u64,
    unpack_f32,
    unpack_u32,
    unpack_u64,
)
from neutrino.engine.wire.builder import encode_text_query, encode_text_result
from neutrino.engine.wire.modal_codec import fill_body, fill_image, read_body, read_image
from neutrino.engine.wire.reader import DecodeError as DecodeError
from neutrino.engine.wire.reader import checked_batch, decode_canonical, decode_general
from neutrino.engine.wire.schema import PROTOCOL_VERSION, ie

_TRAVERSAL_LIMIT_WORDS = 16 * 1024 * 1024  # 128 MiB, above the 101 MB frame limit


# --------------------------------------------------------------------------- encode


def _new(request_id: int) -> Any:
    return ie.Envelope.new_message(version=PROTOCOL_VERSION, requestId=request_id)


def _fill_sampling(b: Any, s: Sampling) -> None:
    b.maxTokens = s.max_tokens
    b.temperature = s.temperature
    b.topP = s.top_p
    b.topK = s.top_k
    b.minP = s.min_p
    if s.seed is not None:
        b.seed = s.seed
        b.hasSeed = True
    if s.stop_token_ids:
        b.stopTokenIds = pack_u32(s.stop_token_ids)
    b.logprobs = s.logprobs
    b.topLogprobs = s.top_logprobs
    b.presencePenalty = s.presence_penalty
    b.frequencyPenalty = s.frequency_penalty
    b.repetitionPenalty = s.repetition_penalty
    b.ignoreEos = s.ignore_eos
    b.minTokens = s.min_tokens


# Enum values pycapnp accepts in lists: the schema's names (e.g. "embed").
_CAPABILITY_NAMES = {
    Capability(int(v)): name for name, v in ie.Capability.schema.enumerants.items()
}


def encode(request_id: int, msg: Message) -> bytes:
    """One frame (standard stream framing) carrying ``msg`` for ``request_id``."""
    if type(msg) is TextQuery and not msg.images and msg.guided is None and not msg.forced_tokens:
        return encode_text_query(request_id, msg)
    if type(msg) is TextResult and not msg.logprobs and not msg.top_logprobs:
        return encode_text_result(request_id, msg)
    return encode_capnp(request_id, msg)


def encode_capnp(request_id: int, msg: Message) -> bytes:
    """``encode`` through pycapnp's builder, for every message kind."""
    env = _new(request_id)
    body = env.body
    if isinstance(msg, TextResult):
        r = body.init("textResult")
        if msg.tokens:
            r.tokens = pack_u32(msg.tokens)
        if msg.logprobs:
            r.logprobs = pack_f32(msg.logprobs)
        if msg.top_logprobs:
            r.topLogprobs = msg.top_logprobs
            r.topTokenIds = pack_u32(msg.top_token_ids)
            r.topTokenLogprobs = pack_f32(msg.top_token_logprobs)
        r.finishReason = int(msg.finish_reason)
        r.stopTokenId = msg.stop_token_id
        r.promptTokens = msg.prompt_tokens
        r.cachedTokens = msg.cached_tokens
        r.completionTokens = msg.completion_tokens
        if msg.queue_ns or msg.prefill_ns or msg.decode_ns:
            t = r.init("timings")
            t.queueNs = msg.queue_ns
            t.prefillNs = msg.prefill_ns
            t.decodeNs = msg.decode_ns
    elif isinstance(msg, TextQuery):
        q = body.init("textQuery")
        q.model = msg.model
        q.promptTokens = pack_u32(msg.prompt_tokens)
        _fill_sampling(q.init("sampling"), msg.sampling)
        q.deadlineMs = msg.deadline_ms
        if msg.traceparent:
            q.traceparent = msg.traceparent
        if msg.images:
            images = q.init("images", len(msg.images))
            for i, img in enumerate(msg.images):
                fill_image(images[i], img)
        if msg.forced_tokens:
            q.forcedTokens = pack_u32(msg.forced_tokens)
        if msg.guided is not None:
            g = q.init("guided")
            g.mode = int(msg.guided.mode)
            g.jsonSchema = msg.guided.json_schema
            if msg.guided.choices:
                g.choices = msg.guided.choices
            if msg.guided.pattern:
                g.pattern = msg.guided.pattern
    elif isinstance(msg, TokenBatch):
        b = body.init("tokenBatch")
        b.requestIds = pack_u64(msg.request_ids)
        b.tokenCounts = pack_u32(msg.token_counts)
        b.tokens = pack_u32(msg.tokens)
    elif isinstance(msg, Cancel):
        body.init("cancel").reason = msg.reason
    elif isinstance(msg, EngineError):
        e = body.init("error")
        e.code = int(msg.code)
        e.message = msg.message
    elif isinstance(msg, Ping):
        body.init("ping").nonce = msg.nonce
    elif isinstance(msg, Pong):
        p = body.init("pong")
        p.nonce = msg.nonce
        p.running = msg.running
        p.waiting = msg.waiting
        p.cacheUsage = msg.cache_usage
    elif isinstance(msg, Hello):
        h = body.init("hello")
        h.client = msg.client
        h.protocolVersion = msg.protocol_version
        h.tokenBatches = msg.token_batches
        if msg.token:
            h.token = msg.token
    elif isinstance(msg, HelloAck):
        a = body.init("helloAck")
        a.engine = msg.engine
        a.protocolVersion = msg.protocol_version
        a.capacity = msg.capacity
        a.memoryBudget = msg.memory_budget
        a.continues = msg.continues
        a.continuesGuided = msg.continues_guided
        _fill_models(a.init("models", len(msg.models)), msg.models)
    elif isinstance(msg, LoadModel | UnloadModel):
        body.init("loadModel" if type(msg) is LoadModel else "unloadModel").name = msg.name
    elif isinstance(msg, ModelsChanged):
        _fill_models(body.init("modelsChanged").init("models", len(msg.models)), msg.models)
    elif fill_body(body, msg):
        pass
    else:  # pragma: no cover - exhaustive over Message
        raise TypeError(f"cannot encode {type(msg).__name__}")
    data: bytes = env.to_bytes()
    return data


def _fill_models(out: Any, models: list[ModelInfo]) -> None:
    for i, m in enumerate(models):
        out[i].name = m.name
        out[i].contextLength = m.context_length
        out[i].maxOutputTokens = m.max_output_tokens
        out[i].embeddingDimensions = m.embedding_dimensions
        if m.capabilities:
            out[i].capabilities = [_CAPABILITY_NAMES[c] for c in m.capabilities]
        out[i].state = int(m.state)
        out[i].sizeBytes = m.size_bytes
        out[i].audioSampleRate = m.audio_sample_rate


# --------------------------------------------------------------------------- decode (pycapnp)


def _models(models: Any) -> list[ModelInfo]:
    out: list[ModelInfo] = []
    for m in models:
        try:
            state = ModelState(m.state.raw)
        except ValueError:
            raise DecodeError(f"unknown model state {m.state.raw}") from None
        out.append(
            ModelInfo(
                m.name,
                m.contextLength,
                m.maxOutputTokens,
                tuple(Capability(c.raw) for c in m.capabilities),
                m.embeddingDimensions,
                state,
                m.sizeBytes,
                m.audioSampleRate,
            )
        )
    return out


def _sampling(s: Any) -> Sampling:
    return Sampling(
        max_tokens=s.maxTokens,
        temperature=s.temperature,
        top_p=s.topP,
        top_k=s.topK,
        min_p=s.minP,
        seed=s.seed if s.hasSeed else None,
        stop_token_ids=unpack_u32(s.stopTokenIds),
        logprobs=s.logprobs,
        top_logprobs=s.topLogprobs,
        presence_penalty=s.presencePenalty,
        frequency_penalty=s.frequencyPenalty,
        repetition_penalty=s.repetitionPenalty,
        ignore_eos=s.ignoreEos,
        min_tokens=s.minTokens,
    )


def _guided(g: Any) -> Guided:
    try:
        mode = GuidedMode(g.mode.raw)
    except ValueError:
        raise DecodeError(f"unknown guided mode {g.mode.raw}") from None
    return Guided(mode, g.jsonSchema, list(g.choices), g.pattern)


def _slow_body(body: Any) -> Message:
    kind = body.which()
    if kind == "textResult":
        r = body.textResult
        t = r.timings
        return TextResult(
            tokens=unpack_u32(r.tokens),
            finish_reason=FinishReason(r.finishReason.raw),
            logprobs=unpack_f32(r.logprobs),
            top_logprobs=r.topLogprobs,
            top_token_ids=unpack_u32(r.topTokenIds),
            top_token_logprobs=unpack_f32(r.topTokenLogprobs),
            stop_token_id=r.stopTokenId,
            prompt_tokens=r.promptTokens,
            cached_tokens=r.cachedTokens,
            completion_tokens=r.completionTokens,
            queue_ns=t.queueNs,
            prefill_ns=t.prefillNs,
            decode_ns=t.decodeNs,
        )
    if kind == "textQuery":
        q = body.textQuery
        return TextQuery(
            model=q.model,
            prompt_tokens=unpack_u32(q.promptTokens),
            sampling=_sampling(q.sampling),
            deadline_ms=q.deadlineMs,
            traceparent=q.traceparent,
            images=[read_image(img) for img in q.images],
            guided=_guided(q.guided) if q._has("guided") and q.guided.mode.raw else None,
            forced_tokens=unpack_u32(q.forcedTokens) if q.forcedTokens else (),
        )
    if kind == "tokenBatch":
        b = body.tokenBatch
        return checked_batch(
            unpack_u64(b.requestIds), unpack_u32(b.tokenCounts), unpack_u32(b.tokens)
        )
    if kind == "cancel":
        return Cancel(reason=body.cancel.reason)
    if kind == "error":
        e = body.error
        return EngineError(code=ErrorCode(e.code.raw), message=e.message)
    if kind == "ping":
        return Ping(nonce=body.ping.nonce)
    if kind == "pong":
        p = body.pong
        return Pong(p.nonce, p.running, p.waiting, p.cacheUsage)
    if kind == "hello":
        h = body.hello
        return Hello(
            client=h.client,
            protocol_version=h.protocolVersion,
            token_batches=h.tokenBatches,
            token=h.token,
        )
    if kind == "helloAck":
        a = body.helloAck
        return HelloAck(
            engine=a.engine,
            protocol_version=a.protocolVersion,
            models=_models(a.models),
            capacity=a.capacity,
            memory_budget=a.memoryBudget,
            continues=a.continues,
            continues_guided=a.continuesGuided,
        )
    if kind in ("loadModel", "unloadModel"):
        name = (body.loadModel if kind == "loadModel" else body.unloadModel).name
        return LoadModel(name) if kind == "loadModel" else UnloadModel(name)
    if kind == "modelsChanged":
        return ModelsChanged(_models(body.modelsChanged.models))
    modal = read_body(kind, body)
    if modal is not None:
        return modal
    raise DecodeError(f"unknown message kind {kind!r}")


def decode_slow(frame: bytes) -> tuple[int, Message]:
    """Decode any frame with pycapnp."""
    try:
        with ie.Envelope.from_bytes(frame, traversal_limit_in_words=_TRAVERSAL_LIMIT_WORDS) as env:
            if env.version != PROTOCOL_VERSION:
                raise DecodeError(f"protocol version {env.version}, expected {PROTOCOL_VERSION}")
            return env.requestId, _slow_body(env.body)
    except DecodeError:
        raise
    except Exception as exc:  # pycapnp raises KjException and friends
        raise DecodeError(f"malformed frame: {type(exc).__name__}") from None


def decode(frame: bytes) -> tuple[int, Message]:
    """Decode one frame into ``(request_id, message)``."""
    fast = decode_canonical(frame)
    if fast is None:
        fast = decode_general(frame)
    if fast is not None:
        return fast
    return decode_slow(frame)
