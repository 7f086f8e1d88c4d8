"""Synthetic prompts (their length in real tokenizers' tokens), lengths, and datasets."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from neutrino.loadgen.prompts import (
    WORDS,
    DatasetError,
    Lengths,
    Prompt,
    PromptSource,
    load_dataset,
    synthetic_text,
)
from neutrino.text.registry import load_tokenizer


@pytest.mark.parametrize("family", ["qwen2", "llama3", "cl100k", "mistral-tekken", "gemma3"])
def test_a_word_is_a_token(family: str) -> None:
    """The approximation test_client documents: N words of WORDS are N tokens."""
    tok = load_tokenizer(family)
    base = len(tok.encode("the"))
    for word in WORDS:
        assert len(tok.encode("the " + word)) - base == 1, word
    text = synthetic_text(500, random.Random(0))
    assert len(tok.encode(text)) == 500


def test_lengths_stay_in_their_range() -> None:
    rng = random.Random(0)
    fixed = Lengths(100)
    assert {fixed.draw(rng) for _ in range(50)} == {100}
    spread = Lengths(100, 0.5)
    drawn = [spread.draw(rng) for _ in range(2000)]
    assert min(drawn) >= 50 and max(drawn) <= 150
    assert min(drawn) < 60 and max(drawn) > 140  # the whole range is used
    assert Lengths(1, 1.0, minimum=1).draw(rng) >= 1
    with pytest.raises(ValueError):
        Lengths(10, 1.5)


def test_a_request_prompt_depends_on_seed_and_index_only() -> None:
    src = PromptSource(seed=3, output=Lengths(64, 0.5), synthetic=Lengths(32, 0.5))
    forward = [src.get(i) for i in range(10)]
    backward = [src.get(i) for i in reversed(range(10))][::-1]
    assert forward == backward
    assert len({p.messages for p in forward}) == 10  # different prompts
    other = PromptSource(seed=4, output=Lengths(64, 0.5), synthetic=Lengths(32, 0.5))
    assert other.get(0) != forward[0]
    for p in forward:
        assert p.max_tokens is not None and 32 <= p.max_tokens <= 96
        ((role, text),) = p.messages
        assert role == "user" and 16 <= len(text.split()) <= 48


def test_output_len_zero_sends_no_max_tokens() -> None:
    src = PromptSource(seed=0, output=Lengths(0), text="hello")
    assert src.get(0) == Prompt((("user", "hello"),), None)


def test_dataset(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    lines = [
        {"messages": [{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": [{"type": "text", "text": "Hi "},
                                                   {"type": "text", "text": "there"}]}],
         "max_tokens": 5},
        {"prompt": "Tell me a story"},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    items = load_dataset(path)
    assert items[0] == Prompt((("system", "Be brief."), ("user", "Hi there")), 5)
    assert items[0].system == "Be brief." and items[0].turns == (("user", "Hi there"),)
    src = PromptSource(seed=0, output=Lengths(7), items=items)
    assert [src.get(i).max_tokens for i in range(4)] == [5, 7, 5, 7]  # in turn, repeated
    assert src.get(3).messages == (("user", "Tell me a story"),)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("not json", "Expecting value"),
        ("[1]", "JSON object"),
        ('{"x": 1}', '"messages" or'),
        ('{"messages": []}', "non-empty"),
        ('{"messages": [{"role": "robot", "content": "x"}]}', "role"),
        ('{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}', "text"),
        ('{"prompt": "x", "max_tokens": 0}', "max_tokens"),
        ('{"prompt": "x", "max_tokens": true}', "max_tokens"),
    ],
)
def test_dataset_errors_name_the_line(tmp_path: Path, line: str, says: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "fine"}\n' + line + "\n")
    with pytest.raises(DatasetError, match=f"bad.jsonl:2: .*{says}"):
        load_dataset(path)


def test_empty_dataset(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n\n")
    with pytest.raises(DatasetError, match="no conversation"):
        load_dataset(path)
