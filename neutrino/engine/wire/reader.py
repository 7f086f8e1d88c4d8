"""Sans-IO fast readers of the standard Cap'n Proto wire format for ``textResult``.

Results are the per-token traffic, and a pycapnp reader costs several microseconds per
frame. These readers take every offset from the compiled schema at import time and
return ``None`` (or fall back) for anything they do not handle: several segments, far
pointers, unknown layouts; ``codec.decode`` then uses pycapnp.

* ``decode_tokens``: a mid-stream result that carries only token ids (the hot path);
* ``decode_canonical``: any result laid out as our writer and pycapnp's builder lay it out;
* ``decode_general``: any single-segment result;
* ``decode_token_batch``: a single-segment ``tokenBatch`` (many streams' plain results).
"""

from __future__ import annotations

import struct
from array import array
from typing import Any

from neutrino.engine.messages import FinishReason, TextResult, TokenBatch
from neutrino.engine.wire.arrays import LITTLE as _LITTLE
from neutrino.engine.wire.arrays import unpack_f32, unpack_u32, unpack_u64
from neutrino.engine.wire.schema import PROTOCOL_VERSION, ie


class DecodeError(ValueError):
    """A frame that is not a valid engine protocol envelope."""


def _slot(struct_schema: Any, name: str) -> int:
    for f in struct_schema.schema.node.struct.fields:
        if f.name == name:
            if f.slot.hadExplicitDefault:
                raise RuntimeError(f"fast decoder needs zero default for {name}")
            return int(f.slot.offset)
    raise KeyError(name)


def _discriminant(group: Any, name: str) -> int:
    for f in group.schema.node.struct.fields:
        if f.name == name:
            return int(f.discriminantValue)
    raise KeyError(name)


_Q = struct.Struct("<Q")

_ENV_VERSION = 2 * _slot(ie.Envelope, "version")  # byte offset in data section
_ENV_REQ = 8 * _slot(ie.Envelope, "requestId")
_ENV_DISC = 2 * int(ie.Envelope.Body.schema.node.struct.discriminantOffset)
_TEXT_RESULT = _discriminant(ie.Envelope.Body, "textResult")
_TOKEN_BATCH = _discriminant(ie.Envelope.Body, "tokenBatch")
_TB_IDS = _slot(ie.TokenBatch, "requestIds")
_TB_COUNTS = _slot(ie.TokenBatch, "tokenCounts")
_TB_TOKENS = _slot(ie.TokenBatch, "tokens")
_BODY_PTR = 0  # all union members share pointer slot 0 (checked below)
assert all(f.slot.offset == _BODY_PTR for f in ie.Envelope.Body.schema.node.struct.fields), (
    "Envelope.body members must share pointer 0"
)

_TR = ie.TextResult
_TR_TOKENS = _slot(_TR, "tokens")
_TR_LOGPROBS = _slot(_TR, "logprobs")
_TR_TOPIDS = _slot(_TR, "topTokenIds")
_TR_TOPLPS = _slot(_TR, "topTokenLogprobs")
_TR_TIMINGS = _slot(_TR, "timings")
_TR_TOPK = _slot(_TR, "topLogprobs")  # uint8 units
_TR_FINISH = 2 * _slot(_TR, "finishReason")  # enum = uint16
_TR_STOP = 4 * _slot(_TR, "stopTokenId")
_TR_PROMPT = 4 * _slot(_TR, "promptTokens")
_TR_CACHED = 4 * _slot(_TR, "cachedTokens")
_TR_COMPLETION = 4 * _slot(_TR, "completionTokens")
_TM_QUEUE = 8 * _slot(ie.Timings, "queueNs")
_TM_PREFILL = 8 * _slot(ie.Timings, "prefillNs")
_TM_DECODE = 8 * _slot(ie.Timings, "decodeNs")

_FINISH = {int(v): v for v in FinishReason}


def _layout(fields: list[tuple[int, str]], size: int) -> struct.Struct:
    """A struct format reading ``fields`` ((byte offset, code) pairs) from a data section."""
    fmt, pos = "<", 0
    for off, code in sorted(fields):
        if off < pos:
            raise RuntimeError("overlapping fields")
        fmt += f"{off - pos}x" if off > pos else ""
        fmt += code
        pos = off + struct.calcsize("<" + code)
    if pos > size:
        raise RuntimeError("layout exceeds data section")
    return struct.Struct(fmt)


_ENV_WORDS = int(ie.Envelope.schema.node.struct.dataWordCount)
_ENV_LAYOUT = _layout([(_ENV_VERSION, "H"), (_ENV_DISC, "H"), (_ENV_REQ, "Q")], 8 * _ENV_WORDS)
_TR_WORDS = int(_TR.schema.node.struct.dataWordCount)
_TR_PTRS = int(_TR.schema.node.struct.pointerCount)
_TR_LAYOUT = _layout(
    [
        (_TR_TOPK, "B"),
        (_TR_FINISH, "H"),
        (_TR_STOP, "I"),
        (_TR_PROMPT, "I"),
        (_TR_CACHED, "I"),
        (_TR_COMPLETION, "I"),
    ],
    8 * _TR_WORDS,
)
# Field order of _TR_LAYOUT, sorted by offset, mapped back to names.
_TR_ORDER = [
    name
    for _, name in sorted(
        [
            (_TR_TOPK, "topk"),
            (_TR_FINISH, "finish"),
            (_TR_STOP, "stop"),
            (_TR_PROMPT, "prompt"),
            (_TR_CACHED, "cached"),
            (_TR_COMPLETION, "completion"),
        ]
    )
]
_ENV_ORDER = [name for _, name in sorted([(_ENV_VERSION, "v"), (_ENV_DISC, "d"), (_ENV_REQ, "r")])]
_V_IX, _D_IX, _R_IX = (_ENV_ORDER.index(n) for n in ("v", "d", "r"))
_TK_IX, _FIN_IX, _STOP_IX, _PR_IX, _CA_IX, _CO_IX = (
    _TR_ORDER.index(n) for n in ("topk", "finish", "stop", "prompt", "cached", "completion")
)


class _Fallback(Exception):
    pass


def _struct_at(seg: bytes, ptr_pos: int) -> tuple[int, int, int]:
    """Resolve the struct pointer stored at byte ``ptr_pos``: (data start, data bytes, ptrs)."""
    w = _Q.unpack_from(seg, ptr_pos)[0]
    if w == 0:
        return 0, 0, 0
    if w & 3 != 0:
        raise _Fallback
    off = (w >> 2) & 0x3FFFFFFF
    if off & 0x20000000:
        off -= 0x40000000
    data_words = (w >> 32) & 0xFFFF
    ptr_count = w >> 48
    start = ptr_pos + 8 + 8 * off
    data_bytes = 8 * data_words
    if start < 8 or start + data_bytes + 8 * ptr_count > len(seg):
        raise DecodeError("struct pointer out of bounds")
    return start, data_bytes, ptr_count


def _data_at(seg: bytes, pos: int) -> bytes:
    w = _Q.unpack_from(seg, pos)[0]
    if w == 0:
        return b""
    if w & 3 != 1 or (w >> 32) & 7 != 2:
        raise _Fallback
    off = (w >> 2) & 0x3FFFFFFF
    if off & 0x20000000:
        off -= 0x40000000
    count = w >> 35
    start = pos + 8 + 8 * off
    if start < 8 or start + count > len(seg):
        raise DecodeError("list pointer out of bounds")
    return seg[start : start + count]


def _fast_text_result(seg: bytes, d: int, dsize: int, nptr: int) -> TextResult:
    if dsize < 8 * _TR_WORDS or nptr < _TR_PTRS:
        raise _Fallback  # an older, smaller layout: let pycapnp apply defaults
    f = _TR_LAYOUT.unpack_from(seg, d)
    ptrs = d + dsize
    tokens = array("I")
    tokens.frombytes(_data_at(seg, ptrs + 8 * _TR_TOKENS))
    if not _LITTLE:
        tokens.byteswap()
    result = TextResult(
        tokens.tolist(),
        _FINISH.get(f[_FIN_IX], FinishReason.NONE),
    )
    stop, prompt, cached, completion = f[_STOP_IX], f[_PR_IX], f[_CA_IX], f[_CO_IX]
    if stop or prompt or cached or completion:
        result.stop_token_id = stop
        result.prompt_tokens = prompt
        result.cached_tokens = cached
        result.completion_tokens = completion
    lp = _data_at(seg, ptrs + 8 * _TR_LOGPROBS)
    if lp:
        result.logprobs = unpack_f32(lp)
    topk = f[_TK_IX]
    if topk:
        result.top_logprobs = topk
        result.top_token_ids = unpack_u32(_data_at(seg, ptrs + 8 * _TR_TOPIDS))
        result.top_token_logprobs = unpack_f32(_data_at(seg, ptrs + 8 * _TR_TOPLPS))
    t, tsize, _ = _struct_at(seg, ptrs + 8 * _TR_TIMINGS)
    if tsize >= 24:
        result.queue_ns = _Q.unpack_from(seg, t + _TM_QUEUE)[0]
        result.prefill_ns = _Q.unpack_from(seg, t + _TM_PREFILL)[0]
        result.decode_ns = _Q.unpack_from(seg, t + _TM_DECODE)[0]
    elif tsize:
        raise _Fallback
    return result


def _struct_ptr(offset: int, data_words: int, ptr_count: int) -> int:
    return (offset << 2) | (data_words << 32) | (ptr_count << 48)


# The layout pycapnp's builder produces for a textResult envelope: root pointer,
# Envelope (data + body pointer), then TextResult (data + pointers) right after.
# When both struct pointers hold exactly these words, every field sits at a
# known offset and one unpack reads the fixed part of the message.
_CANON_ROOT = _struct_ptr(0, _ENV_WORDS, 1)
_CANON_BODY = _struct_ptr(0, _TR_WORDS, _TR_PTRS)
_CANON = struct.Struct(
    "<4xI"  # segment table: one segment, its size in words
    + "Q"  # root pointer
    + _ENV_LAYOUT.format[1:]
    + "Q"  # body pointer
    + _TR_LAYOUT.format[1:]
    + f"{8 * _TR_WORDS - _TR_LAYOUT.size}x"
    + f"{_TR_PTRS}Q"
)
_CANON_TR_DATA = 8 + 8 + 8 * _ENV_WORDS + 8  # byte offset of TextResult's data section
_CANON_TR_PTRS = _CANON_TR_DATA + 8 * _TR_WORDS
_CANON_N_ENV = len(_ENV_ORDER)
_CANON_N_TR = len(_TR_ORDER)
assert _TR_TOKENS == 0, "tokens must be TextResult's first pointer"
_CANON_PTR0 = 3 + _CANON_N_ENV + _CANON_N_TR  # index of the tokens pointer in the unpack
assert _TR_TIMINGS == _TR_PTRS - 1, "timings must be TextResult's last pointer"
# The logprob pointers (between tokens and timings) must be null for the canonical path.
_TR_OTHERS = slice(_CANON_PTR0 + 1, _CANON_PTR0 + _TR_TIMINGS)
_CANON_NO_OTHERS: tuple[int, ...] = (0,) * (_TR_TIMINGS - 1)
_CANON_TIMINGS_AT = _CANON_TR_PTRS + 8 * _TR_TIMINGS
_CANON_N_TR = len(_TR_ORDER)
assert _ENV_LAYOUT.size == 8 * _ENV_WORDS


# Absolute indices into the _CANON unpack.
_I_ROOT = 1
_I_VER = 2 + _V_IX
_I_DISC = 2 + _D_IX
_I_REQ = 2 + _R_IX
_I_BODY = 2 + _CANON_N_ENV
_I_FIN = 3 + _CANON_N_ENV + _FIN_IX
_I_STOP = 3 + _CANON_N_ENV + _STOP_IX
_I_PROMPT = 3 + _CANON_N_ENV + _PR_IX
_I_CACHED = 3 + _CANON_N_ENV + _CA_IX
_I_COMPLETION = 3 + _CANON_N_ENV + _CO_IX
_CANON_TOKENS_AT = _CANON_TR_PTRS + 8 * _TR_TOKENS + 8  # list offsets count from here
_U32 = struct.Struct("<I")
_TIMINGS = struct.Struct("<QQQ")
assert (_TM_QUEUE, _TM_PREFILL, _TM_DECODE) == (0, 8, 16)


# A plain mid-stream result (no finish, counts, logprobs or timings), as our builder
# and pycapnp's builder lay it out, differs from frame to frame only in the segment
# size, the request id, the tokens pointer and the token bytes. The hot path reads
# those four and compares the three constant stretches between them as bytes.
_HOT_RID = 16 + _ENV_REQ  # byte offset of the request id
_HOT_PTR0 = _CANON_TR_PTRS  # byte offset of the tokens pointer
_HOT_END = _CANON_TR_PTRS + 8 * _TR_PTRS  # end of the pointer section


def _hot_constants() -> tuple[bytes, bytes, bytes]:
    env = bytearray(8 * _ENV_WORDS)
    _ENV_LAYOUT.pack_into(
        env,
        0,
        *(PROTOCOL_VERSION if n == "v" else _TEXT_RESULT if n == "d" else 0 for n in _ENV_ORDER),
    )
    fixed = (
        _Q.pack(_CANON_ROOT) + bytes(env) + _Q.pack(_CANON_BODY) + bytes(8 * _TR_WORDS)
    )  # from byte 8 up to the pointer section; the request id's bytes are cut out below
    before = fixed[: _HOT_RID - 8]
    between = fixed[_HOT_RID - 8 + 8 :]
    assert 8 + len(before) + 8 + len(between) == _HOT_PTR0
    return before, between, bytes(_HOT_END - _HOT_PTR0 - 8)


_HOT_BEFORE, _HOT_BETWEEN, _HOT_AFTER = _hot_constants()
_HOT = struct.Struct(f"<4xI{len(_HOT_BEFORE)}sQ{len(_HOT_BETWEEN)}sQ{len(_HOT_AFTER)}s")
assert _HOT.size == _HOT_END


def decode_tokens(frame: bytes) -> tuple[int, list[int]] | None:
    """(request id, token ids) of a plain mid-stream textResult, else None.

    The per-token hot path: a non-final result that carries only token ids (no
    counts, logprobs or timings), laid out as our builder and pycapnp's lay it out.
    Anything else returns None; ``decode`` reads it.
    """
    n = len(frame)
    if n < _HOT_END:
        return None
    words, before, rid, between, w, after = _HOT.unpack_from(frame)
    if (
        before != _HOT_BEFORE
        or between != _HOT_BETWEEN
        or after != _HOT_AFTER
        or 8 * words + 8 != n
    ):
        return None
    if not w:
        return rid, []
    if w & 0x8000_0007_0000_0003 != 0x0000_0002_0000_0001:
        return None
    start = _CANON_TOKENS_AT + 8 * ((w >> 2) & 0x3FFFFFFF)
    count = w >> 35
    if start + count > n:
        return None
    if count == 4:
        return rid, [_U32.unpack_from(frame, start)[0]]
    arr = array("I")
    arr.frombytes(frame[start : start + count])
    if not _LITTLE:
        arr.byteswap()
    return rid, arr.tolist()


def decode_canonical(frame: bytes) -> tuple[int, TextResult] | None:
    """Decode a textResult frame laid out exactly as our builder lays it out, else None."""
    n = len(frame)
    if n < _CANON.size:
        return None
    u = _CANON.unpack_from(frame)
    if (
        u[_I_ROOT] != _CANON_ROOT
        or u[_I_DISC] != _TEXT_RESULT
        or u[_I_VER] != PROTOCOL_VERSION
        or u[_I_BODY] != _CANON_BODY
        or 8 * u[0] + 8 != n
        or u[_TR_OTHERS] != _CANON_NO_OTHERS
    ):
        return None  # another layout, or logprobs/timings present: the general reader
    w = u[_CANON_PTR0]
    if w:
        if w & 0x8000_0007_0000_0003 != 0x0000_0002_0000_0001:  # byte list, forward offset
            return None
        start = _CANON_TOKENS_AT + 8 * ((w >> 2) & 0x3FFFFFFF)
        count = w >> 35
        if start + count > n:
            raise DecodeError("list pointer out of bounds")
        if count == 4:
            tokens = [_U32.unpack_from(frame, start)[0]]
        else:
            arr = array("I")
            arr.frombytes(frame[start : start + count])
            if not _LITTLE:
                arr.byteswap()
            tokens = arr.tolist()
    else:
        tokens = []
    fin = u[_I_FIN]
    result = TextResult(tokens, _FINISH.get(fin, FinishReason.NONE) if fin else FinishReason.NONE)
    result.stop_token_id = u[_I_STOP]
    result.prompt_tokens = u[_I_PROMPT]
    result.cached_tokens = u[_I_CACHED]
    result.completion_tokens = u[_I_COMPLETION]
    if u[_CANON_PTR0 + _TR_TIMINGS]:
        try:
            t, tsize, _ = _struct_at(frame, _CANON_TIMINGS_AT)
        except _Fallback:
            return None
        if tsize >= 24:
            result.queue_ns, result.prefill_ns, result.decode_ns = _TIMINGS.unpack_from(frame, t)
        elif tsize:
            return None
    return u[_I_REQ], result


def decode_general(frame: bytes) -> tuple[int, TextResult] | None:
    """Any single-segment textResult frame, else None."""
    # Single-segment frame: the segment starts at byte 8, so byte offsets below
    # are relative to the frame itself (root pointer at byte 8).
    if len(frame) >= 24 and frame[0:4] == b"\x00\x00\x00\x00":
        try:
            env, esize, eptrs = _struct_at(frame, 8)
            if esize >= 8 * _ENV_WORDS and eptrs >= 1:
                e = _ENV_LAYOUT.unpack_from(frame, env)
                if e[_D_IX] == _TEXT_RESULT and e[_V_IX] == PROTOCOL_VERSION:
                    d, dsize, nptr = _struct_at(frame, env + esize + 8 * _BODY_PTR)
                    return e[_R_IX], _fast_text_result(frame, d, dsize, nptr)
        except (_Fallback, struct.error):
            pass
    return None


def checked_batch(request_ids: list[int], counts: list[int], tokens: list[int]) -> TokenBatch:
    """A TokenBatch whose entries account for exactly its tokens, else DecodeError."""
    if len(request_ids) != len(counts) or sum(counts) != len(tokens):
        raise DecodeError("tokenBatch counts do not match its request ids and tokens")
    return TokenBatch(request_ids, counts, tokens)


def decode_token_batch(frame: bytes) -> TokenBatch | None:
    """The entries of a single-segment tokenBatch frame, else None (``decode`` reads it).

    Raises DecodeError for a batch whose counts do not add up.
    """
    if len(frame) < 24 or frame[0:4] != b"\x00\x00\x00\x00":
        return None
    try:
        env, esize, eptrs = _struct_at(frame, 8)
        if esize < 8 * _ENV_WORDS or eptrs < 1:
            return None
        e = _ENV_LAYOUT.unpack_from(frame, env)
        if e[_D_IX] != _TOKEN_BATCH or e[_V_IX] != PROTOCOL_VERSION:
            return None
        d, dsize, nptr = _struct_at(frame, env + esize + 8 * _BODY_PTR)
        if nptr < 3:
            return None
        ptrs = d + dsize
        ids = unpack_u64(_data_at(frame, ptrs + 8 * _TB_IDS))
        counts = unpack_u32(_data_at(frame, ptrs + 8 * _TB_COUNTS))
        tokens = unpack_u32(_data_at(frame, ptrs + 8 * _TB_TOKENS))
    except (_Fallback, struct.error, ValueError) as exc:
        if isinstance(exc, DecodeError):
            raise
        return None
    return checked_batch(ids, counts, tokens)
