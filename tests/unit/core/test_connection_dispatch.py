"""How an EngineConnection hands engine frames to its streams, over a real UNIX socket.

The test plays the engine on the other end of a socket pair: it writes exact frames in
one write (so they arrive in one read) and decodes what the connection sends back.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from neutrino.engine.client import LinkSubmission, StreamSink
from neutrino.engine.connection import EngineConnection
from neutrino.engine.messages import (
    Cancel,
    FinishReason,
    Hello,
    HelloAck,
    Message,
    ModalResult,
    Sampling,
    TextQuery,
    TextResult,
    TokenBatch,
)
from neutrino.engine.wire.codec import decode, encode
from neutrino.engine.wire.framing import FrameDecoder
from neutrino.engine.wire.schema import PROTOCOL_VERSION
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.pipeline.assembler import Assembler
from neutrino.pipeline.deadlines import DeadlineWheel
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.state import Lifecycle, State
from neutrino.pipeline.text_stream import TextStream
from neutrino.text.registry import load_tokenizer


@dataclass(eq=False)
class Sink:
    """Records every call in order; raises ``fail`` from on_tokens/on_result if set."""

    fail: Exception | None = None
    fail_flush: bool = False
    calls: list[tuple[str, object]] = field(default_factory=list)
    flushes: int = 0

    def on_tokens(self, tokens: list[int]) -> bool:
        self.calls.append(("tokens", list(tokens)))
        if self.fail is not None:
            raise self.fail
        return True

    def on_result(self, result: TextResult) -> bool:
        self.calls.append(("result", (list(result.tokens), result.finish_reason)))
        if self.fail is not None:
            raise self.fail
        return True

    def on_error(self, error: NeutrinoError) -> None:
        self.calls.append(("error", error))

    def on_modal(self, result: ModalResult) -> None:
        raise AssertionError("no modal results expected")

    def flush(self) -> None:
        self.flushes += 1
        if self.fail_flush:
            self.fail_flush = False
            raise RuntimeError("render bug")

    def on_moved(self, engine: str, reason: str) -> None:
        pass


@dataclass
class Link:
    conn: EngineConnection
    engine: socket.socket
    decoder: FrameDecoder = field(default_factory=FrameDecoder)

    async def send(self, *frames: tuple[int, Message]) -> None:
        """Write ``frames`` in one write (one read on the other side) and let it be read."""
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(self.engine, b"".join(encode(r, m) for r, m in frames))
        await asyncio.sleep(0.05)

    async def received(self) -> list[tuple[int, Message]]:
        """Frames the connection has sent the engine so far (waits briefly for them)."""
        loop = asyncio.get_running_loop()
        out: list[tuple[int, Message]] = []
        while True:
            try:
                data = await asyncio.wait_for(loop.sock_recv(self.engine, 65536), 0.2)
            except TimeoutError:
                return out
            out += [decode(f) for f in self.decoder.feed(data)]


@pytest.fixture
async def link() -> AsyncIterator[Link]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs.setblocking(False)
    conn = EngineConnection("test")
    await asyncio.get_running_loop().create_unix_connection(lambda: conn, sock=ours)
    link = Link(conn, theirs)
    assert [type(m) for _, m in await link.received()] == [Hello]
    await link.send((0, HelloAck("test-engine", PROTOCOL_VERSION, [], 8)))
    assert conn.is_open
    yield link
    conn.close()
    theirs.close()


def _submit(link: Link, *sinks: StreamSink) -> list[int]:
    query = TextQuery("m", [1, 2, 3], Sampling(max_tokens=100))
    return [link.conn.submit(query, s) for s in sinks]


async def test_one_reads_tokens_reach_each_stream_in_one_call_before_its_end(link: Link) -> None:
    a, b, c = Sink(), Sink(), Sink()
    r1, r2, r3 = _submit(link, a, b, c)
    await link.received()  # the three queries
    await link.send(
        (0, TokenBatch([r1, r2, r3], [1, 1, 1], [10, 20, 30])),
        (0, TokenBatch([r1, r2, r3], [1, 2, 1], [11, 21, 22, 31])),
        (r1, TextResult([12])),  # a lone step still comes as a textResult
        (r2, TextResult([23], finish_reason=FinishReason.LENGTH)),
        (0, TokenBatch([r1, r3], [1, 1], [13, 32])),
    )
    # Everything before rid 2's final frame reached each stream first, in one call each.
    assert a.calls == [("tokens", [10, 11, 12]), ("tokens", [13])]
    assert b.calls == [("tokens", [20, 21, 22]), ("result", ([23], FinishReason.LENGTH))]
    assert c.calls == [("tokens", [30, 31]), ("tokens", [32])]
    assert a.flushes == b.flushes == c.flushes == 1  # one flush per stream per read


async def test_a_stream_that_rejects_its_output_fails_alone_with_one_cancel(
    link: Link,
) -> None:
    ok, bad, refused = Sink(), Sink(fail=RuntimeError("parser bug")), Sink()
    refused.fail = NeutrinoError(ErrorKind.ENGINE_ERROR, "cannot be decoded")
    r_ok, r_bad, r_refused = _submit(link, ok, bad, refused)
    await link.received()
    await link.send((0, TokenBatch([r_ok, r_bad, r_refused], [1, 1, 1], [1, 2, 3])))
    # The raising streams end with an error: a bug is an internal error with a safe
    # message, a NeutrinoError is passed on as it is.
    kind, error = bad.calls[-1]
    assert kind == "error" and isinstance(error, NeutrinoError)
    assert error.kind is ErrorKind.INTERNAL and "parser bug" not in error.message
    assert refused.calls[-1] == ("error", refused.fail)
    # The engine is told to stop each of them, once, and nothing else.
    sent = await link.received()
    assert sorted(rid for rid, m in sent if isinstance(m, Cancel)) == sorted([r_bad, r_refused])
    assert all(isinstance(m, Cancel) for _, m in sent)
    # The connection goes on: late frames for the failed streams are dropped.
    await link.send(
        (0, TokenBatch([r_bad, r_ok, r_refused], [1, 1, 1], [4, 5, 6])),
        (r_ok, TextResult([7], finish_reason=FinishReason.STOP)),
    )
    assert link.conn.is_open
    assert ok.calls == [("tokens", [1]), ("tokens", [5]), ("result", ([7], FinishReason.STOP))]
    assert len(bad.calls) == 2 and len(refused.calls) == 2
    assert await link.received() == []


async def test_a_final_result_that_is_rejected_sends_no_cancel(link: Link) -> None:
    sink = Sink(fail=NeutrinoError(ErrorKind.ENGINE_ERROR, "bad final"))
    (rid,) = _submit(link, sink)
    await link.received()
    await link.send((rid, TextResult([1], finish_reason=FinishReason.STOP)))
    assert sink.calls[-1] == ("error", sink.fail)
    assert await link.received() == []  # the engine had finished it already
    assert link.conn.is_open


async def test_a_stream_whose_flush_raises_fails_alone_with_one_cancel(link: Link) -> None:
    ok, bad = Sink(), Sink(fail_flush=True)
    r_ok, r_bad = _submit(link, ok, bad)
    await link.received()
    await link.send((0, TokenBatch([r_ok, r_bad], [1, 1], [1, 2])))
    kind, error = bad.calls[-1]
    assert kind == "error" and isinstance(error, NeutrinoError)
    assert error.kind is ErrorKind.INTERNAL
    assert [(rid, type(m)) for rid, m in await link.received()] == [(r_bad, Cancel)]
    await link.send((r_ok, TextResult([3], finish_reason=FinishReason.STOP)))
    assert ok.calls == [("tokens", [1]), ("result", ([3], FinishReason.STOP))]
    assert link.conn.is_open


class BrokenFrontEnd:
    """A push target whose text rendering raises (a front-end bug); records the end."""

    def __init__(self) -> None:
        self.ended: list[tuple[NeutrinoError | None, str | None]] = []

    def on_parts(self, reasoning: str, calls: list[Any]) -> None:
        pass

    def on_text(self, text: str, n: int, logprobs: Any) -> None:
        raise RuntimeError("render bug")

    def on_end(self, gen: Generation) -> None:
        self.ended.append((gen.error, gen.outcome.finish_reason if gen.outcome else None))


@pytest.mark.parametrize("final", [False, True], ids=["mid-stream", "last-read"])
async def test_a_generation_whose_text_cannot_be_rendered_ends_with_the_error(
    link: Link, final: bool
) -> None:
    """The front end is told once, with the error, whether the bad text came mid-stream
    (the engine is then cancelled) or in the read that also ended the stream."""
    tok = load_tokenizer("qwen2")
    lifecycle = Lifecycle()
    lifecycle.advance(State.QUEUED)
    lifecycle.advance(State.PROCESSING)
    gen = Generation(
        request_id="chatcmpl-t",
        model="m",
        assembler=Assembler(TextStream(tok, [], frozenset()), 3),
        lifecycle=lifecycle,
        on_done=lambda g: None,
    )
    (rid,) = _submit(link, gen)
    gen.attach(LinkSubmission(link.conn, rid), 30.0, DeadlineWheel())
    front = BrokenFrontEnd()
    gen.push_to(front)
    await link.received()
    ids = tok.encode("hi there")
    await link.send((rid, TextResult(ids, FinishReason.STOP if final else FinishReason.NONE)))
    assert len(front.ended) == 1
    error, _ = front.ended[0]
    assert error is not None and error.kind is ErrorKind.INTERNAL
    assert gen.lifecycle.state is (State.COMPLETE if final else State.FAILED)
    cancels = [rid for rid, m in await link.received() if isinstance(m, Cancel)]
    assert cancels == ([] if final else [rid])
    assert link.conn.is_open
