"""The SSE decoder: events split anywhere, CRLF, comments, multi-line data, bounds."""

from __future__ import annotations

import pytest

from neutrino.sse_decoder import SSEDecoder, SSEError

STREAM = (
    b": keep-alive\r\n\r\n"
    b'event: message_start\r\ndata: {"a": 1}\r\n\r\n'
    b"data: line one\ndata: line two\n\n"
    b"id: 7\nretry: 10\ndata:no-space\n\n"
    b"event: ping\n\n"  # an event without data is not dispatched
    b"data: [DONE]\n\n"
)
EXPECTED = [
    ("message_start", '{"a": 1}'),
    ("message", "line one\nline two"),
    ("message", "no-space"),
    ("message", "[DONE]"),
]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, len(STREAM)])
def test_events_whatever_the_chunking(size: int) -> None:
    dec = SSEDecoder()
    out = []
    for i in range(0, len(STREAM), size):
        out += dec.feed(STREAM[i : i + size])
    assert out == EXPECTED


def test_an_event_over_the_limit() -> None:
    dec = SSEDecoder(max_event_bytes=100)
    dec.feed(b"data: " + b"x" * 60 + b"\n")
    with pytest.raises(SSEError):
        dec.feed(b"data: " + b"y" * 60)
    assert SSEDecoder(max_event_bytes=100).feed(b"data: " + b"x" * 60 + b"\n\n")
