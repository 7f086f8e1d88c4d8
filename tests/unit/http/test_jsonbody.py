"""The two JSON decoders of request bodies (jsonbody.py) take the same JSON: the slow
one, for dense bodies, gives what orjson gives or refuses what it refuses; it stops at
its bound of objects and arrays; and the choice between them follows the body's shape."""

from __future__ import annotations

import json

import orjson
import pytest

from neutrino.errors import NeutrinoError
from neutrino.frontends.http.jsonbody import FAST_BYTES, decode, decode_large, decode_slowly, dense

SAME = [
    b'{"a": [1, -2, {"b": null}], "c": "\\u00e9\\ud83d\\ude00 \\" \\\\", "d": 1.5e3, "e": true}',
    b'{"a": 1, "a": 2}',  # the last of two equal keys
    b'  {"a": []}  ',
    b'{"big": 1' + b"0" * 30 + b"}",  # past 64 bits: a float, as orjson takes it
    b'{"neg": -9223372036854775808, "max": 18446744073709551615}',
    b'{"bias": {' + b",".join(b'"%d": %d' % (i, i % 200 - 100) for i in range(9000)) + b"}}",
    '{"s": "caf\u00e9 \u2028"}'.encode(),
]
REFUSED = [
    b"",
    b'{"a": "\\ud800"}',  # a lone surrogate
    b'{"a": "\\udc00x"}',
    b'{"a": NaN}',
    b'{"a": Infinity}',
    b'{"a": "x\x01"}',  # a control character in a string
    b"\xff\xfe",
    b"{} {}",
    b"[" * 5000 + b"]" * 5000,
    b'{"a": 1' + b"0" * 5000 + b"}",  # over Python's 4,300 digits
    b'{"a": [1, 2,]}',
]


@pytest.mark.parametrize("raw", SAME, ids=range(len(SAME)))
def test_the_slow_decoder_gives_what_orjson_gives(raw: bytes) -> None:
    assert decode_slowly(raw, 100) == orjson.loads(raw) == decode(raw)


@pytest.mark.parametrize("raw", REFUSED, ids=range(len(REFUSED)))
def test_both_refuse_the_same_bodies(raw: bytes) -> None:
    with pytest.raises(NeutrinoError) as fast:
        decode(raw)
    with pytest.raises(NeutrinoError) as slow:
        decode_slowly(raw, 100)
    assert fast.value.http_status == slow.value.http_status == 400


def test_the_slow_decoder_stops_at_its_bound() -> None:
    raw = json.dumps({"messages": [{"role": "user"}] * 1000}).encode()
    body = decode_slowly(raw, 1002)
    assert isinstance(body, dict) and len(body["messages"]) == 1000  # + the list + the body
    with pytest.raises(NeutrinoError, match="more than 1,001 JSON objects and arrays") as info:
        decode_slowly(raw, 1001)  # reached by the body itself, after its members
    assert info.value.param is None
    with pytest.raises(NeutrinoError, match=r"more than 999 .* \(in messages\)") as info:
        decode_slowly(raw, 999)
    assert info.value.param == "messages"  # the member it was reached in
    with pytest.raises(NeutrinoError) as info:
        decode_slowly(b"[" + b"{}," * 2000 + b"{}]", 1000)
    assert info.value.param is None


def test_which_decoder_a_body_gets() -> None:
    prose = json.dumps({"prompt": "word " * (FAST_BYTES // 5)}).encode()
    commas = json.dumps({"prompt": "a, b, " * (FAST_BYTES // 6)}).encode()
    ids = json.dumps({"prompt": list(range(20_000))}).encode()
    small = json.dumps({"x": [{}] * 1000}).encode()
    assert not dense(prose) and not dense(small)
    assert dense(commas) and dense(ids)  # slow but right: strings and numbers alike
    for raw in (prose, commas, ids, small):
        assert decode_large(raw, 10**6) == orjson.loads(raw)
