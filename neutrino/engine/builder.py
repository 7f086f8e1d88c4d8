"""A small writer of single-segment Cap'n Proto messages for the hot ``textQuery``.

pycapnp's builder costs tens of microseconds for a query; this writer lays out the
same standard wire format directly, with every field offset and default taken from
the compiled schema at import time (so the schema stays the single source of truth).
Tests check that pycapnp and the ``capnp`` tool read its output back exactly.
"""

from __future__ import annotations

import struct
from typing import Any

from neutrino.engine.arrays import pack_u32
from neutrino.engine.messages import Sampling, TextQuery, TextResult
from neutrino.engine.schema import PROTOCOL_VERSION, ie

_WIDTH = {
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "enum": 2,
    "int32": 4,
    "uint32": 4,
    "float32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
}
_CODE = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}
_F32, _F2I = struct.Struct("<f"), struct.Struct("<I")
_F64, _D2Q = struct.Struct("<d"), struct.Struct("<Q")


def _default_bits(kind: str, default: Any) -> int:
    if kind == "float32":
        bits: int = struct.unpack("<I", struct.pack("<f", default))[0]
        return bits
    if kind == "float64":
        bits = struct.unpack("<Q", struct.pack("<d", default))[0]
        return bits
    if kind == "enum":
        return int(default)
    return int(default) & ((1 << (8 * _WIDTH[kind])) - 1)


class _Layout:
    """Where each field of one struct lives, and how to write it."""

    def __init__(self, struct_type: Any) -> None:
        node = struct_type.schema.node
        self.data_words = int(node.struct.dataWordCount)
        self.ptr_count = int(node.struct.pointerCount)
        self.prims: dict[str, tuple[struct.Struct, int, int, str, Any]] = {}
        self.bools: dict[str, tuple[int, int, bool]] = {}
        self.ptrs: dict[str, int] = {}
        for f in node.struct.fields:
            if f.which() != "slot":
                continue
            kind = f.slot.type.which()
            off = int(f.slot.offset)
            dv = f.slot.defaultValue
            if kind == "bool":
                self.bools[f.name] = (off // 8, off % 8, bool(dv.bool))
            elif kind in _WIDTH:
                w = _WIDTH[kind]
                default = getattr(dv, kind if kind != "enum" else "enum")
                self.prims[f.name] = (
                    struct.Struct(_CODE[w]),
                    off * w,
                    _default_bits(kind, default),
                    kind,
                    default,
                )
            else:
                self.ptrs[f.name] = off

    @property
    def words(self) -> int:
        return self.data_words + self.ptr_count

    def put(self, buf: bytearray | memoryview, base: int, name: str, value: float | int) -> None:
        fmt, off, default, kind, default_value = self.prims[name]
        if value == default_value:
            return  # stored as zero bits
        if kind == "float32":
            bits: int = _F2I.unpack(_F32.pack(value))[0]
        elif kind == "float64":
            bits = _D2Q.unpack(_F64.pack(value))[0]
        else:
            bits = int(value) & ((1 << (8 * fmt.size)) - 1)
        bits ^= default
        if bits:
            fmt.pack_into(buf, base + off, bits)

    def put_bool(self, buf: bytearray | memoryview, base: int, name: str, value: bool) -> None:
        byte, bit, default = self.bools[name]
        if value != default:
            buf[base + byte] |= 1 << bit

    def ptr_at(self, base: int, name: str) -> int:
        """Byte position of pointer ``name`` in a struct whose data starts at ``base``."""
        return base + 8 * self.data_words + 8 * self.ptrs[name]


_ENV = _Layout(ie.Envelope)
_TQ = _Layout(ie.TextQuery)
_SMP = _Layout(ie.Sampling)
_BODY = {f.name: int(f.discriminantValue) for f in ie.Envelope.Body.schema.node.struct.fields}
_DISC_OFF = 2 * int(ie.Envelope.Body.schema.node.struct.discriminantOffset)
_Q = struct.Struct("<Q")


def _struct_ptr(at: int, target: int, layout: _Layout) -> int:
    off = (target - at - 8) // 8
    return (off << 2) | (layout.data_words << 32) | (layout.ptr_count << 48)


def _list_ptr(at: int, target: int, count: int) -> int:
    off = (target - at - 8) // 8
    return 1 | (off << 2) | (2 << 32) | (count << 35)  # element size 2: bytes


def _pad(n: int) -> int:
    return (n + 7) & ~7


def encode_text_query(request_id: int, q: TextQuery) -> bytes:
    """Frame bytes equal in meaning to ``codec.encode(request_id, q)``."""
    s: Sampling = q.sampling
    model = q.model.encode()
    trace = q.traceparent.encode()
    prompt = pack_u32(q.prompt_tokens)
    stops = pack_u32(s.stop_token_ids) if s.stop_token_ids else b""
    # Byte positions within the segment (which starts at frame byte 8).
    env = 8
    tq = env + 8 * _ENV.words
    smp = tq + 8 * _TQ.words
    model_at = smp + 8 * _SMP.words
    prompt_at = model_at + _pad(len(model) + 1)
    stops_at = prompt_at + _pad(len(prompt))
    trace_at = stops_at + _pad(len(stops))
    end = trace_at + (_pad(len(trace) + 1) if trace else 0)
    buf = bytearray(8 + end)
    seg = memoryview(buf)[8:]
    struct.pack_into("<II", buf, 0, 0, end // 8)
    _Q.pack_into(seg, 0, _struct_ptr(0, env, _ENV))
    _ENV.put(seg, env, "version", PROTOCOL_VERSION)
    _ENV.put(seg, env, "requestId", request_id)
    struct.pack_into("<H", seg, env + _DISC_OFF, _BODY["textQuery"])
    body_ptr = env + 8 * _ENV.data_words
    _Q.pack_into(seg, body_ptr, _struct_ptr(body_ptr, tq, _TQ))
    _TQ.put(seg, tq, "deadlineMs", q.deadline_ms)
    p = _TQ.ptr_at(tq, "model")
    _Q.pack_into(seg, p, _list_ptr(p, model_at, len(model) + 1))
    seg[model_at : model_at + len(model)] = model
    if prompt:
        p = _TQ.ptr_at(tq, "promptTokens")
        _Q.pack_into(seg, p, _list_ptr(p, prompt_at, len(prompt)))
        seg[prompt_at : prompt_at + len(prompt)] = prompt
    if trace:
        p = _TQ.ptr_at(tq, "traceparent")
        _Q.pack_into(seg, p, _list_ptr(p, trace_at, len(trace) + 1))
        seg[trace_at : trace_at + len(trace)] = trace
    p = _TQ.ptr_at(tq, "sampling")
    _Q.pack_into(seg, p, _struct_ptr(p, smp, _SMP))
    put = _SMP.put
    put(seg, smp, "maxTokens", s.max_tokens)
    put(seg, smp, "temperature", s.temperature)
    put(seg, smp, "topP", s.top_p)
    put(seg, smp, "topK", s.top_k)
    put(seg, smp, "minP", s.min_p)
    if s.seed is not None:
        put(seg, smp, "seed", s.seed)
        _SMP.put_bool(seg, smp, "hasSeed", True)
    _SMP.put_bool(seg, smp, "logprobs", s.logprobs)
    put(seg, smp, "topLogprobs", s.top_logprobs)
    put(seg, smp, "presencePenalty", s.presence_penalty)
    put(seg, smp, "frequencyPenalty", s.frequency_penalty)
    put(seg, smp, "repetitionPenalty", s.repetition_penalty)
    _SMP.put_bool(seg, smp, "ignoreEos", s.ignore_eos)
    put(seg, smp, "minTokens", s.min_tokens)
    if stops:
        p = _SMP.ptr_at(smp, "stopTokenIds")
        _Q.pack_into(seg, p, _list_ptr(p, stops_at, len(stops)))
        seg[stops_at : stops_at + len(stops)] = stops
    seg.release()
    return bytes(buf)


_TR = _Layout(ie.TextResult)
_TM = _Layout(ie.Timings)
_TR_DATA_AT = 8 + 8 * (1 + _ENV.words)  # frame byte of TextResult's data section
_TR_PTRS_AT = _TR_DATA_AT + 8 * _TR.data_words
_TR_FIXED = _TR_PTRS_AT + 8 * _TR.ptr_count  # frame bytes before the first list
_TR_ROOT = _struct_ptr(0, 8, _ENV)
_TR_BODY = _struct_ptr(8 + 8 * _ENV.data_words, 8 * (1 + _ENV.words), _TR)


def _tr_header() -> tuple[bytes, struct.Struct]:
    """The constant part of a textResult frame, and a packer for its variable fields."""
    head = bytearray(_TR_FIXED)
    seg = memoryview(head)[8:]
    _Q.pack_into(seg, 0, _TR_ROOT)
    _ENV.put(seg, 8, "version", PROTOCOL_VERSION)
    struct.pack_into("<H", seg, 8 + _DISC_OFF, _BODY["textResult"])
    _Q.pack_into(seg, 8 + 8 * _ENV.data_words, _TR_BODY)
    seg.release()
    order = sorted(
        (_TR.prims[n][1], n)
        for n in ("finishReason", "stopTokenId", "promptTokens", "cachedTokens",
                  "completionTokens")
    )
    fmt, pos = "<", 0
    for off, name in order:
        fmt += f"{off - pos}x" if off > pos else ""
        code = _TR.prims[name][0].format[1:]
        fmt += code
        pos = off + struct.calcsize("<" + code)
    assert [n for _, n in order] == [
        "finishReason", "stopTokenId", "promptTokens", "cachedTokens", "completionTokens"
    ], "field order of TextResult's data section changed"
    return bytes(head), struct.Struct(fmt)


_TR_HEAD, _TR_FIELDS = _tr_header()
_TR_TOKENS_PTR = _TR_PTRS_AT + 8 * _TR.ptrs["tokens"]
_TR_TIMINGS_PTR = _TR_PTRS_AT + 8 * _TR.ptrs["timings"]
_SEG_WORDS = struct.Struct("<4xI")
_QQQ = struct.Struct("<QQQ")
assert all(d == 0 for _, _, d, _, _ in _TR.prims.values()), "fields need zero defaults"
assert [_TM.prims[n][1] for n in ("queueNs", "prefillNs", "decodeNs")] == [0, 8, 16]


def encode_text_result(request_id: int, r: TextResult) -> bytes:
    """Frame bytes equal in meaning to pycapnp's for a result without logprobs.

    The mock engine's per-token path; laid out like pycapnp's builder lays it out.
    """
    tokens = pack_u32(r.tokens) if r.tokens else b""
    pad = _pad(len(tokens)) - len(tokens)
    timed = r.queue_ns or r.prefill_ns or r.decode_ns
    size = _TR_FIXED + len(tokens) + pad + (24 if timed else 0)
    buf = bytearray(_TR_HEAD)
    if tokens:
        buf += tokens
        if pad:
            buf += bytes(pad)
        off = (_TR_FIXED - _TR_TOKENS_PTR - 8) // 8
        _Q.pack_into(buf, _TR_TOKENS_PTR, 1 | (off << 2) | (2 << 32) | (len(tokens) << 35))
    if timed:
        at = len(buf)
        buf += _QQQ.pack(r.queue_ns, r.prefill_ns, r.decode_ns)
        _Q.pack_into(buf, _TR_TIMINGS_PTR, _struct_ptr(_TR_TIMINGS_PTR - 8, at - 8, _TM))
    _SEG_WORDS.pack_into(buf, 0, (size - 8) // 8)
    _Q.pack_into(buf, 8 + 8 + 8, request_id)
    _TR_FIELDS.pack_into(
        buf, _TR_DATA_AT, int(r.finish_reason), r.stop_token_id, r.prompt_tokens,
        r.cached_tokens, r.completion_tokens,
    )
    return bytes(buf)
