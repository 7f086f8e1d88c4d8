"""Incremental detokenizer: any chunking of any ids gives tokenizer.decode of the whole."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neutrino.text.detokenizer import Detokenizer
from neutrino.text.errors import InvalidTokenId
from neutrino.text.registry import load_tokenizer
from neutrino.text.tokenizer import Tokenizer

from .conftest import AVAILABLE


def _chunks(ids: list[int], cuts: list[int]) -> list[list[int]]:
    points = sorted({c % (len(ids) + 1) for c in cuts} | {0, len(ids)})
    return [ids[a:b] for a, b in pairwise(points)]


def _stream(tok: Tokenizer, chunks: Sequence[Sequence[int]], skip: bool) -> str:
    detok = Detokenizer(tok, skip_special=skip)
    out = [detok.feed(chunk) for chunk in chunks]
    return "".join(out) + detok.finish()


def _ids(tok: Tokenizer) -> st.SearchStrategy[list[int]]:
    """Mix of arbitrary vocabulary ids, specials, and ids of real multi-byte text."""
    special = [i for i in range(tok.vocab_size - 300, tok.vocab_size) if _valid(tok, i)]
    any_id = st.integers(0, tok.vocab_size - 1).filter(lambda i: _valid(tok, i))
    byte_ids = [i for i in (tok.token_to_id(chr(c)) for c in range(32, 127)) if i is not None]
    text_ids = st.text(max_size=20).map(tok.encode)
    element = st.one_of(any_id, st.sampled_from(special), st.sampled_from(byte_ids))
    return st.one_of(
        st.lists(element, max_size=30),
        text_ids,
        st.tuples(text_ids, st.lists(element, max_size=5), text_ids).map(
            lambda t: t[0] + t[1] + t[2]
        ),
    )


def _valid(tok: Tokenizer, token_id: int) -> bool:
    try:
        tok.token_bytes(token_id)
    except InvalidTokenId:
        return False
    return True


def _byte_ids(tok: Tokenizer) -> dict[int, int]:
    """byte value -> id of the single-byte token for it."""
    found: dict[int, int] = {}
    for token_id in range(tok.vocab_size):
        if _valid(tok, token_id):
            piece = tok.token_bytes(token_id)
            if len(piece) == 1 and not tok.is_special(token_id):
                found.setdefault(piece[0], token_id)
        if len(found) == 256:
            break
    return found


NAMES = [n for n in ("qwen2", "cl100k", "llama3", "deepseek-v3") if n in AVAILABLE]


@pytest.mark.parametrize("name", NAMES)
def test_chunking_invariant(name: str) -> None:
    tok = load_tokenizer(name)

    @settings(max_examples=150, deadline=None)
    @given(ids=_ids(tok), cuts=st.lists(st.integers(0, 1000), max_size=8), skip=st.booleans())
    def check(ids: list[int], cuts: list[int], skip: bool) -> None:
        expected = tok.decode(ids, skip_special=skip)
        assert _stream(tok, _chunks(ids, cuts), skip) == expected
        assert _stream(tok, [[i] for i in ids], skip) == expected

    check()


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=40), cuts=st.lists(st.integers(0, 100), max_size=10))
def test_raw_bytes_like_bytes_decode(data: bytes, cuts: list[int]) -> None:
    """Single-byte tokens: output equals bytes.decode("utf-8", "replace") for any split."""
    tok = load_tokenizer("cl100k")
    byte_ids = _byte_ids(tok)
    ids = [byte_ids[b] for b in data]
    assert tok.decode(ids) == data.decode("utf-8", "replace")
    assert _stream(tok, _chunks(ids, cuts), True) == data.decode("utf-8", "replace")


def test_holds_partial_utf8() -> None:
    tok = load_tokenizer("cl100k")
    snowman = "☃".encode()  # 3 bytes
    byte_ids = _byte_ids(tok)
    ids = [byte_ids[b] for b in snowman]
    detok = Detokenizer(tok)
    assert detok.feed(ids[:1]) == ""
    assert detok.pending_bytes == 1
    assert detok.feed(ids[1:2]) == ""
    assert detok.feed(ids[2:]) == "☃"
    assert detok.finish() == ""
    dangling = Detokenizer(tok)
    assert dangling.feed(ids[:2]) == ""
    assert dangling.finish() == "\ufffd"
    assert dangling.finish() == ""


def test_skip_special() -> None:
    tok = load_tokenizer("qwen2")
    ids = tok.encode("<|im_start|>assistant\nHi<tool_call><|im_end|>")
    assert "".join(Detokenizer(tok).feed([i]) for i in ids) == "assistant\nHi<tool_call>"
    keep = Detokenizer(tok, skip_special=False)
    assert "".join(keep.feed([i]) for i in ids) == "<|im_start|>assistant\nHi<tool_call><|im_end|>"


def test_empty_feed_and_invalid_ids() -> None:
    tok = load_tokenizer("cl100k")
    detok = Detokenizer(tok)
    assert detok.feed([]) == ""
    for bad in ([-1], [tok.vocab_size], [100261], [15339, 10**9]):
        with pytest.raises(InvalidTokenId):
            detok.feed(bad)


class _Minimal:
    """A tokenizer with only the Protocol's methods (no precomputed table)."""

    def __init__(self, inner: Tokenizer) -> None:
        self._inner = inner
        self.name = "minimal"
        self.vocab_size = inner.vocab_size

    def encode(self, text: str) -> list[int]:
        return self._inner.encode(text)

    def encode_prompt(self, text: str) -> list[int]:
        return self._inner.encode_prompt(text)

    def decode(self, ids: Sequence[int], *, skip_special: bool = True) -> str:
        return self._inner.decode(ids, skip_special=skip_special)

    def token_bytes(self, token_id: int) -> bytes:
        return self._inner.token_bytes(token_id)

    def is_special(self, token_id: int) -> bool:
        return self._inner.is_special(token_id)

    def token_to_id(self, token: str) -> int | None:
        return self._inner.token_to_id(token)


def test_generic_tokenizer_fallback() -> None:
    tok = _Minimal(load_tokenizer("qwen2"))
    text = "<|im_start|>héllo 😀 世界<|im_end|>"
    ids = tok.encode(text)
    for skip in (True, False):
        detok = Detokenizer(tok, skip_special=skip)
        out = "".join(detok.feed([i]) for i in ids) + detok.finish()
        assert out == tok.decode(ids, skip_special=skip)
    with pytest.raises(InvalidTokenId):
        Detokenizer(tok).feed([-5])


def test_token_tables_are_not_walked_by_the_garbage_collector() -> None:
    """A vocabulary-sized table the collector tracks is walked on every full collection
    (about a tenth of a request's instructions with Qwen's 151,665 ids); tuples of
    strings and bytes drop out of tracking at the first collection."""
    import gc

    table = load_tokenizer("qwen2").token_table()  # type: ignore[attr-defined]
    gc.collect()
    for t in (table.pieces, table.skip_pieces, table.texts, table.skip_texts):
        assert len(t) == table.size > 100_000
        assert not gc.is_tracked(t)
