"""Sans-IO codec between engine protocol frames and ``messages`` objects.

The hot messages take hand-written paths: a plain ``textQuery`` and a ``textResult``
without logprobs are written by ``builder``, and ``textResult`` / ``tokenBatch`` frames
are read by ``reader``, a small reader of the standard Cap'n Proto wire format whose
field offsets are taken from the compiled schema at import time (a fraction of a pycapnp
reader per frame). Everything else goes through pycapnp's builders and readers, field by
field as ``table`` derives them from the schema and the message dataclasses.
"""

from __future__ import annotations

import typing

from neutrino.engine.messages import Message, TextQuery, TextResult
from neutrino.engine.wire.builder import encode_text_query, encode_text_result
from neutrino.engine.wire.reader import DecodeError as DecodeError
from neutrino.engine.wire.reader import decode_canonical, decode_general
from neutrino.engine.wire.schema import PROTOCOL_VERSION, ie
from neutrino.engine.wire.table import BY_KIND, MESSAGES, Capnp

_TRAVERSAL_LIMIT_WORDS = 16 * 1024 * 1024  # 128 MiB, above the 101 MB frame limit


# --------------------------------------------------------------------------- encode


def encode(request_id: int, msg: Message) -> bytes:
    """One frame (standard stream framing) carrying ``msg`` for ``request_id``."""
    if type(msg) is TextQuery and not msg.images and msg.guided is None and not msg.forced_tokens:
        return encode_text_query(request_id, msg)
    if type(msg) is TextResult and not msg.logprobs and not msg.top_logprobs:
        return encode_text_result(request_id, msg)
    return encode_capnp(request_id, msg)


def encode_capnp(request_id: int, msg: Message) -> bytes:
    """``encode`` through pycapnp's builder, for every message kind (by the table)."""
    entry = MESSAGES.get(type(msg))
    if entry is None:
        raise TypeError(f"cannot encode {type(msg).__name__}")
    kind, struct = entry
    env = ie.Envelope.new_message(version=PROTOCOL_VERSION, requestId=request_id)
    struct.fill(env.body.init(kind), msg)
    data: bytes = env.to_bytes()
    return data


# --------------------------------------------------------------------------- decode (pycapnp)


def _slow_body(body: Capnp) -> Message:
    kind = body.which()
    struct = BY_KIND.get(kind)
    if struct is None:
        raise DecodeError(f"unknown message kind {kind!r}")
    return typing.cast(Message, struct.read(getattr(body, kind)))


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
