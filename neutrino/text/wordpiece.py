"""WordPiece tokenizers (BERT family) for encoder models such as embedders.

They serve ``encode`` — what embedding and rerank requests need. Their pieces are not
byte-level, so ``token_bytes`` gives each piece's text (``##`` continuation marks
dropped) rather than exact bytes; nothing streams text out of these models.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import tokenizers


class WordPieceTokenizer:
    def __init__(self, name: str, tokenizer: tokenizers.Tokenizer) -> None:
        tokenizer.no_padding()  # files often ship with padding to a fixed length enabled
        tokenizer.no_truncation()
        self.name = name
        self._tok = tokenizer
        self.vocab_size = int(tokenizer.get_vocab_size(with_added_tokens=True))
        self._special = frozenset(
            i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special
        )

    @classmethod
    def from_file(cls, name: str, path: str | os.PathLike[str]) -> WordPieceTokenizer:
        return cls(name, tokenizers.Tokenizer.from_file(os.fspath(path)))

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self._tok.encode(text, add_special_tokens=False).ids
        return ids

    def encode_prompt(self, text: str) -> list[int]:
        return self.encode(text)

    def decode(self, ids: Sequence[int], *, skip_special: bool = True) -> str:
        text: str = self._tok.decode(list(ids), skip_special_tokens=skip_special)
        return text

    def token_bytes(self, token_id: int) -> bytes:
        piece = self._tok.id_to_token(token_id)
        if piece is None:
            raise ValueError(f"token id {token_id} is not in the vocabulary")
        return piece.removeprefix("##").encode("utf-8")

    def is_special(self, token_id: int) -> bool:
        return token_id in self._special

    def token_to_id(self, token: str) -> int | None:
        found: int | None = self._tok.token_to_id(token)
        return found
