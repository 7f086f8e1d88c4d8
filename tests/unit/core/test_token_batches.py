"""tokenBatch frames: one frame carries a decoding step's plain results for many requests.

Codec (our reader, pycapnp, Debian's capnp tool), the mock engine sending batches only
to clients whose hello asks for them, and the real engine connection over a real UNIX
socket delivering every stream exactly its own tokens from them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mocks.mock_ie.core import MockEngine, MockModel
from mocks.mock_ie.server import MockServer
from neutrino.engine.connection import EngineConnection
from neutrino.engine.messages import (
    FinishReason,
    Hello,
    Message,
    ModalResult,
    Sampling,
    TextQuery,
    TextResult,
    TokenBatch,
)
from neutrino.engine.wire.codec import DecodeError, decode, decode_slow, encode, encode_capnp
from neutrino.engine.wire.framing import FrameDecoder
from neutrino.engine.wire.reader import decode_token_batch
from neutrino.engine.wire.schema import PROTOCOL_VERSION
from neutrino.errors import NeutrinoError
from tests.support.capnp_tool import capnp_decode
from tests.unit.mock_ie.helpers import ByteTokenizer

u32 = st.integers(0, 2**32 - 1)
rids = st.integers(1, 2**64 - 1)


@st.composite
def batches(draw: st.DrawFn) -> TokenBatch:
    entries = draw(st.lists(st.tuples(rids, st.lists(u32, max_size=6)), max_size=40))
    return TokenBatch(
        [r for r, _ in entries], [len(t) for _, t in entries], [i for _, t in entries for i in t]
    )


@given(batches())
def test_batch_round_trips_through_our_reader_and_pycapnp(batch: TokenBatch) -> None:
    frame = encode(0, batch)
    assert decode_token_batch(frame) == batch
    assert decode_slow(frame) == (0, batch)
    assert decode(frame) == (0, batch)


def test_entries_split_the_tokens_in_order() -> None:
    batch = TokenBatch([7, 3, 9], [2, 0, 1], [10, 11, 12])
    assert batch.entries() == [(7, [10, 11]), (3, []), (9, [12])]


@pytest.mark.parametrize(
    ("ids", "counts", "tokens"),
    [([1, 2], [1], [5]), ([1, 2], [1, 1], [5]), ([1], [1], [5, 6])],
)
def test_counts_that_do_not_add_up_are_a_decode_error(
    ids: list[int], counts: list[int], tokens: list[int]
) -> None:
    frame = encode_capnp(0, TokenBatch(ids, counts, tokens))
    with pytest.raises(DecodeError):
        decode_token_batch(frame)
    with pytest.raises(DecodeError):
        decode(frame)


def test_a_text_result_is_not_a_batch() -> None:
    assert decode_token_batch(encode(3, TextResult([1, 2]))) is None


def test_capnp_tool_decodes_a_batch_and_the_hello_flag() -> None:
    frame = encode(0, TokenBatch([5, 6], [1, 2], [0x41424344, 1, 2]))
    out = capnp_decode(frame)
    assert "tokenBatch = (" in out
    # Data fields print as octal escapes: ids 5 and 6 as LE uint64, counts 1 and 2 as LE uint32.
    assert 'requestIds = "\\005' + "\\000" * 7 + "\\006" + "\\000" * 7 + '"' in out
    assert 'tokenCounts = "\\001\\000\\000\\000\\002\\000\\000\\000"' in out
    assert 'tokens = "DCBA' in out
    hello = encode(0, Hello("t", PROTOCOL_VERSION, token_batches=True))
    out = capnp_decode(hello)
    assert "tokenBatches = true" in out


# --------------------------------------------------------------------------- mock engine

STREAMS = 12
REPLY = 40


@pytest.fixture
async def mock(tmp_path: Path) -> AsyncIterator[tuple[MockServer, Path]]:
    engine = MockEngine(
        [MockModel("b", "bytes", 100_000)],
        capacity=64,
        reply_tokens=REPLY,
        tokens_per_frame=3,  # entries of several ids, the last one shorter
        tokenizers={"bytes": ByteTokenizer()},
    )
    srv = MockServer(engine)
    path = tmp_path / "s.sock"
    await srv.start(path)
    yield srv, path
    await srv.close()


def _query(i: int) -> TextQuery:
    return TextQuery("b", [i + 1, i + 2], Sampling(max_tokens=REPLY, seed=1000 + i))


async def _raw_frames(path: Path, token_batches: bool) -> list[tuple[int, Message]]:
    """Every frame the mock sends a raw client that runs STREAMS queries at once."""
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(encode(0, Hello("t", PROTOCOL_VERSION, token_batches=token_batches)))
    writer.write(b"".join(encode(i + 1, _query(i)) for i in range(STREAMS)))
    decoder = FrameDecoder()
    out: list[tuple[int, Message]] = []
    ended = 0
    while ended < STREAMS:
        data = await asyncio.wait_for(reader.read(65536), 5)
        assert data, "connection closed"
        for frame in decoder.feed(data):
            rid, msg = decode(frame)
            out.append((rid, msg))
            if isinstance(msg, TextResult) and msg.finish_reason is not FinishReason.NONE:
                ended += 1
    writer.close()
    return out


def _per_stream(frames: list[tuple[int, Message]]) -> dict[int, list[int]]:
    got: dict[int, list[int]] = {}
    for rid, msg in frames:
        if isinstance(msg, TokenBatch):
            for r, toks in msg.entries():
                got.setdefault(r, []).extend(toks)
        elif isinstance(msg, TextResult):
            got.setdefault(rid, []).extend(msg.tokens)
    return got


async def test_mock_batches_a_step_only_for_clients_that_accept_it(
    mock: tuple[MockServer, Path],
) -> None:
    _, path = mock
    plain = await _raw_frames(path, token_batches=False)
    batched = await _raw_frames(path, token_batches=True)
    assert not any(isinstance(m, TokenBatch) for _, m in plain)
    assert sum(isinstance(m, TokenBatch) for _, m in batched) >= REPLY // 6
    assert all(r == 0 for r, m in batched if isinstance(m, TokenBatch))
    # Same tokens per stream either way, and every stream's final frame is its own.
    assert _per_stream(batched) == _per_stream(plain)
    assert len(_per_stream(plain)) == STREAMS
    finals = [r for r, m in batched if isinstance(m, TextResult) and m.finish_reason.value]
    assert sorted(finals) == list(range(1, STREAMS + 1))


async def test_mock_without_batches_ignores_the_hello_flag(
    mock: tuple[MockServer, Path],
) -> None:
    srv, path = mock
    srv.token_batches = False  # mock_ie --no-token-batches
    frames = await _raw_frames(path, token_batches=True)
    assert not any(isinstance(m, TokenBatch) for _, m in frames)


# --------------------------------------------------------------------------- connection


class Recorder:
    """A stream sink that keeps what the connection hands it."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.flushes = 0
        self.done = asyncio.get_running_loop().create_future()

    def on_result(self, result: TextResult) -> bool:
        self.tokens += result.tokens
        if result.finish_reason is not FinishReason.NONE and not self.done.done():
            self.done.set_result(result.finish_reason)
        return True

    def on_tokens(self, tokens: list[int]) -> bool:
        self.tokens += tokens
        return True

    def on_error(self, error: NeutrinoError) -> None:
        self.done.set_exception(error)

    def on_modal(self, result: ModalResult) -> None:
        raise AssertionError("no modal results expected")

    def flush(self) -> None:
        self.flushes += 1

    def on_moved(self, engine: str, reason: str) -> None:
        pass


async def _through_connection(srv: MockServer, path: Path) -> tuple[dict[int, list[int]], int]:
    """Tokens per stream through a real EngineConnection, and the batches the mock sent."""
    conn = await EngineConnection.open(
        str(path), "mock", timeout=5, heartbeat_interval=60, heartbeat_timeout=60
    )
    try:
        sinks = [Recorder() for _ in range(STREAMS)]
        for i, sink in enumerate(sinks):
            conn.submit(_query(i), sink)
        await asyncio.wait_for(asyncio.gather(*(s.done for s in sinks)), 10)
        assert all(s.flushes >= 1 for s in sinks)
        batches = sum(c.token_batches_sent for c in srv.connections)
        return {i + 1: s.tokens for i, s in enumerate(sinks)}, batches
    finally:
        conn.close()


async def test_connection_gives_each_stream_its_own_tokens_from_batches(
    mock: tuple[MockServer, Path],
) -> None:
    srv, path = mock
    want = _per_stream(await _raw_frames(path, token_batches=False))
    got, batches = await _through_connection(srv, path)
    assert batches >= REPLY // 6  # the connection asked for batches and got them
    assert got == want
    srv.token_batches = False
    assert await _through_connection(srv, path) == (want, 0)
