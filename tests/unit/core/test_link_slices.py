"""One large read from an engine is handled a slice at a time (link.py's SLICE_BYTES):
the sans-IO link keeps the rest pending, and the socket adapter stops reading and takes
a slice per turn of the event loop, so no read holds the loop; order is kept, and a
connection lost with frames pending delivers them before failing what is left."""

from __future__ import annotations

import asyncio
import socket
import time

from neutrino.engine.connection import EngineConnection
from neutrino.engine.link import SLICE_BYTES, EngineLink
from neutrino.engine.messages import (
    FinishReason,
    HelloAck,
    ModelInfo,
    Sampling,
    TextQuery,
    TextResult,
)
from neutrino.engine.wire.codec import encode
from neutrino.engine.wire.schema import PROTOCOL_VERSION
from tests.unit.core.test_link_equivalence import Sink

ACK = HelloAck("scripted", PROTOCOL_VERSION, [ModelInfo("m", 4096)], 8)
QUERY = TextQuery("m", [1, 2, 3], Sampling(max_tokens=10_000))


def _results(rid: int, count: int) -> bytes:
    """``count`` frames of one token each, with logprobs (so not the plain fast path)."""
    return b"".join(
        encode(
            rid,
            TextResult(
                [i], logprobs=[-0.5], top_logprobs=1, top_token_ids=[i], top_token_logprobs=[-0.5]
            ),
        )
        for i in range(count)
    )


def _tokens(sink: Sink) -> list[int]:
    return [t for call in sink.calls if call[0] == "result" for t in call[1]]


def test_the_link_handles_a_large_read_in_slices() -> None:
    link = EngineLink("e", slice_bytes=4096)
    link.receive_data(encode(0, ACK))
    sink = Sink()
    rid = link.submit(QUERY, sink)
    data = _results(rid, 1000) + encode(rid, TextResult([], FinishReason.STOP))
    assert link.receive_data(data) is None
    first = len(_tokens(sink))
    assert 0 < first < 1000 and link.pending
    slices = 1
    while link.pending:
        link.receive_pending()
        slices += 1
    assert _tokens(sink) == list(range(1000))
    assert sink.calls[-2][2] is FinishReason.STOP  # the end came last, after every token
    assert slices >= len(data) // 4096
    assert link.receive_data(_results(rid, 3)) is None and not link.pending  # late: dropped


def test_a_connection_lost_with_frames_pending_delivers_them_first() -> None:
    link = EngineLink("e", slice_bytes=1024)
    link.receive_data(encode(0, ACK))
    sink = Sink()
    rid = link.submit(QUERY, sink)
    link.receive_data(_results(rid, 200))
    assert link.pending
    link.connection_lost()
    assert _tokens(sink) == list(range(200))
    assert sink.calls[-1][0] == "error" and not link.pending


async def test_the_socket_adapter_takes_a_slice_per_turn_of_the_loop() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    conn = EngineConnection("test")
    loop = asyncio.get_running_loop()
    await loop.create_unix_connection(lambda: conn, sock=ours)
    theirs.sendall(encode(0, ACK))
    while not conn.is_open:
        await asyncio.sleep(0.001)
    sink = Sink()
    rid = conn.submit(QUERY, sink)
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    theirs.setblocking(False)
    data = _results(rid, 20_000) + encode(rid, TextResult([], FinishReason.STOP))
    await loop.sock_sendall(theirs, data)
    async with asyncio.timeout(30):
        while not any(c[0] == "result" and c[2] is FinishReason.STOP for c in sink.calls):
            await asyncio.sleep(0.01)
    tick.cancel()
    assert _tokens(sink) == list(range(20_000))
    # A flush per slice (of SLICE_BYTES), not per read of up to 256 KiB; and the
    # ticker ran between them: a turn of its own for each slice but perhaps the first, which
    # may be taken in the turn before the ticker records its first gap (one more turn only
    # when the wait above slept, which it need not: the frames may all be taken by then).
    flushes = sum(1 for c in sink.calls if c[0] == "flush")
    assert flushes >= len(data) // SLICE_BYTES - 1, (flushes, len(data))
    assert len(gaps) >= flushes - 1, (len(gaps), flushes)
    conn.close()
    theirs.close()
