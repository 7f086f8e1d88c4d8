"""The codec's table: every message type has its entry, every member of the Envelope's
body union a message type, and a dataclass that does not match its schema struct field
for field is refused when its entry is derived, not on the wire."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from neutrino.engine import messages
from neutrino.engine.messages import ModelInfo, ModelState
from neutrino.engine.wire.codec import DecodeError, decode_slow, encode_capnp
from neutrino.engine.wire.schema import ie
from neutrino.engine.wire.table import BY_KIND, KINDS, struct_of


def test_every_message_type_has_an_entry_and_every_body_member_a_type() -> None:
    assert set(typing.get_args(messages.Message)) == set(KINDS)
    members = set(ie.Envelope.schema.fields["body"].schema.fieldnames)
    assert members == set(BY_KIND)


def test_a_dataclass_missing_a_schema_field_is_refused() -> None:
    @dataclasses.dataclass
    class Pong:  # the schema's Pong has running, waiting and cacheUsage too
        nonce: int

    with pytest.raises(TypeError, match="lacks the schema's"):
        struct_of(Pong)


def test_a_dataclass_field_the_schema_lacks_is_refused() -> None:
    @dataclasses.dataclass
    class Ping:
        nonce: int
        extra: int = 0

    with pytest.raises(TypeError, match="no field 'extra'"):
        struct_of(Ping)


def test_an_unknown_enumerant_is_a_decode_error() -> None:
    ack = messages.HelloAck("e", 1, [ModelInfo("m", 8, state=ModelState.LOADING)], 1)
    with ie.Envelope.from_bytes(encode_capnp(1, ack)) as env:
        builder = env.as_builder()
    builder.body.helloAck.models[0].state = 9  # past the schema's enumerants
    with pytest.raises(DecodeError, match="unknown model state 9"):
        decode_slow(builder.to_bytes())
