"""A small writer of single-segment Cap'n Proto messages for the hot ``textQuery``.

pycapnp's builder costs tens of microseconds for a query; this writer lays out the
same standard wire format directly, with every field offset and default taken from
the compiled schema at import time (so the schema stays the single source of truth).
Tests check that pycapnp and the ``capnp`` tool read its output back exactly.
"""

from __future__ import annotations

import struct
from typing import Any

from neutrino.engine.messages import Sampling, TextQuery, TextResult
from neutrino.engine.wire.arrays import pack_u32
from neutrino.engine.wire.schema import PROTOCOL_VERSION, ie

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

    def data_packer(self, names: list[str]) -> tuple[struct.Struct, int, list[str]]:
        """A packer writing ``names`` (all primitive fields) raw, in offset order.

        Returns the struct, the integer of default bits to XOR the packed section
        with (Cap'n Proto stores ``value XOR default``), and the field order. Bool
        bytes appear in the order as pseudo-fields named ``"@<byte>"``.
        """
        items: list[tuple[int, str, str]] = []
        for n in names:
            packer, off, _, kind, _ = self.prims[n]
            code = {"float32": "f", "float64": "d"}.get(kind, packer.format[1:])
            if kind.startswith("int"):
                code = code.lower()
            items.append((off, code, n))
        for byte in sorted({b for b, _, _ in self.bools.values()}):
            items.append((byte, "B", f"@{byte}"))
        items.sort()
        fmt, pos = "<", 0
        for off, code, _ in items:
            if off < pos:
                raise RuntimeError("overlapping fields")
            fmt += f"{off - pos}x" if off > pos else ""
            fmt += code
            pos = off + struct.calcsize("<" + code)
        size = 8 * self.data_words
        fmt += f"{size - pos}x"
        defaults = bytearray(size)
        for n in names:
            f, off, bits, _, _ = self.prims[n]
            f.pack_into(defaults, off, bits)
        for byte, bit, default in self.bools.values():
            if default:
                defaults[byte] |= 1 << bit
        return struct.Struct(fmt), int.from_bytes(defaults, "little"), [n for _, _, n in items]

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


_SMP_STRUCT, _SMP_DEFAULTS, _SMP_ORDER = _SMP.data_packer(
    [
        "maxTokens",
        "temperature",
        "topP",
        "topK",
        "minP",
        "seed",
        "topLogprobs",
        "presencePenalty",
        "frequencyPenalty",
        "repetitionPenalty",
        "minTokens",
    ]
)
_SMP_SIZE = 8 * _SMP.data_words
_SMP_BOOL_BYTES = {n for n in _SMP_ORDER if n.startswith("@")}
assert len(_SMP_BOOL_BYTES) == 1, "Sampling's bools are expected in one byte"
_SMP_HAS_SEED = 1 << _SMP.bools["hasSeed"][1]
_SMP_LOGPROBS = 1 << _SMP.bools["logprobs"][1]
_SMP_IGNORE_EOS = 1 << _SMP.bools["ignoreEos"][1]


def _sampling_data(s: Sampling) -> bytes:
    """Sampling's data section in one pack (then XOR with the schema's defaults)."""
    flags = (
        (_SMP_HAS_SEED if s.seed is not None else 0)
        | (_SMP_LOGPROBS if s.logprobs else 0)
        | (_SMP_IGNORE_EOS if s.ignore_eos else 0)
    )
    values = {
        "maxTokens": s.max_tokens,
        "temperature": s.temperature,
        "topP": s.top_p,
        "topK": s.top_k,
        "minP": s.min_p,
        "seed": s.seed or 0,
        "topLogprobs": s.top_logprobs,
        "presencePenalty": s.presence_penalty,
        "frequencyPenalty": s.frequency_penalty,
        "repetitionPenalty": s.repetition_penalty,
        "minTokens": s.min_tokens,
    }
    raw = _SMP_STRUCT.pack(*[flags if n[0] == "@" else values[n] for n in _SMP_ORDER])
    return (int.from_bytes(raw, "little") ^ _SMP_DEFAULTS).to_bytes(_SMP_SIZE, "little")


# Fixed positions of a textQuery frame (frame bytes; the segment starts at byte 8).
_TQ_ENV = 16  # Envelope data
_TQ_AT = 8 + 8 * (1 + _ENV.words)  # TextQuery data
_SMP_AT = _TQ_AT + 8 * _TQ.words  # Sampling data
_BLOBS_AT = _SMP_AT + 8 * _SMP.words  # first list
_TQ_REQ = _TQ_ENV + _ENV.prims["requestId"][1]
_TQ_DEADLINE = _TQ_AT + _TQ.prims["deadlineMs"][1]
_TQ_MODEL = _TQ_AT + 8 * _TQ.data_words + 8 * _TQ.ptrs["model"]
_TQ_PROMPT = _TQ_AT + 8 * _TQ.data_words + 8 * _TQ.ptrs["promptTokens"]
_TQ_TRACE = _TQ_AT + 8 * _TQ.data_words + 8 * _TQ.ptrs["traceparent"]
_SMP_STOPS = _SMP_AT + 8 * _SMP.data_words + 8 * _SMP.ptrs["stopTokenIds"]
_U32 = struct.Struct("<I")
assert _TQ.prims["deadlineMs"][2] == 0 and _ENV.prims["requestId"][2] == 0


def _tq_head() -> bytes:
    head = bytearray(_BLOBS_AT)
    seg = memoryview(head)[8:]
    _Q.pack_into(seg, 0, _struct_ptr(0, 8, _ENV))
    _ENV.put(seg, 8, "version", PROTOCOL_VERSION)
    struct.pack_into("<H", seg, 8 + _DISC_OFF, _BODY["textQuery"])
    body_ptr = 8 + 8 * _ENV.data_words
    _Q.pack_into(seg, body_ptr, _struct_ptr(body_ptr, _TQ_AT - 8, _TQ))
    p = _TQ.ptr_at(_TQ_AT - 8, "sampling")
    _Q.pack_into(seg, p, _struct_ptr(p, _SMP_AT - 8, _SMP))
    seg.release()
    return bytes(head)


_TQ_HEAD = _tq_head()


def _list_at(buf: bytearray, ptr: int, blob: bytes, count: int) -> None:
    """Append ``blob`` (padded to a word) and point the list pointer at ``ptr`` to it."""
    at = len(buf)
    buf += blob
    pad = -len(blob) & 7
    if pad:
        buf += bytes(pad)
    _Q.pack_into(buf, ptr, 1 | (((at - ptr - 8) >> 3) << 2) | (2 << 32) | (count << 35))


def encode_text_query(request_id: int, q: TextQuery) -> bytes:
    """Frame bytes equal in meaning to ``codec.encode_capnp(request_id, q)``."""
    s: Sampling = q.sampling
    buf = bytearray(_TQ_HEAD)
    model = q.model.encode() + b"\0"
    _list_at(buf, _TQ_MODEL, model, len(model))
    if q.prompt_tokens:
        prompt = pack_u32(q.prompt_tokens)
        _list_at(buf, _TQ_PROMPT, prompt, len(prompt))
    if s.stop_token_ids:
        stops = pack_u32(s.stop_token_ids)
        _list_at(buf, _SMP_STOPS, stops, len(stops))
    if q.traceparent:
        trace = q.traceparent.encode() + b"\0"
        _list_at(buf, _TQ_TRACE, trace, len(trace))
    buf[_SMP_AT : _SMP_AT + _SMP_SIZE] = _sampling_data(s)
    _U32.pack_into(buf, 4, (len(buf) - 8) >> 3)
    _Q.pack_into(buf, _TQ_REQ, request_id)
    if q.deadline_ms:
        _U32.pack_into(buf, _TQ_DEADLINE, q.deadline_ms)
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
        for n in ("finishReason", "stopTokenId", "promptTokens", "cachedTokens", "completionTokens")
    )
    fmt, pos = "<", 0
    for off, name in order:
        fmt += f"{off - pos}x" if off > pos else ""
        code = _TR.prims[name][0].format[1:]
        fmt += code
        pos = off + struct.calcsize("<" + code)
    assert [n for _, n in order] == [
        "finishReason",
        "stopTokenId",
        "promptTokens",
        "cachedTokens",
        "completionTokens",
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
        buf,
        _TR_DATA_AT,
        int(r.finish_reason),
        r.stop_token_id,
        r.prompt_tokens,
        r.cached_tokens,
        r.completion_tokens,
    )
    return bytes(buf)
