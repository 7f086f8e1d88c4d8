"""The tokenizer interface of the text layer, and its two implementations.

Conventions shared by every implementation:

* ``encode`` (and ``encode_prompt``, its variant for whole prompts) recognises
  special-token strings in its input (``"<|im_start|>"`` becomes the special id) and
  never adds BOS/EOS itself.
* ``decode`` turns the concatenated token bytes into text with ``errors="replace"``;
  ``skip_special=True`` drops tokens for which ``is_special`` is true.
* ``token_bytes`` is what one token contributes to the output; special tokens contribute
  their UTF-8 text.
* ``token_to_id`` looks a token up by its text: a special/added token's content, or the
  exact UTF-8 text of one vocabulary token (not the byte-level ``"Ġ"`` spelling).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from neutrino.text.errors import InvalidTokenId, TokenizerError, TokenizerUnavailable
from neutrino.text.hf_tokenizer import HFTokenizer
from neutrino.text.tiktoken_tokenizer import TiktokenTokenizer

__all__ = [
    "HFTokenizer",
    "InvalidTokenId",
    "TiktokenTokenizer",
    "Tokenizer",
    "TokenizerError",
    "TokenizerUnavailable",
]


class Tokenizer(Protocol):
    name: str
    vocab_size: int

    def encode(self, text: str) -> list[int]: ...

    def encode_prompt(self, text: str) -> list[int]:
        """``encode`` for a rendered prompt; may reuse the ids of pieces seen before."""
        ...

    def decode(self, ids: Sequence[int], *, skip_special: bool = True) -> str: ...

    def token_bytes(self, token_id: int) -> bytes: ...

    def is_special(self, token_id: int) -> bool: ...

    def token_to_id(self, token: str) -> int | None: ...
