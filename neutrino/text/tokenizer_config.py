"""What a model folder's ``tokenizer_config.json`` says beyond its tokenizer, and the
tokenizer read from local files that carries it (shared by the local and Kimi readers)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokenizers import AddedToken

from neutrino.text.errors import TokenizerError
from neutrino.text.families import ModelFamily
from neutrino.text.tokenizer import Tokenizer

_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token")
# Far above any published layout (Llama 4: 2,048 special ids, Tekken: 1,000, Kimi: 256); a
# file that declares more is refused before anything is built from the count.
MAX_SPECIAL_IDS = 1 << 20


@dataclass(frozen=True, slots=True)
class LocalTokenizer:
    """A tokenizer from local files, and what its ``tokenizer_config.json`` says beyond it."""

    tokenizer: Tokenizer
    bos_token: str | None = None
    eos_token: str | None = None
    add_bos_token: bool | None = None

    def apply_to(self, family: ModelFamily) -> ModelFamily:
        """``family`` with this tokenizer's BOS/EOS (template variables; the EOS also stops
        generation) and ``add_bos_token``, where the files name them."""
        changes: dict[str, Any] = {}
        if self.bos_token is not None:
            changes["bos_token"] = self.bos_token
        if self.eos_token is not None:
            changes["eos_token"] = self.eos_token
            if self.eos_token not in family.stop_tokens:
                changes["stop_tokens"] = (*family.stop_tokens, self.eos_token)
        if self.add_bos_token is not None:
            changes["add_bos_token"] = self.add_bos_token
        return replace(family, **changes) if changes else family


def token_content(value: Any) -> str | None:
    """A token named in tokenizer_config.json: a string, or an AddedToken object's content."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        content: str = value["content"]
        return content
    return None


def added_tokens(config: Mapping[str, object], where: Path | None) -> list[tuple[int, AddedToken]]:
    """``added_tokens_decoder`` of a tokenizer_config.json, by id."""
    table = config.get("added_tokens_decoder") or {}
    if not isinstance(table, dict):
        raise TokenizerError(f"{where}: added_tokens_decoder is not an object")
    out: list[tuple[int, AddedToken]] = []
    for key, entry in table.items():
        content = token_content(entry)
        if not key.isdigit() or content is None or not isinstance(entry, dict):
            raise TokenizerError(f"{where}: bad added_tokens_decoder entry {key!r}")
        special = bool(entry.get("special", False))
        token = AddedToken(
            content,
            single_word=bool(entry.get("single_word", False)),
            lstrip=bool(entry.get("lstrip", False)),
            rstrip=bool(entry.get("rstrip", False)),
            normalized=bool(entry.get("normalized", not special)),
            special=special,
        )
        out.append((int(key), token))
    return sorted(out, key=lambda kv: kv[0])


def named_specials(config: Mapping[str, object]) -> list[str]:
    """The special tokens tokenizer_config.json names outside ``added_tokens_decoder``."""
    names = [token_content(config.get(key)) for key in _SPECIAL_KEYS]
    extra = config.get("additional_special_tokens") or []
    if isinstance(extra, list):
        names += [token_content(v) for v in extra]
    return [n for n in names if n]
