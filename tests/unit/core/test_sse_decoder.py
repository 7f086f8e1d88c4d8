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


def test_whole_events_at_once_match_the_same_stream_line_by_line() -> None:
    blocks = [b'data: {"i": %d}\n\n' % i for i in range(50)]
    blocks[7] = b"event: x\ndata: seven\n\n"
    blocks[9] = b": comment\n\n"
    blocks[11] = b"data: a\ndata: b\n\n"
    blocks[13] = b"data: crlf\r\n\r\n"
    blocks[15] = b"\n\n\ndata:\n\n"  # blank lines, then an empty data line: an event of ""
    stream = b"".join(blocks) + b"data: unfinished"
    whole = SSEDecoder().feed(stream)
    dec = SSEDecoder()
    byte_by_byte = [ev for i in range(len(stream)) for ev in dec.feed(stream[i : i + 1])]
    assert whole == byte_by_byte
    assert ("x", "seven") in whole and ("message", "a\nb") in whole
    assert ("message", "crlf") in whole and ("message", "") in whole
    assert len(whole) == 49 and whole[-1] == ("message", '{"i": 49}')
