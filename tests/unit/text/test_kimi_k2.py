"""Kimi K2's built-in tokenizer (assets/tokenizers/kimi-k2 and neutrino/text/kimi_k2.py)
gives the ids of the operator-folder path (``[model] tokenizers`` over a Kimi K2 model folder,
neutrino/text/kimi_files.py), which reads the pattern from ``tokenization_kimi.py`` and the
special tokens from ``tokenizer_config.json`` as moonshotai/Kimi-K2-Instruct publishes them
(its added_tokens_decoder: 17 named ids from 163584, the five tool-call markers
``"special": false``; ``bos_token`` ``[BOS]``, ``eos_token`` ``[EOS]``)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from neutrino.text.errors import TokenizerError
from neutrino.text.families import load_families
from neutrino.text.kimi_k2 import KIMI_K2_SHA256, build_kimi_k2
from neutrino.text.local_files import LocalTokenizer, load_local_tokenizer
from neutrino.text.registry import load_tokenizer, tokenizer_folder
from neutrino.text.tokenizer import Tokenizer
from tests.unit.text.test_local_files import KIMI_CLASS_FILE

SHIPPED = tokenizer_folder("kimi-k2")

# Kimi-K2-Instruct's tokenizer_config.json: added_tokens_decoder (id, content, special).
PUBLISHED_ADDED = [
    (163584, "[BOS]", True),
    (163585, "[EOS]", True),
    (163586, "<|im_end|>", True),
    (163587, "<|im_user|>", True),
    (163588, "<|im_assistant|>", True),
    (163590, "<|start_header_id|>", True),
    (163591, "<|end_header_id|>", True),
    (163593, "[EOT]", True),
    (163594, "<|im_system|>", True),
    (163595, "<|tool_calls_section_begin|>", False),
    (163596, "<|tool_calls_section_end|>", False),
    (163597, "<|tool_call_begin|>", False),
    (163598, "<|tool_call_argument_begin|>", False),
    (163599, "<|tool_call_end|>", False),
    (163601, "<|im_middle|>", True),
    (163838, "[UNK]", True),
    (163839, "[PAD]", True),
]

CORPUS = [
    "Hello world, naïve café. Grüße 你好世界，今天天气很好。 🎉 1234567 x",  # noqa: RUF001
    "日本語のテキストと한국어 텍스트; Привет, мир! Γειά σου κόσμε مرحبا שלום नमस्ते",  # noqa: RUF001
    "emoji 😀👍🏽 👨‍👩‍👧 ‼️ 🇨🇭 and ZWJ\u200d joins \ufe0f",
    "def getElementById(self, x_id: int) -> Node:\n    return self._nodes[x_id]  # O(1)\r\n",
    'fn main() {\n\tprintln!("{}", 0x1F_u32 as f64 / 3.0);\n}\n\n\n   ',
    "It's DON'T we'll they're I'M; camelCaseWords and HTTPServerError 12,345.678",
    "<|im_system|>system<|im_middle|>You are Kimi.<|im_end|><|im_user|>user<|im_middle|>"
    "北京天气？<|im_end|><|im_assistant|>assistant<|im_middle|>",  # noqa: RUF001
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "北京"}<|tool_call_end|><|tool_calls_section_end|>',
    "[BOS]text[EOS] [EOT]<|start_header_id|>x<|end_header_id|> [UNK][PAD]",
    "<|reserved_token_163589|>a<|reserved_token_163600|> <|reserved_token_163837|>\n",
    "<|im_end|> <|im_end|>\n\n<|im_end|>  trailing   ",
    "",
]


def _random_texts(count: int) -> list[str]:
    """Mixed text drawn from every kind of character the pattern treats apart."""
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "0123456789",
        " \t\n\r  \u3000",
        "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生",
        "ひらがなカタカナ한국어ÄÖÜäöüßéèçñ",
        "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~，。！？「」",  # noqa: RUF001
        "😀🎉👍🏽🚀❤️🇯🇵",
    ]
    specials = ["<|im_end|>", "<|im_middle|>", "<|tool_call_begin|>", "[EOS]"]
    rng = random.Random(20250711)
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 12)):
            if rng.random() < 0.1:
                parts.append(rng.choice(specials))
            else:
                pool = rng.choice(pools)
                parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 8))))
        texts.append("".join(parts))
    return texts


@pytest.fixture(scope="module")
def folder_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> LocalTokenizer:
    """The same rank file in a folder laid out as Kimi K2's repository has it."""
    assert SHIPPED is not None
    folder = tmp_path_factory.mktemp("Kimi-K2-Instruct")
    shutil.copy(SHIPPED / "tiktoken.model", folder / "tiktoken.model")
    (folder / "tokenization_kimi.py").write_text(KIMI_CLASS_FILE)
    flags = {"lstrip": False, "normalized": False, "rstrip": False, "single_word": False}
    config = {
        "added_tokens_decoder": {
            str(i): {"content": text, **flags, "special": special}
            for i, text, special in PUBLISHED_ADDED
        },
        "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
        "bos_token": "[BOS]",
        "eos_token": "[EOS]",
        "pad_token": "[PAD]",
        "unk_token": "[UNK]",
        "tokenizer_class": "TikTokenTokenizer",
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    return load_local_tokenizer("kimi-k2-folder", folder)


@pytest.fixture(scope="module")
def builtin() -> Tokenizer:
    return load_tokenizer("kimi-k2")


def test_the_rank_file_is_shipped_and_registered() -> None:
    assert SHIPPED is not None and SHIPPED.name == "kimi-k2"
    assert (SHIPPED / "LICENSE").is_file() and KIMI_K2_SHA256 in (SHIPPED / "README.md").read_text()


def test_builtin_ids_equal_the_operator_folders(
    builtin: Tokenizer, folder_tokenizer: LocalTokenizer
) -> None:
    folder = folder_tokenizer.tokenizer
    for text in CORPUS + _random_texts(300):
        ids = builtin.encode(text)
        assert ids == folder.encode(text), text
        assert builtin.encode_prompt(text) == ids
        assert builtin.decode(ids, skip_special=False) == text
        assert builtin.decode(ids) == folder.decode(ids)


def test_special_token_layout_equals_the_operator_folders(
    builtin: Tokenizer, folder_tokenizer: LocalTokenizer
) -> None:
    folder = folder_tokenizer.tokenizer
    assert builtin.vocab_size == folder.vocab_size == 163840
    for i in range(163584, 163840):
        text = folder.token_bytes(i).decode("utf-8")
        assert builtin.token_bytes(i) == folder.token_bytes(i)
        assert builtin.token_to_id(text) == folder.token_to_id(text) == i
        assert builtin.is_special(i) == folder.is_special(i), text
    for i, text, special in PUBLISHED_ADDED:
        assert builtin.token_to_id(text) == i and builtin.is_special(i) == special
    assert builtin.token_to_id("<|reserved_token_163600|>") == 163600
    assert (folder_tokenizer.bos_token, folder_tokenizer.eos_token) == ("[BOS]", "[EOS]")


def test_decoding_keeps_the_tool_markers_and_drops_the_specials(builtin: Tokenizer) -> None:
    text = "<|im_assistant|>assistant<|im_middle|>ok<|tool_calls_section_begin|>x<|im_end|>"
    assert builtin.decode(builtin.encode(text)) == "assistantok<|tool_calls_section_begin|>x"


def test_the_kimi_k2_family_uses_it() -> None:
    family = load_families()["kimi-k2"]
    tokenizer = load_tokenizer(family.tokenizer)
    ids = {tokenizer.token_to_id(t) for t in family.stop_tokens}
    assert ids == {163586, 163585}  # <|im_end|>, [EOS]
    assert tokenizer.token_to_id(family.bos_token or "") == 163584


def test_a_different_rank_file_is_refused(tmp_path: Path) -> None:
    assert SHIPPED is not None
    data = (SHIPPED / "tiktoken.model").read_bytes()
    (tmp_path / "tiktoken.model").write_bytes(data.replace(b" 0\n", b" 0\r\n", 1))
    with pytest.raises(TokenizerError, match=r"is not Kimi K2's \(SHA-256 [0-9a-f]{64}\)"):
        build_kimi_k2("kimi-k2", tmp_path)
