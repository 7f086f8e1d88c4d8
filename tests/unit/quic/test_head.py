"""The HTTP/3 request head's reading and bounds, and the relay's HTTP/1.1 translation
(sans-IO: no socket)."""

from __future__ import annotations

import pytest

from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.quic.head import (
    MAX_FIELD,
    BodyLimit,
    alt_svc,
    parse_head,
    response_fields,
)
from neutrino.frontends.quic.relay import ResponseReader, request_bytes


def head_of(
    *extra: tuple[bytes, bytes], method: bytes = b"POST", path: bytes = b"/v1/x?a=1"
) -> list[tuple[bytes, bytes]]:
    return [
        (b":method", method),
        (b":scheme", b"https"),
        (b":authority", b"example:51056"),
        (b":path", path),
        *extra,
    ]


def test_head_reads_pseudo_and_regular_fields() -> None:
    head = parse_head(head_of((b"x-a", b"1"), (b"x-a", b"2"), (b"content-length", b"12")))
    assert (head.method, head.path, head.authority) == ("POST", "/v1/x?a=1", "example:51056")
    assert head.route_path == b"/v1/x"
    assert head.headers == {"x-a": "1, 2", "content-length": "12"}
    assert head.content_length() == 12
    assert head.fields == [(b"x-a", b"1"), (b"x-a", b"2"), (b"content-length", b"12")]


@pytest.mark.parametrize(
    ("raw", "kind", "words"),
    [
        (head_of((b"x", b"v" * MAX_FIELD)), ErrorKind.BAD_REQUEST, "too long"),
        (head_of(*[(b"x-%d" % i, b"v") for i in range(200)]), ErrorKind.BAD_REQUEST, "too many"),
        (head_of(method=b"CONNECT"), ErrorKind.METHOD_NOT_ALLOWED, "CONNECT"),
        (head_of(path=b"*"), ErrorKind.BAD_REQUEST, ":path"),
    ],
)
def test_heads_that_cannot_be_served(
    raw: list[tuple[bytes, bytes]], kind: ErrorKind, words: str
) -> None:
    with pytest.raises(NeutrinoError) as caught:
        parse_head(raw)
    assert caught.value.kind is kind and words in caught.value.message


def test_response_fields_drop_connection_specific_ones() -> None:
    fields = response_fields(
        200, [("Content-Type", "a/b"), ("Transfer-Encoding", "chunked"), ("Connection", "close")]
    )
    assert fields == [(b":status", b"200"), (b"content-type", b"a/b")]


def test_body_limit_counts_declared_and_received_bytes() -> None:
    limit = BodyLimit(10)
    assert limit.declared_over(parse_head(head_of((b"content-length", b"11"))))
    assert not limit.declared_over(parse_head(head_of((b"content-length", b"10"))))
    assert not limit.add(10)
    assert limit.add(1)
    assert limit.error().kind is ErrorKind.PAYLOAD_TOO_LARGE


def test_alt_svc_value() -> None:
    assert alt_svc(51056) == 'h3=":51056"; ma=86400'


def test_relayed_request_is_http11_with_connection_close() -> None:
    head = parse_head(head_of((b"content-type", b"application/json"), (b"host", b"evil")))
    raw = request_bytes(head, chunked=True)
    assert raw.startswith(b"POST /v1/x?a=1 HTTP/1.1\r\nHost: example:51056\r\n")
    assert b"content-type: application/json\r\n" in raw and b"evil" not in raw
    assert raw.endswith(b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")


class Sink:
    def __init__(self) -> None:
        self.events: list[object] = []

    def head(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.events.append((status, headers))

    def data(self, data: bytes) -> None:
        self.events.append(data)

    def end(self) -> None:
        self.events.append("end")


def test_response_reader_streams_a_chunked_answer_as_it_comes() -> None:
    sink = Sink()
    reader = ResponseReader(sink)
    reader.feed(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert sink.events == []  # informational: skipped
    reader.feed(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    reader.feed(b"5\r\nhello\r\n")
    assert sink.events == [
        (200, [("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked")]),
        b"hello",
    ]
    reader.feed(b"6\r\n world\r\n0\r\n\r\n")
    assert sink.events[2:] == [b" world", "end"] and reader.done


def test_response_reader_after_head_ends_at_the_head() -> None:
    sink = Sink()
    reader = ResponseReader(sink, head_only=True)
    reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 743\r\nX-A: b\r\n\r\n")
    assert sink.events == [(200, [("X-A", "b")]), "end"]
