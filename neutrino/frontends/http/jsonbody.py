"""Sans-IO: a request's JSON body decoded, whatever its shape, without holding the
event loop for long.

orjson decodes fast, in one call that holds the interpreter (the GIL) throughout: some
80 ns per JSON object, so 100,000 empty objects hold it 10-50 ms and an 8 MB body of them
a quarter of a second, on whichever thread it runs. A body that may hold many objects or
arrays (counted from its bytes: an upper bound, as brackets in strings count too) is
(or values: a flat object of 200,000 keys holds it some 35 ms) is
therefore decoded by the standard library's pure-Python decoder instead, which a worker
thread runs while the event loop gets the interpreter every few milliseconds, and which
stops at ``max_containers`` objects and arrays. Both decoders take the same JSON: no
NaN or Infinity, no lone surrogates, valid UTF-8; an integer past 64 bits is a float.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
from collections.abc import Callable
from typing import Any

import orjson

from neutrino.errors import NeutrinoError, bad_request

# Bodies up to this size are decoded by orjson however they look (at most ~20,000
# objects: a few milliseconds); larger ones with more brackets and commas than
# FAST_VALUES are dense, for the slow decoder (which takes the strings of a long prose
# prompt, commas and all, as fast: in C).
FAST_BYTES = 64 * 1024
FAST_VALUES = 8192
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 64) - 1
_ONE_CALL = 4096  # members of an object built (or freed) in one call


def _invalid() -> NeutrinoError:
    return bad_request("the request body is not valid JSON")


def dense(raw: bytes) -> bool:
    """Whether ``raw`` may hold so many values that orjson would hold the interpreter
    for long (decode it with :func:`decode_slowly`, on a worker thread)."""
    if len(raw) <= FAST_BYTES:
        return False
    return raw.count(b",") + raw.count(b"{") + raw.count(b"[") > FAST_VALUES


def decode(raw: bytes) -> object:
    """A body decoded by orjson (400 when it is not JSON)."""
    if not raw:
        raise bad_request("the request body is empty; send a JSON object")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise _invalid() from None


def decode_large(raw: bytes, max_containers: int) -> object:
    """A large body decoded by whichever decoder fits it (run on a worker thread: even
    counting its brackets takes milliseconds)."""
    return decode_slowly(raw, max_containers) if dense(raw) else decode(raw)


class _TooMany(Exception):
    pass


def decode_slowly(raw: bytes, max_containers: int) -> object:
    """A body decoded by the pure-Python decoder, at most ``max_containers`` objects and
    arrays (400 past it, or when it is not JSON)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid() from None
    try:
        return _top_level(_decoder(max_containers), text)
    except _TooMany as exc:
        where = exc.args[0] if exc.args else None
        raise bad_request(
            f"the request body holds more than {max_containers:,} JSON objects and arrays"
            + (f" (in {where[:64]})" if where else ""),
            where[:64] if where else None,
        ) from None
    except RecursionError:
        raise bad_request("the request body is nested too deeply") from None
    except ValueError:  # JSONDecodeError, NaN, a lone surrogate, a huge integer
        raise _invalid() from None


_SPACE = json.decoder.WHITESPACE.match  # type: ignore[attr-defined]


def _top_level(dec: json.JSONDecoder, s: str) -> Any:
    """``s`` decoded, its top-level object member by member, so that a bound reached
    inside a member names it (``messages``); anything else whole."""
    i = _SPACE(s, 0).end()
    if not s.startswith("{", i):
        return dec.decode(s)
    scan, build = dec.scan_once, dec.object_pairs_hook  # type: ignore[attr-defined]
    pairs: list[tuple[str, Any]] = []
    i = _SPACE(s, i + 1).end()
    while not s.startswith("}", i):
        if pairs:
            if not s.startswith(",", i):
                raise ValueError("expected ','")
            i = _SPACE(s, i + 1).end()
        if not s.startswith('"', i):
            raise ValueError("expected a key")
        key, i = dec.parse_string(s, i + 1, True)  # type: ignore[attr-defined]
        i = _SPACE(s, i).end()
        if not s.startswith(":", i):
            raise ValueError("expected ':'")
        try:
            value, i = scan(s, _SPACE(s, i + 1).end())
        except _TooMany:
            raise _TooMany(key) from None
        except StopIteration:
            raise ValueError("expected a value") from None
        pairs.append((key, value))
        i = _SPACE(s, i).end()
    if _SPACE(s, i + 1).end() != len(s):
        raise ValueError("extra data")
    assert build is not None
    return build(pairs)


def _decoder(cap: int) -> json.JSONDecoder:
    left = [cap]

    def count() -> None:
        left[0] -= 1
        if left[0] < 0:
            raise _TooMany

    def pairs(items: list[tuple[str, Any]]) -> dict[str, object]:
        count()
        if len(items) <= _ONE_CALL:
            return dict(items)
        # A large object (logit_bias of 200,000 ids, say) is built, and its pairs let go,
        # a step at a time: dict() and freeing the list are single calls that would hold
        # the interpreter for milliseconds per 100,000 members.
        out = {}
        for key, value in items:
            out[key] = value
        while items:
            del items[-_ONE_CALL:]
        return out

    def array(state: tuple[str, int], scan: Callable[[str, int], Any]) -> Any:
        count()
        return json.decoder.JSONArray(state, scan)  # type: ignore[attr-defined]

    def string(s: str, end: int, strict: bool = True) -> tuple[str, int]:
        value, end = json.decoder.scanstring(s, end, strict)  # type: ignore[attr-defined]
        if not value.isascii():
            value.encode("utf-8")  # UnicodeEncodeError (a ValueError): a lone surrogate
        return value, end

    def integer(s: str) -> int | float:
        value = int(s)  # past 4,300 digits: ValueError
        return value if _INT_MIN <= value <= _INT_MAX else float(s)  # as orjson takes it

    def constant(s: str) -> Any:
        raise ValueError(f"{s} is not JSON")

    dec = json.JSONDecoder(object_pairs_hook=pairs, parse_int=integer, parse_constant=constant)
    dec.parse_array = array  # type: ignore[attr-defined]
    dec.parse_string = string  # type: ignore[attr-defined]
    dec.scan_once = json.scanner.py_make_scanner(dec)  # type: ignore[attr-defined]
    return dec
