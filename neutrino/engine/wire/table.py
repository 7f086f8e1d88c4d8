"""The codec's table: for every message type, how its fields go into and come out of
pycapnp's builders and readers, derived once at import from the compiled schema
(``schemas/ie.capnp``) and the message dataclasses' annotations.

A field of a dataclass is the schema field of the same name in camelCase; what is done
with it follows from the two types (Text, a scalar, an enum, Data as packed uint32 or
float32 ids, a struct, a list of structs, data, text or enums). The few fields whose wire
form is not their Python form (a seed with its ``hasSeed`` flag, a result's timings in a
nested struct, 64-bit request ids, an absent constraint) are written out in
``_SPECIAL``. A new message is one entry in :data:`KINDS`; a field the schema has and the
dataclass lacks, or the other way round, fails at import, not on the wire.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from neutrino.engine import messages as m
from neutrino.engine.wire.arrays import (
    pack_f32,
    pack_u32,
    pack_u64,
    unpack_f32,
    unpack_u32,
    unpack_u64,
)
from neutrino.engine.wire.reader import DecodeError, checked_batch
from neutrino.engine.wire.schema import ie

# pycapnp's dynamic builders and readers: attributes by the schema's names.
Capnp = Any

# Each message type and its member of the Envelope's body union.
KINDS: dict[type, str] = {
    m.Hello: "hello",
    m.HelloAck: "helloAck",
    m.TextQuery: "textQuery",
    m.TextResult: "textResult",
    m.Cancel: "cancel",
    m.EngineError: "error",
    m.Ping: "ping",
    m.Pong: "pong",
    m.EmbedQuery: "embedQuery",
    m.EmbedResult: "embedResult",
    m.RerankQuery: "rerankQuery",
    m.RerankResult: "rerankResult",
    m.AudioQuery: "audioQuery",
    m.AudioResult: "audioResult",
    m.SpeechQuery: "speechQuery",
    m.SpeechResult: "speechResult",
    m.DetectQuery: "detectQuery",
    m.DetectResult: "detectResult",
    m.TokenBatch: "tokenBatch",
    m.LoadModel: "loadModel",
    m.UnloadModel: "unloadModel",
    m.ModelsChanged: "modelsChanged",
}
# The schema's struct for a dataclass whose name differs from it.
_STRUCTS = {m.EngineError: "Error", m.LoadModel: "ModelControl", m.UnloadModel: "ModelControl"}

Put = Callable[[Capnp, object], None]  # writes one field of an object into a builder
Get = Callable[[Capnp], object]  # reads one field's value from a reader


class Field(NamedTuple):
    attr: str  # the dataclass field
    put: Put
    get: Get


class Struct:
    """One dataclass as one schema struct: its scalar and text fields copied by name
    (``plain``: attribute, schema name), the others through their writers and readers."""

    __slots__ = ("build", "fields", "plain")

    def __init__(
        self,
        build: Callable[..., object],
        plain: Sequence[tuple[str, str]],
        fields: Sequence[Field],
    ) -> None:
        self.build = build
        self.plain = tuple(plain)
        self.fields = tuple(fields)

    def fill(self, b: Capnp, obj: object) -> None:
        for attr, name in self.plain:
            setattr(b, name, getattr(obj, attr))
        for f in self.fields:
            f.put(b, obj)

    def read(self, r: Capnp) -> object:
        values = {attr: getattr(r, name) for attr, name in self.plain}
        for f in self.fields:
            values[f.attr] = f.get(r)
        return self.build(**values)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _words(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r" \1", name).lower()


def _enum_get(cls: type[enum.IntEnum], name: str) -> Get:
    what = _words(cls.__name__)

    def get(r: Capnp) -> object:
        raw = getattr(r, name).raw
        try:
            return cls(raw)
        except ValueError:
            raise DecodeError(f"unknown {what} {raw}") from None

    return get


_PACKS: dict[type, tuple[Callable[[Sequence[Any]], bytes], Callable[[Any], list[Any]]]] = {
    int: (pack_u32, unpack_u32),
    float: (pack_f32, unpack_f32),
}


def _data(attr: str, name: str, hint: Any) -> Field:
    """A Data field: bytes as they are, or a packed array of the hint's element type."""
    get_attr = _getter(attr)
    if hint is bytes:
        return Field(attr, _put_if(get_attr, name), lambda r: bytes(getattr(r, name)))
    pack, unpack = _PACKS[typing.get_args(hint)[0]]

    def put(b: Capnp, obj: object) -> None:
        v = get_attr(obj)
        if v:
            setattr(b, name, pack(v))

    return Field(attr, put, lambda r: unpack(getattr(r, name)))


def _getter(attr: str) -> Callable[[object], Any]:
    return lambda obj: getattr(obj, attr)


def _put_if(get_attr: Callable[[object], Any], name: str) -> Put:
    """Writes a pointer field only when it has something (null reads back empty)."""

    def put(b: Capnp, obj: object) -> None:
        v = get_attr(obj)
        if v:
            setattr(b, name, v)

    return put


def _struct_field(attr: str, name: str, cls: type, optional: bool) -> Field:
    get_attr = _getter(attr)

    def put(b: Capnp, obj: object) -> None:
        v = get_attr(obj)
        if v is not None:
            struct_of(cls).fill(b.init(name), v)

    def get(r: Capnp) -> object:
        if optional and not r._has(name):
            return None
        return struct_of(cls).read(getattr(r, name))

    return Field(attr, put, get)


def _list_field(attr: str, name: str, element: str, hint: Any) -> Field:
    get_attr = _getter(attr)
    (item, *_) = typing.get_args(hint)
    if element == "struct":

        def put(b: Capnp, obj: object) -> None:
            v = get_attr(obj)
            out = b.init(name, len(v))
            codec = struct_of(item)
            for i, x in enumerate(v):
                codec.fill(out[i], x)

        return Field(attr, put, lambda r: [struct_of(item).read(x) for x in getattr(r, name)])
    if element == "data":  # one packed uint32 array a row

        def put_rows(b: Capnp, obj: object) -> None:
            rows = get_attr(obj)
            out = b.init(name, len(rows))
            for i, row in enumerate(rows):
                out[i] = pack_u32(row)

        return Field(attr, put_rows, lambda r: [unpack_u32(d) for d in getattr(r, name)])
    if element == "enum":  # pycapnp takes the enumerants' names in a list
        names = {int(v): k for k, v in getattr(ie, item.__name__).schema.enumerants.items()}
        seq = typing.get_origin(hint)

        def put_enums(b: Capnp, obj: object) -> None:
            v = get_attr(obj)
            if v:
                setattr(b, name, [names[int(c)] for c in v])

        return Field(attr, put_enums, lambda r: seq(item(c.raw) for c in getattr(r, name)))
    return Field(attr, _put_if(get_attr, name), lambda r: list(getattr(r, name)))  # text


def _field(attr: str, name: str, slot: Capnp, hint: Any) -> Field | None:
    kind = slot.type.which()
    optional = isinstance(hint, types.UnionType)
    if optional:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if kind == "data":
        return _data(attr, name, hint)
    if kind == "enum":
        get_attr = _getter(attr)
        return Field(attr, lambda b, o: setattr(b, name, int(get_attr(o))), _enum_get(hint, name))
    if kind == "struct":
        return _struct_field(attr, name, hint, optional)
    if kind == "list":
        return _list_field(attr, name, slot.type.list.elementType.which(), hint)
    return None  # a scalar or text: copied as it is


# ------------------------------------------------------------------ the exceptions


def _seed() -> list[Field]:
    def put(b: Capnp, s: object) -> None:
        seed = typing.cast(m.Sampling, s).seed
        if seed is not None:
            b.seed = seed
            b.hasSeed = True

    return [Field("seed", put, lambda r: r.seed if r.hasSeed else None)]


def _timings() -> list[Field]:
    """A result's engine timings: three flat fields, one nested struct on the wire."""

    def put(b: Capnp, obj: object) -> None:
        r = typing.cast(m.TextResult, obj)
        if r.queue_ns or r.prefill_ns or r.decode_ns:
            t = b.init("timings")
            t.queueNs, t.prefillNs, t.decodeNs = r.queue_ns, r.prefill_ns, r.decode_ns

    def nothing(b: Capnp, obj: object) -> None:
        pass

    return [
        Field("queue_ns", put, lambda r: r.timings.queueNs),
        Field("prefill_ns", nothing, lambda r: r.timings.prefillNs),
        Field("decode_ns", nothing, lambda r: r.timings.decodeNs),
    ]


def _request_ids() -> list[Field]:
    def put(b: Capnp, obj: object) -> None:
        b.requestIds = pack_u64(typing.cast(m.TokenBatch, obj).request_ids)

    return [Field("request_ids", put, lambda r: unpack_u64(r.requestIds))]


def _guided() -> list[Field]:
    """A query's constraint: absent, or written with mode none, reads as none."""
    plain = _struct_field("guided", "guided", m.Guided, optional=True)

    def get(r: Capnp) -> object:
        return plain.get(r) if r._has("guided") and r.guided.mode.raw else None

    return [Field("guided", plain.put, get)]


def _forced() -> list[Field]:
    plain = _data("forced_tokens", "forcedTokens", Sequence[int])
    return [Field("forced_tokens", plain.put, lambda r: plain.get(r) if r.forcedTokens else ())]


# What each special field stands for on the wire: (schema fields it takes, its fields).
_SPECIAL: dict[tuple[type, str], tuple[tuple[str, ...], Callable[[], list[Field]]]] = {
    (m.Sampling, "seed"): (("seed", "hasSeed"), _seed),
    (m.TextResult, "queue_ns"): (("timings",), _timings),
    (m.TokenBatch, "request_ids"): (("requestIds",), _request_ids),
    (m.TextQuery, "guided"): (("guided",), _guided),
    (m.TextQuery, "forced_tokens"): (("forcedTokens",), _forced),
}
_COVERED = {(m.TextResult, "prefill_ns"), (m.TextResult, "decode_ns")}  # by queue_ns's entry
_BUILDERS: dict[type, Callable[..., object]] = {
    m.TokenBatch: lambda request_ids, token_counts, tokens: checked_batch(
        request_ids, token_counts, tokens
    )
}

_STRUCT_CACHE: dict[type, Struct] = {}


def struct_of(cls: type) -> Struct:
    """The writers and readers of dataclass ``cls``, derived once."""
    found = _STRUCT_CACHE.get(cls)
    if found is None:
        found = _STRUCT_CACHE[cls] = _derive(cls)
    return found


def _derive(cls: type) -> Struct:
    schema = getattr(ie, _STRUCTS.get(cls, cls.__name__)).schema
    slots = {name: f.proto.slot for name, f in schema.fields.items()}
    hints = typing.get_type_hints(cls, vars(m))
    plain: list[tuple[str, str]] = []
    fields: list[Field] = []
    used: set[str] = set()
    for dc in dataclasses.fields(cls):
        if (cls, dc.name) in _COVERED:
            continue
        special = _SPECIAL.get((cls, dc.name))
        if special is not None:
            used.update(special[0])
            fields += special[1]()
            continue
        name = _camel(dc.name)
        if name not in slots:
            raise TypeError(f"{cls.__name__}.{dc.name}: no field {name!r} in the schema")
        used.add(name)
        field = _field(dc.name, name, slots[name], hints[dc.name])
        if field is None:
            plain.append((dc.name, name))
        else:
            fields.append(field)
    missing = set(slots) - used
    if missing:
        raise TypeError(f"{cls.__name__} lacks the schema's {sorted(missing)}")
    return Struct(_BUILDERS.get(cls, cls), plain, fields)


MESSAGES = {cls: (kind, struct_of(cls)) for cls, kind in KINDS.items()}
BY_KIND = {kind: struct for kind, struct in MESSAGES.values()}
