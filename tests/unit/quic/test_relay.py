"""The relay's sans-IO side: what an aiohttp handler writes, read as an HTTP/1.1 response,
and whether its connection's close leaves the response whole or cut short."""

from __future__ import annotations

import pytest

from neutrino.frontends.quic.relay import RelayTransport, ResponseReader


class Recorder:
    """A Sink that keeps what it is told."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        self.body = b""
        self.ended = False

    def head(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.status, self.headers = status, headers

    def data(self, data: bytes) -> None:
        assert not self.ended
        self.body += data

    def end(self) -> None:
        assert not self.ended
        self.ended = True


def relay(head_only: bool = False) -> tuple[RelayTransport, Recorder, list[bool]]:
    sink = Recorder()
    closes: list[bool] = []
    transport = RelayTransport(
        ResponseReader(sink, head_only), lambda: 0, closes.append, None, lambda _: None
    )
    return transport, sink, closes


LENGTH = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize(
    "written",
    [
        LENGTH + b"abcd",  # fewer bytes than its length
        CHUNKED + b"4\r\nabcd\r\n",  # no last chunk
        CHUNKED + b"4\r\nab",  # cut inside a chunk
        b"HTTP/1.1 200 OK\r\nContent-Le",  # cut inside the head
        b"",  # nothing at all
    ],
)
def test_a_response_cut_short_is_not_ended(written: bytes) -> None:
    transport, sink, closes = relay()
    transport.write(written)
    transport.close()
    assert closes == [False]
    assert not sink.ended


@pytest.mark.parametrize(
    ("written", "body"),
    [
        (LENGTH + b"0123456789", b"0123456789"),
        (CHUNKED + b"4\r\nabcd\r\n2\r\nef\r\n0\r\n\r\n", b"abcdef"),
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end", b"until the end"),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b""),
        (b"HTTP/1.1 100 Continue\r\n\r\n" + LENGTH + b"0123456789", b"0123456789"),
    ],
)
def test_a_whole_response_ends(written: bytes, body: bytes) -> None:
    transport, sink, closes = relay()
    transport.write(written)
    transport.close()
    assert closes == [True]
    assert sink.ended and sink.body == body
    assert sink.status in (200, 204)


def test_a_head_answer_is_whole_without_its_body() -> None:
    transport, sink, closes = relay(head_only=True)
    transport.write(LENGTH)
    transport.close()
    assert closes == [True] and sink.ended and sink.body == b""
    assert ("Content-Length", "10") not in sink.headers


def test_a_length_response_ends_before_the_close() -> None:
    transport, sink, closes = relay()
    transport.write(LENGTH + b"01234")
    assert not sink.ended
    transport.write(b"56789")
    assert sink.ended and closes == []
    transport.close()
    transport.close()
    assert closes == [True]
