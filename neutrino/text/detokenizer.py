"""Sans-IO incremental detokenizer: token ids in, newly completed text out."""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from typing import Protocol

from neutrino.text.errors import InvalidTokenId
from neutrino.text.token_table import TokenTable
from neutrino.text.tokenizer import Tokenizer

__all__ = ["Detokenizer"]

_utf8_decode = codecs.utf_8_decode


class _Pieces(Protocol):
    def __getitem__(self, token_id: int, /) -> bytes | None: ...


class _LazyPieces:
    """Per-token bytes for a tokenizer without a precomputed table (cached per id)."""

    __slots__ = ("_cache", "_skip", "_tokenizer")

    def __init__(self, tokenizer: Tokenizer, skip_special: bool) -> None:
        self._tokenizer = tokenizer
        self._skip = skip_special
        self._cache: dict[int, bytes] = {}

    def __getitem__(self, token_id: int, /) -> bytes | None:
        piece = self._cache.get(token_id)
        if piece is None:
            if token_id < 0:
                raise IndexError(token_id)
            tok = self._tokenizer
            piece = b"" if self._skip and tok.is_special(token_id) else tok.token_bytes(token_id)
            self._cache[token_id] = piece
        return piece


class Detokenizer:
    """Turns a stream of token ids into text, one instance per output stream.

    ``feed`` returns only text whose UTF-8 bytes are complete; a partial multi-byte
    sequence is held back until later tokens complete it. ``finish`` flushes what is left,
    with invalid or dangling bytes as U+FFFD exactly as ``bytes.decode("utf-8", "replace")``
    would produce. For the byte-level tokenizers of this package the concatenated output
    equals ``tokenizer.decode(all_ids, skip_special=skip_special)`` however the ids are split
    (for SentencePiece models too: the first space of the stream is dropped, as their
    decode drops it).
    """

    __slots__ = ("_pending", "_pieces", "_size", "_strip", "_texts")

    def __init__(self, tokenizer: Tokenizer, *, skip_special: bool = True) -> None:
        table_of = getattr(tokenizer, "token_table", None)
        table = table_of() if callable(table_of) else None
        self._pieces: _Pieces
        self._texts: tuple[str | None, ...] | None
        if isinstance(table, TokenTable):
            self._pieces = table.skip_pieces if skip_special else table.pieces
            self._texts = table.skip_texts if skip_special else table.texts
            self._size = table.size
        else:
            self._pieces = _LazyPieces(tokenizer, skip_special)
            self._texts = None
            self._size = 0
        self._pending = b""
        # SentencePiece models with a dummy prefix: the stream's first space is dropped,
        # as their own decode drops it.
        self._strip = bool(getattr(tokenizer, "strip_leading_space", False))

    def feed(self, ids: Sequence[int]) -> str:
        """Text completed by ``ids`` (possibly empty)."""
        texts = self._texts
        if texts is not None and not self._pending and len(ids) == 1 and not self._strip:
            token_id = ids[0]
            if 0 <= token_id < self._size:
                text = texts[token_id]
                if text is not None:  # whole UTF-8 on its own: the common case
                    return text
        pieces = self._pieces
        try:
            data = b"".join([pieces[i] for i in ids])  # type: ignore[misc]
        except (IndexError, TypeError, KeyError, InvalidTokenId):
            raise self._invalid(ids) from None
        if ids and min(ids) < 0:
            raise self._invalid(ids)
        if self._pending:
            data = self._pending + data
        text, consumed = _utf8_decode(data, "replace", False)
        self._pending = data[consumed:]
        return self._stripped(text) if self._strip else text

    def finish(self) -> str:
        """Flush held-back bytes (as U+FFFD replacement characters); the stream is over."""
        if not self._pending:
            return ""
        text = _utf8_decode(self._pending, "replace", True)[0]
        self._pending = b""
        return self._stripped(text) if self._strip else text

    def drop(self) -> int:
        """Discard held-back bytes (the stream was cut inside a character); how many."""
        n = len(self._pending)
        self._pending = b""
        return n

    def _stripped(self, text: str) -> str:
        if text:
            self._strip = False
            if text[0] == " ":
                return text[1:]
        return text

    @property
    def pending_bytes(self) -> int:
        """Number of bytes held back waiting for the rest of a UTF-8 sequence."""
        return len(self._pending)

    def _invalid(self, ids: Sequence[int]) -> InvalidTokenId:
        for i in ids:
            try:
                ok = i >= 0 and self._pieces[i] is not None
            except (IndexError, TypeError, KeyError, InvalidTokenId):
                ok = False
            if not ok:
                return InvalidTokenId(f"token id {i} is not in the vocabulary")
        return InvalidTokenId("invalid token id")  # pragma: no cover
