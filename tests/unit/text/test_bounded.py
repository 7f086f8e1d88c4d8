"""tokens_at_least: a refusal of a long prompt from a count that stops at the limit.

One tokenizer of each kind: tiktoken BPE (Qwen2, Llama 3, o200k), Hugging Face BPE
(DeepSeek-V3, SmolLM2), SentencePiece (Llama 2, Gemma) and Mistral's tekken.
"""

from __future__ import annotations

import random

import pytest

from neutrino.text.bounded import PIECE_CHARS, tokens_at_least
from neutrino.text.registry import available_tokenizers, load_tokenizer
from neutrino.text.tokenizer import Tokenizer

WORDS = ["alpha", "beta", "Gamma", "delta,", "épsilon", "zeta\n", "  eta", "θήτα", "42", "<|x|>"]
KINDS = ["qwen2", "llama3", "o200k-harmony", "deepseek-v3", "smollm2", "llama2-sp", "gemma"]
KINDS += ["mistral-tekken"]


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(
            name,
            marks=[pytest.mark.skip(reason=f"{name} not installed")]
            if name not in available_tokenizers()
            else [],
        )
        for name in KINDS
    ],
)
def tok(request: pytest.FixtureRequest) -> Tokenizer:
    return load_tokenizer(request.param)


def _text(n_words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def test_a_lower_bound_past_the_limit_without_encoding_everything(tok: Tokenizer) -> None:
    text = _text(60_000, 1)  # several pieces
    assert len(text) > 4 * PIECE_CHARS
    exact = len(tok.encode(text))
    limit = exact // 5
    calls: list[int] = []

    def encode(piece: str) -> list[int]:
        calls.append(len(piece))
        return tok.encode(piece)

    got = tokens_at_least(encode, text, limit)
    assert got is not None and limit < got <= exact
    assert sum(calls) < len(text) // 2  # it stopped early


def test_a_text_that_fits_is_left_to_the_full_encode(tok: Tokenizer) -> None:
    text = _text(40_000, 7)
    exact = len(tok.encode(text))
    assert tokens_at_least(tok.encode, text, exact) is None
    # Just under the count: a bound past it, but never past the exact count.
    got = tokens_at_least(tok.encode, text, exact - 200)
    assert got is None or exact - 200 < got <= exact


def test_text_with_no_clean_cut_is_still_a_lower_bound(tok: Tokenizer) -> None:
    text = "x" * (2 * PIECE_CHARS + 17)  # no spaces at all: cuts fall anywhere
    exact = len(tok.encode(text))
    got = tokens_at_least(tok.encode, text, 0)
    assert got is not None and 0 < got <= exact
