"""The parts of aioquic that are not its public API and that the HTTP/3 adapter
(neutrino/frontends/quic/protocol.py) and the HTTP/3 client (neutrino/loadgen/h3.py)
rely on. aioquic is pinned to 1.7.x; an upgrade that renames or drops one of these
fails here, naming it, rather than somewhere in a request."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection

from neutrino.frontends.quic.head import MAX_STREAMS


def attr(obj: object, name: str) -> Any:
    """``obj.name``, or a failure that names what aioquic no longer has."""
    if not hasattr(obj, name):
        pytest.fail(
            f"aioquic's {type(obj).__module__}.{type(obj).__name__} has no attribute "
            f"{name!r} any more: neutrino/frontends/quic and neutrino/loadgen/h3.py read it"
        )
    return getattr(obj, name)


def connection() -> QuicConnection:
    return QuicConnection(configuration=QuicConfiguration(is_client=True))


def test_the_stream_limit_we_set_is_the_connections_own() -> None:
    """protocol.py raises the concurrent-stream limit through ``_local_max_streams_bidi``
    (aioquic has no setting for it)."""
    quic = connection()
    limit = attr(quic, "_local_max_streams_bidi")
    assert isinstance(attr(limit, "value"), int)
    limit.value = MAX_STREAMS
    assert quic._local_max_streams_bidi.value == MAX_STREAMS


def test_a_streams_send_buffer_and_fin() -> None:
    """``unsent`` reads ``_streams[sid].sender._buffer`` (written, not yet acknowledged);
    a reset before any answer reads ``sender._buffer_fin`` (None until our side ends)."""
    quic = connection()
    quic.send_stream_data(0, b"abc")
    streams = attr(quic, "_streams")
    assert isinstance(streams, dict) and 0 in streams
    sender = attr(streams[0], "sender")
    assert len(attr(sender, "_buffer")) == 3
    assert attr(sender, "_buffer_fin") is None
    quic.send_stream_data(0, b"de", end_stream=True)
    assert len(sender._buffer) == 5
    assert sender._buffer_fin == 5


def test_a_stopped_streams_receiver_keeps_its_code() -> None:
    """A stream refused or no longer read is told by ``receiver._stop_error_code``."""
    quic = connection()
    quic.send_stream_data(0, b"x")
    receiver = attr(quic._streams[0], "receiver")
    assert attr(receiver, "_stop_error_code") is None
    quic.stop_stream(0, 0x10C)
    assert receiver._stop_error_code == 0x10C


async def test_the_asyncio_protocols_own_parts() -> None:
    """``QuicConnectionProtocol``'s connection, loop, timer, deferred transmit, closed
    event and handshake waiter, used by the server's connection and by the client."""
    proto = QuicConnectionProtocol(connection())
    assert isinstance(attr(proto, "_quic"), QuicConnection)
    assert attr(proto, "_loop") is asyncio.get_running_loop()
    attr(proto, "_timer")
    assert callable(attr(proto, "_transmit_soon"))
    assert isinstance(attr(proto, "_closed"), asyncio.Event)
    assert attr(proto, "_connected_waiter") is None  # the client's wait_connected
