"""Byte-level ``tokenizer.json`` vocabularies served by tiktoken: the proof that each one
converted gives the ids the ``tokenizers`` library gives, and the refusals.

Each proven fingerprint (``neutrino.text.hf_tiktoken.PROVEN``) is checked here against the
library built from the same file: on a corpus (Python's own sources, the licence texts
Debian ships, this project's README), on every code point in five contexts, on every added
token between texts, and on random text mixed with added tokens (hypothesis), through
``encode`` and ``encode_prompt`` both.
"""

# Fullwidth characters here are deliberate: DeepSeek's added tokens and CJK text.
# ruff: noqa: RUF001

from __future__ import annotations

import functools
import json
import sysconfig
import zipfile
from pathlib import Path
from typing import Any

import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st

from neutrino.text import hf_tiktoken, registry
from neutrino.text.hf_tiktoken import PROVEN, convert, fingerprint, tokenizer_json
from neutrino.text.hf_tokenizer import HFTokenizer
from neutrino.text.tiktoken_tokenizer import TiktokenTokenizer
from neutrino.text.tokenizer import Tokenizer

from .conftest import AVAILABLE

# Registered vocabularies read from a tokenizer.json that tiktoken serves, one per
# fingerprint first (the corpus runs once per fingerprint), then those sharing one.
CONVERTED = {
    "glm47-flash": "GLM-4.7-Flash",
    "deepseek-v3": "DeepSeek-V3",
    "deepseek-r1-distill-llama": "Llama 3.1 (DeepSeek-R1 distill)",
    "deepseek-r1-distill-qwen": "Qwen2.5 (DeepSeek-R1 distill)",
    "olmo2": "OLMo 2",
    "smollm2": "SmolLM2",
}
SHARING = ("deepseek-r1", "deepseek-v3.1", "deepseek-r1-0528-qwen3")
# Read from a tokenizer.json the library keeps serving, and why.
KEPT = {
    "deepseek-coder": "a pre-tokeniser with no known tiktoken pattern",
    "command-r": "a vocabulary string outside the byte alphabet",
    "gemma": "BPE dropout or byte fallback",
}


def _file_text(name: str) -> str:
    """The tokenizer.json a registered vocabulary is read from."""
    source = registry._SOURCES[name]
    folder = registry._package_dir(source)
    if folder is None:
        pytest.skip(f"tokenizer {name!r} not installed")
    path = folder / source.files[0]
    if path.suffix == ".zip":
        return zipfile.ZipFile(path).read("tokenizer.json").decode("utf-8")
    return path.read_text(encoding="utf-8")


@functools.cache
def _pair(name: str) -> tuple[Tokenizer, tokenizers.Tokenizer]:
    """The registry's tokenizer and the library's, from the same file."""
    return registry.load_tokenizer(name), tokenizers.Tokenizer.from_str(_file_text(name))


def _library(hf: tokenizers.Tokenizer, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]


def _corpus() -> list[str]:
    """Texts of several kinds, about 1 MB: Python's own sources, the licence texts Debian
    ships, this project's README and documentation (text found wherever the suite runs)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(stdlib.glob("*.py"))[:50] + sorted(stdlib.glob("email/*.py"))[:10]
    files += sorted(Path("/usr/share/common-licenses").glob("*"))[:12]
    repo = Path(__file__).parents[3]
    files += [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]
    texts = []
    for f in files:
        try:
            texts.append(f.read_text(encoding="utf-8")[:20_000])
        except (OSError, UnicodeDecodeError):
            continue
    return texts


_SEPARATORS = (" ", "a", "1", "\n")


def _code_points() -> list[str]:
    """Every code point (surrogates aside), 256 at a time, in two contexts: a run of
    them, and each followed by a space, a letter, a digit or a line feed (in turn)."""
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    texts = []
    for k in range(0, len(points), 256):
        run = points[k : k + 256]
        texts.append("".join(run))
        texts.append("".join(c + _SEPARATORS[i % 4] for i, c in enumerate(run)))
    return texts


@pytest.mark.parametrize("name", [*CONVERTED, *SHARING])
def test_served_by_tiktoken_and_proven(name: str) -> None:
    if name not in AVAILABLE:
        pytest.skip(f"tokenizer {name!r} not installed")
    doc = json.loads(_file_text(name))
    assert fingerprint(doc) in PROVEN
    assert isinstance(registry.load_tokenizer(name), TiktokenTokenizer)


@pytest.mark.parametrize("name", sorted(KEPT))
def test_others_keep_the_library(name: str) -> None:
    if name not in AVAILABLE:
        pytest.skip(f"tokenizer {name!r} not installed")
    doc = json.loads(_file_text(name))
    assert (
        convert(doc, hf_tiktoken.added_in_file(doc), proven={fingerprint(doc): name})
        == (KEPT[name])
    )
    assert isinstance(registry.load_tokenizer(name), HFTokenizer)


def test_every_fingerprint_is_checked_here() -> None:
    prints = {fingerprint(json.loads(_file_text(n))) for n in CONVERTED if n in AVAILABLE}
    assert prints <= set(PROVEN)
    assert len(prints) == len([n for n in CONVERTED if n in AVAILABLE])


@pytest.mark.parametrize("name", list(CONVERTED))
def test_corpus_and_every_code_point(name: str) -> None:
    if name not in AVAILABLE:
        pytest.skip(f"tokenizer {name!r} not installed")
    tok, hf = _pair(name)
    texts = _corpus() + _code_points()
    expected = _library(hf, texts)
    wrong = [t for t, ids in zip(texts, expected, strict=True) if tok.encode(t) != ids]
    assert not wrong, f"{len(wrong)} texts differ, the first: {wrong[0][:200]!r}"
    assert sum(map(len, expected)) > 500_000  # the corpus is not empty


@pytest.mark.parametrize("name", [*CONVERTED, *SHARING])
def test_every_added_token_between_texts(name: str) -> None:
    if name not in AVAILABLE:
        pytest.skip(f"tokenizer {name!r} not installed")
    tok, hf = _pair(name)
    added = [t.content for t in hf.get_added_tokens_decoder().values()]
    assert added
    text = "".join(f"x{t} {t}\n{t}1 {t}\u0338 a{t}{t}" for t in added)
    assert tok.encode(text) == _library(hf, [text])[0]
    assert tok.encode_prompt(text) == _library(hf, [text])[0]


_POOLS = (
    "abcXYZ ", " \t\n\r\n", "0123456789", "'sStTll", ".,;!?-_()[]{}\"'<|>", "你好世界中文",
    "ひらがなカタカナー・゛゜゠", "한국어", "Привет", "naïve café", "\u0301\u0308\u0338",
    "\x00\x04\x1d\u200b\u200d\ufeff\ue000", "🎉👍🏽", "\u00a0\u2003\u3000\u2028", "ſK",
    "١٢٣ⅫⅣ½", "｜▁", "\U00050000\U000e0001",
)  # fmt: skip
_pieces = st.one_of(
    st.sampled_from(_POOLS).flatmap(lambda p: st.text(alphabet=p, max_size=6)),
    st.text(st.characters(codec="utf-8"), max_size=4),
)


@pytest.mark.parametrize("name", list(CONVERTED))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_random_text_with_added_tokens(name: str, data: st.DataObject) -> None:
    if name not in AVAILABLE:
        pytest.skip(f"tokenizer {name!r} not installed")
    tok, hf = _pair(name)
    added = sorted(t.content for t in hf.get_added_tokens_decoder().values())
    parts = data.draw(st.lists(st.one_of(_pieces, st.sampled_from(added)), max_size=14))
    text = "".join(parts)
    expected = _library(hf, [text])[0]
    assert tok.encode(text) == expected
    assert tok.encode_prompt(text) == expected


def test_a_normalising_family_normalises_each_piece_apart() -> None:
    """NFC runs on the text between added tokens, as the library's does: a combining
    mark after an added token does not merge into the token's last character."""
    if "deepseek-r1-distill-qwen" not in AVAILABLE:
        pytest.skip("tokenizer not installed")
    tok, hf = _pair("deepseek-r1-distill-qwen")
    for text in ("<｜Assistant｜>\u0338x", "e\u0301<｜User｜>\u0338", "\u1ac1\u0301\u1dca"):
        assert tok.encode(text) == _library(hf, [text])[0]


def test_unspellable_characters_go_to_the_library() -> None:
    """SmolLM2 has no token for a few bytes; a piece holding one is the library's."""
    if "smollm2" not in AVAILABLE:
        pytest.skip("tokenizer not installed")
    tok, hf = _pair("smollm2")
    for text in ("a\x04b", "x\U00050000y<|im_start|>ok \x1d", "plain"):
        assert tok.encode(text) == _library(hf, [text])[0]


# --- refusals, on small files built here --------------------------------------------------


def _tiny(**changes: Any) -> dict[str, Any]:
    """A small byte-level tokenizer.json (every byte, three merges) as the library writes
    it, with ``changes`` to its top-level keys or (``model_*``) its model."""
    alphabet = [chr(c) for c in range(0x21, 0x7F)] + ["Ġ"]
    from neutrino.text.bytelevel import BYTE_TO_CHAR

    vocab = {c: i for i, c in enumerate(BYTE_TO_CHAR)}
    merges = [["Ġ", "t"], ["h", "e"], ["Ġt", "he"]]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    assert all(c in vocab for c in alphabet)
    added = {"id": len(vocab), "content": "<|end|>", "special": True}
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True}
    model: dict[str, Any] = {"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False}
    model |= {"continuing_subword_prefix": None, "end_of_word_suffix": None}
    model |= {"byte_fallback": False, "ignore_merges": False, "vocab": vocab, "merges": merges}
    doc: dict[str, Any] = {
        "version": "1.0",
        "added_tokens": [added | flags],
        "normalizer": None,
        "pre_tokenizer": byte_level | {"use_regex": True},
        "post_processor": None,
        "decoder": byte_level | {"add_prefix_space": True, "use_regex": True},
        "model": model,
    }
    for key, value in changes.items():
        if key.startswith("model_"):
            doc["model"][key[len("model_") :]] = value
        else:
            doc[key] = value
    return doc


def _proven(doc: dict[str, Any]) -> dict[str, str]:
    return {fingerprint(doc): "tiny"}


def test_a_tiny_proven_file_is_tiktokens_and_agrees() -> None:
    doc = _tiny()
    tok = tokenizer_json("tiny", doc, proven=_proven(doc))
    assert isinstance(tok, TiktokenTokenizer)
    hf = tokenizers.Tokenizer.from_str(json.dumps(doc))
    text = "the theme<|end|> the\n\tthe 12"
    assert tok.encode(text) == hf.encode(text, add_special_tokens=False).ids
    assert tok.decode(tok.encode(text), skip_special=False) == text


def test_an_unproven_file_keeps_the_library() -> None:
    doc = _tiny()
    assert convert(doc, hf_tiktoken.added_in_file(doc)) == (
        "a vocabulary not proven identical to the tokenizers library"
    )
    assert isinstance(tokenizer_json("tiny", doc), HFTokenizer)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"pre_tokenizer": {"type": "Whitespace"}},
         "a pre-tokeniser with no known tiktoken pattern"),
        ({"normalizer": {"type": "Lowercase"}}, "a normaliser other than NFC"),
        ({"model_byte_fallback": True}, "BPE dropout or byte fallback"),
        ({"model_merges": [["h", "e"], ["Ġt", "he"], ["Ġ", "t"]]},
         "merges that do not follow the ranks"),
        ({"added_tokens": [{"id": 300, "content": "<|end|>", "single_word": True,
                            "lstrip": False, "rstrip": False, "normalized": False,
                            "special": True}]}, "an added token matched as a single word"),
        ({"added_tokens": [
            {"id": 300, "content": "<|end|>", "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": True},
            {"id": 301, "content": "|>x", "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": True, "special": False}]},
         "normalized added tokens that the library finds in a pass of their own"),
        ({"decoder": {"type": "Metaspace"}}, "not a byte-level vocabulary"),
    ],
)  # fmt: skip
def test_refusals_name_their_reason(changes: dict[str, Any], reason: str) -> None:
    doc = _tiny(**changes)
    assert convert(doc, hf_tiktoken.added_in_file(doc), proven=_proven(doc)) == reason


def test_a_vocabulary_missing_a_continuation_byte_is_refused() -> None:
    doc = _tiny()
    from neutrino.text.bytelevel import BYTE_TO_CHAR

    del doc["model"]["vocab"][BYTE_TO_CHAR[0x85]]
    assert convert(doc, hf_tiktoken.added_in_file(doc), proven=_proven(doc)) == (
        "a vocabulary missing UTF-8 continuation bytes"
    )


# --- model folders ---------------------------------------------------------------------------


def _folder(tmp_path: Path, config: dict[str, Any] | None) -> Path:
    (tmp_path / "tokenizer.json").write_text(_file_text("deepseek-r1-distill-qwen"), "utf-8")
    if config is not None:
        (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), "utf-8")
    return tmp_path


_FOLDER_TEXT = "<｜User｜>  hi there\n<｜Assistant｜>  ok<｜end▁of▁sentence｜> 12345 naïve"


@pytest.mark.parametrize(
    "config",
    [
        None,
        # The config's own flags on an added token (rstrip) and a vocabulary token it
        # names special: the tokenizer served is the library's with them applied.
        {"added_tokens_decoder": {"151645": {"content": "<｜Assistant｜>", "rstrip": True,
                                             "special": True, "normalized": False}},
         "additional_special_tokens": ["hello"]},
    ],
)  # fmt: skip
def test_a_model_folder_with_a_proven_file_is_tiktokens(
    tmp_path: Path, config: dict[str, Any] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "deepseek-r1-distill-qwen" not in AVAILABLE:
        pytest.skip("tokenizer not installed")
    from neutrino.text.local_files import load_local_tokenizer

    folder = _folder(tmp_path, config)
    tok = load_local_tokenizer("mine", folder).tokenizer
    assert isinstance(tok, TiktokenTokenizer)
    monkeypatch.setattr(hf_tiktoken, "PROVEN", {})  # the same folder, the library's way
    library = load_local_tokenizer("mine", folder).tokenizer
    assert isinstance(library, HFTokenizer)
    for text in (_FOLDER_TEXT, _FOLDER_TEXT.replace(" hi", "hello")):
        ids = library.encode(text)
        assert tok.encode(text) == ids
        assert tok.encode_prompt(text) == ids
        assert [tok.is_special(i) for i in ids] == [library.is_special(i) for i in ids]
        assert tok.decode(ids) == library.decode(ids)
    assert tok.token_to_id("hello") == library.token_to_id("hello")
