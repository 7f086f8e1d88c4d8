"""What each request asks (sans-IO): synthetic prompts of a chosen length, or a JSONL file of
conversations.

Token counts are approximated without a tokenizer: a synthetic prompt is made of words drawn
from ``WORDS``, each of which is a single token (with its leading space) in the tokenizers of
the common model families (GPT's cl100k and o200k, Llama 2 and 3, Qwen, Mistral's Tekken,
Gemma), so a prompt of ``N`` words is ``N`` tokens before the chat template adds its own. The
report's counts are the server's, never this estimate.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Common short English words, each one token after a space in the families named above
# (tests/unit/loadgen/test_prompts.py checks it against Neutrino's own tokenizers).
_WORDS_TEXT = """
the of and to in is it you that he was for on are with as his they be at one have this from
or had by word but not what all were we when your can said there use an each which she do
how their if will up other about out many then them these so some her would make like him
into time has look two more write go see number no way could people my than first water been
call who its now find long down day did get come made may part over new sound take only
little work know place year live me back give most very after thing our just name good
sentence man think say great where help through much before line right too mean old any same
tell boy follow came want show also around form three small set put end does another well
large must big even such because turn here why ask went men read need land different home us
move try kind hand picture again change off play spell air away animal house point page
letter mother answer found study still learn should world high every near add food between
own below country plant last school father keep tree never start city earth eye light
thought head under story saw left few while along might close something seem next hard open
example begin life always those both paper together got group often run important until
children side feet car mile night walk white sea began grow took river four carry state once
book hear stop without second late miss idea enough eat face watch far real almost let above
girl sometimes mountain cut young talk soon list song being leave family
"""
WORDS = tuple(_WORDS_TEXT.split())

MAX_DATASET_BYTES = 256 * 1024 * 1024
MAX_DATASET_ITEMS = 1_000_000
MAX_TOKENS_LIMIT = 1_000_000
ROLES = frozenset({"system", "developer", "user", "assistant"})


@dataclass(frozen=True, slots=True)
class Prompt:
    """One request's conversation and its output limit (None: the server's default)."""

    messages: tuple[tuple[str, str], ...]  # (role, text)
    max_tokens: int | None

    @property
    def system(self) -> str:
        """The system and developer messages' text, joined (Anthropic takes it apart)."""
        return "\n\n".join(t for r, t in self.messages if r in ("system", "developer"))

    @property
    def turns(self) -> tuple[tuple[str, str], ...]:
        """The messages other than system and developer ones."""
        return tuple((r, t) for r, t in self.messages if r not in ("system", "developer"))


@dataclass(frozen=True, slots=True)
class Lengths:
    """A length ``mean`` spread uniformly over ``mean * (1 - spread)`` to ``mean * (1 +
    spread)`` (``spread`` 0: always ``mean``), as whole numbers of at least ``minimum``."""

    mean: int
    spread: float = 0.0
    minimum: int = 1

    def __post_init__(self) -> None:
        if self.mean < 0:
            raise ValueError("a length cannot be negative")
        if not 0.0 <= self.spread <= 1.0:
            raise ValueError("a length range must be between 0 and 1")

    def draw(self, rng: random.Random) -> int:
        low = round(self.mean * (1.0 - self.spread))
        high = round(self.mean * (1.0 + self.spread))
        return max(self.minimum, rng.randint(low, high) if high > low else low)


def synthetic_text(words: int, rng: random.Random) -> str:
    """``words`` words of ``WORDS``, about as many tokens."""
    return " ".join(rng.choices(WORDS, k=words))


def request_rng(seed: int, index: int) -> random.Random:
    """The generator of request ``index``: the same prompt for the same seed and index,
    whatever order concurrent requests start in."""
    return random.Random((seed << 40) ^ index)


class PromptSource:
    """The prompt of request ``i``: a fixed text, synthetic words, or the file's items in
    turn (from the start again when the requests outnumber them); a length not given by the
    item is drawn from ``output``."""

    def __init__(
        self,
        *,
        seed: int,
        output: Lengths,
        synthetic: Lengths | None = None,
        text: str | None = None,
        items: list[Prompt] | None = None,
    ) -> None:
        if sum(x is not None for x in (synthetic, text, items)) != 1:
            raise ValueError("exactly one of synthetic, text and items")
        if items is not None and not items:
            raise ValueError("the dataset holds no conversation")
        self.seed = seed
        self.output = output
        self.synthetic = synthetic
        self.text = text
        self.items = items

    def get(self, index: int) -> Prompt:
        rng = request_rng(self.seed, index)
        max_tokens = self.output.draw(rng) if self.output.mean > 0 else None
        if self.items is not None:
            item = self.items[index % len(self.items)]
            return item if item.max_tokens is not None else Prompt(item.messages, max_tokens)
        if self.text is not None:
            return Prompt((("user", self.text),), max_tokens)
        assert self.synthetic is not None
        words = self.synthetic.draw(rng)
        return Prompt((("user", synthetic_text(words, rng)),), max_tokens)


class DatasetError(ValueError):
    """A dataset file that cannot be used, with the line at fault."""


def load_dataset(path: Path, limit: int = MAX_DATASET_ITEMS) -> list[Prompt]:
    """The conversations of a JSONL file: one JSON object a line, with ``messages`` (a list of
    ``{"role", "content"}``, content a string or a list of text parts) or ``prompt`` (a
    string, one user message), and optionally ``max_tokens``. Blank lines are skipped."""
    if path.stat().st_size > MAX_DATASET_BYTES:
        raise DatasetError(f"{path}: larger than {MAX_DATASET_BYTES // 2**20} MiB")
    items: list[Prompt] = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            if len(items) >= limit:
                raise DatasetError(f"{path}: more than {limit} conversations")
            try:
                items.append(parse_item(json.loads(line)))
            except (ValueError, TypeError) as exc:
                raise DatasetError(f"{path}:{number}: {exc}") from None
    if not items:
        raise DatasetError(f"{path}: no conversation in the file")
    return items


def parse_item(obj: Any) -> Prompt:
    if not isinstance(obj, dict):
        raise ValueError("a line must be a JSON object")
    max_tokens = obj.get("max_tokens")
    if max_tokens is not None and (
        not isinstance(max_tokens, int)
        or isinstance(max_tokens, bool)
        or not 1 <= max_tokens <= MAX_TOKENS_LIMIT
    ):
        raise ValueError(f"max_tokens must be a whole number from 1 to {MAX_TOKENS_LIMIT}")
    if "messages" in obj:
        messages = obj["messages"]
        if not isinstance(messages, list) or not messages:
            raise ValueError("messages must be a non-empty list")
        return Prompt(tuple(_message(m) for m in messages), max_tokens)
    prompt = obj.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise ValueError('a line needs "messages" or a non-empty "prompt" string')
    return Prompt((("user", prompt),), max_tokens)


def _message(m: Any) -> tuple[str, str]:
    if not isinstance(m, dict):
        raise ValueError("each message must be an object")
    role = m.get("role")
    if role not in ROLES:
        raise ValueError(f"a message's role must be one of {', '.join(sorted(ROLES))}")
    content = m.get("content")
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise ValueError("only text content parts are supported")
            parts.append(str(part.get("text", "")))
        content = "".join(parts)
    if not isinstance(content, str):
        raise ValueError("a message's content must be a string or a list of text parts")
    return role, content
