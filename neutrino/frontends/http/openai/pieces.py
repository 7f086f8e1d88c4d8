"""Sans-IO: a large JSON answer rendered a piece at a time.

Most of a large non-streamed answer is its logprobs: 8 choices of 4,000 tokens with 20
alternatives each are 672,000 JSON objects, seconds of work and tens of MB as one
``orjson.dumps``. Such an answer is written as its rendering goes: its skeleton (every
field, with a marker where each choice's logprobs go) is serialised once and split at
the markers, and each choice's logprobs are rendered :data:`SLICE_TOKENS` tokens at a
time (``pipeline/logprobs.py``'s SLICE_TOKENS). Each ``next()`` of :func:`pieces` does
a bounded amount of work; the bytes are the same as those of the answer rendered whole.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from neutrino.pipeline.logprobs import (
    LogprobColumns,
    chat_entries,
)

# Unguessable, so that no text of an answer can be taken for one.
_MARK = "\x00neutrino-" + secrets.token_hex(8) + "-"

Render = Callable[[], Iterator[bytes]]


def marker(index: int) -> str:
    """What stands in the skeleton where deferred part ``index`` goes."""
    return f"{_MARK}{index}"


def pieces(skeleton: Any, deferred: list[Render]) -> Iterator[bytes]:
    """The answer's bytes: ``skeleton`` with ``marker(i)`` replaced by what
    ``deferred[i]`` renders, in order."""
    rest = orjson.dumps(skeleton)
    for i, render in enumerate(deferred):
        head, found, rest = rest.partition(orjson.dumps(marker(i)))
        if not found:
            raise ValueError(f"the answer's skeleton has no marker {i}")
        yield head
        yield from render()
    yield rest


def json_list(items: Iterator[list[Any]]) -> Iterator[bytes]:
    """A JSON array written a slice of items at a time."""
    yield b"["
    first = True
    for batch in items:
        if batch:
            inner = orjson.dumps(batch)[1:-1]
            yield inner if first else b"," + inner
            first = False
    yield b"]"


def chat_entries_json(columns: LogprobColumns) -> Iterator[bytes]:
    """Chat's (and the Responses API's) per-token objects, as a JSON array."""
    return json_list(chat_entries(batch) for batch in columns.slices())


def chat_logprobs_json(columns: LogprobColumns) -> Iterator[bytes]:
    """A chat choice's ``logprobs`` object."""
    yield b'{"content":'
    yield from chat_entries_json(columns)
    yield b',"refusal":null}'


def completion_logprobs_json(columns: LogprobColumns) -> Iterator[bytes]:
    """A completion choice's ``logprobs`` object (parallel arrays): each array in
    slices, the token texts taken once per slice for the four of them."""
    tokens: list[bytes] = []
    values: list[bytes] = []
    tops: list[bytes] = []
    offsets: list[bytes] = []
    offset = 0
    for batch in columns.slices():
        starts = []
        for e in batch:
            starts.append(offset)
            offset += len(e.token)
        tokens.append(orjson.dumps([e.token for e in batch])[1:-1])
        values.append(orjson.dumps([e.logprob for e in batch])[1:-1])
        tops.append(orjson.dumps([{t: lp for t, _, lp in e.top} for e in batch])[1:-1])
        offsets.append(orjson.dumps(starts)[1:-1])
        yield b""  # a slice's work done: the writer may let the loop run
    for key, parts in (
        (b'{"tokens":[', tokens),
        (b'],"token_logprobs":[', values),
        (b'],"top_logprobs":[', tops),
        (b'],"text_offset":[', offsets),
    ):
        yield key
        for i, part in enumerate(parts):
            yield part if i == 0 else b"," + part
    yield b"]}"
