"""Refusing a prompt over the context without building its whole token list.

A hostile 8 MB prompt encodes to about two million ids: a Python list of int objects
near 70 MB, for a request that is refused anyway. :func:`tokens_at_least` counts the
tokens of a long text piece by piece and stops as soon as the count passes a limit,
so the memory a refused prompt takes is bounded by the piece, not by the body.

Pieces are cut between a word and the space before the next word, where the
pre-tokenizers of byte-level BPE (GPT-2, cl100k/o200k, Qwen, Llama 3) and SentencePiece
split anyway, so the sum of the pieces' counts is the text's count; where no such place
is found near the cut, a few tokens per cut are taken off (``SLACK``) so the result is
a lower bound either way. The caller encodes the whole text as usual when it may fit.
"""

from __future__ import annotations

from collections.abc import Callable

PIECE_CHARS = 1 << 16
SEARCH_CHARS = 4096  # how far past a piece's end a clean cut is looked for
SLACK = 8  # tokens a cut may add, taken off the count for each cut


def _cut(text: str, at: int) -> int:
    """A position at or after ``at`` just before a space between two words (or ``at``)."""
    end = min(len(text) - 1, at + SEARCH_CHARS)
    i = text.find(" ", at, end)
    while i != -1:
        if text[i - 1].isalnum() and text[i + 1].isalnum():
            return i
        i = text.find(" ", i + 1, end)
    return at


def tokens_at_least(encode: Callable[[str], list[int]], text: str, limit: int) -> int | None:
    """A lower bound of ``len(encode(text))`` greater than ``limit`` if the text has more
    than ``limit`` tokens and this shows before the end; None when it may fit."""
    count = 0
    pos = 0
    n = len(text)
    while pos < n:
        end = n if n - pos <= PIECE_CHARS else _cut(text, pos + PIECE_CHARS)
        count += len(encode(text[pos:end]))
        pos = end
        if pos < n:
            count -= SLACK
        if count > limit:
            return count
    return None
