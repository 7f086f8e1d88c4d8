"""Kimi K2's tokenizer, built in: the rank file shipped in ``assets/tokenizers/kimi-k2/``
and the rest of Moonshot AI's published tokenizer written down here.

Kimi K2 publishes ``tiktoken.model`` (163,584 ranks), ``tokenization_kimi.py`` (class
``TikTokenTokenizer``: its ``pat_str`` and ``num_reserved_special_tokens = 256``) and
``tokenizer_config.json`` (``added_tokens_decoder``: the names of some of the 256 reserved
ids from 163,584 on; the class names the rest ``<|reserved_token_{id}|>``). The five
tool-call markers are added tokens that are not special (``"special": false``): decoding
keeps them, as the tool-call parser needs. ``bos_token`` is ``[BOS]``, ``eos_token``
``[EOS]``. The same layout is what :mod:`neutrino.text.kimi_files` reads from a model
folder; the unit tests check that both give the same ids.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Final

from neutrino.text.errors import TokenizerError
from neutrino.text.tiktoken_tokenizer import TiktokenTokenizer, parse_tiktoken_ranks
from neutrino.text.tokenizer import Tokenizer

__all__ = [
    "KIMI_K2_NAMED",
    "KIMI_K2_NON_SPECIAL",
    "KIMI_K2_NUM_RANKS",
    "KIMI_K2_NUM_RESERVED",
    "KIMI_K2_PATTERN",
    "KIMI_K2_SHA256",
    "build_kimi_k2",
    "kimi_k2_special_tokens",
]

# tiktoken.model as moonshotai/Kimi-K2-Instruct publishes it (see its README in assets/).
KIMI_K2_SHA256: Final = "b6c497a7469b33ced9c38afb1ad6e47f03f5e5dc05f15930799210ec050c5103"
KIMI_K2_NUM_RANKS: Final = 163584
KIMI_K2_NUM_RESERVED: Final = 256

# TikTokenTokenizer.pat_str: Han runs first, then o200k-like letter runs that exclude Han
# (``&&`` is a class intersection in Rust's regex syntax, which tiktoken uses).
_NOT_HAN_UPPER: Final = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]"
_NOT_HAN_LOWER: Final = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]"
_CONTRACTION: Final = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
KIMI_K2_PATTERN: Final = "|".join(
    (
        r"[\p{Han}]+",
        rf"[^\r\n\p{{L}}\p{{N}}]?{_NOT_HAN_UPPER}*{_NOT_HAN_LOWER}+{_CONTRACTION}",
        rf"[^\r\n\p{{L}}\p{{N}}]?{_NOT_HAN_UPPER}+{_NOT_HAN_LOWER}*{_CONTRACTION}",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    )
)

# tokenizer_config.json's added_tokens_decoder (every flag false but "special").
KIMI_K2_NAMED: Final = {
    163584: "[BOS]",
    163585: "[EOS]",
    163586: "<|im_end|>",
    163587: "<|im_user|>",
    163588: "<|im_assistant|>",
    163590: "<|start_header_id|>",
    163591: "<|end_header_id|>",
    163593: "[EOT]",
    163594: "<|im_system|>",
    163595: "<|tool_calls_section_begin|>",
    163596: "<|tool_calls_section_end|>",
    163597: "<|tool_call_begin|>",
    163598: "<|tool_call_argument_begin|>",
    163599: "<|tool_call_end|>",
    163601: "<|im_middle|>",
    163838: "[UNK]",
    163839: "[PAD]",
}
KIMI_K2_NON_SPECIAL: Final = (
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
)


def kimi_k2_special_tokens() -> dict[str, int]:
    """All 256 reserved ids by text: the named ones, ``<|reserved_token_{id}|>`` the rest."""
    first = KIMI_K2_NUM_RANKS
    ids = range(first, first + KIMI_K2_NUM_RESERVED)
    return {KIMI_K2_NAMED.get(i, f"<|reserved_token_{i}|>"): i for i in ids}


def build_kimi_k2(name: str, folder: Path) -> Tokenizer:
    """Kimi K2's tokenizer from ``folder``/tiktoken.model, refused unless it is the
    published file (its SHA-256)."""
    path = folder / "tiktoken.model"
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != KIMI_K2_SHA256:
        raise TokenizerError(f"tokenizer {name!r}: {path} is not Kimi K2's (SHA-256 {digest})")
    ranks = parse_tiktoken_ranks(data.splitlines())
    if len(ranks) != KIMI_K2_NUM_RANKS:  # pragma: no cover - the digest fixes the count
        raise TokenizerError(f"tokenizer {name!r}: unexpected Kimi K2 rank table")
    return TiktokenTokenizer(
        name,
        mergeable_ranks=ranks,
        pat_str=KIMI_K2_PATTERN,
        special_tokens=kimi_k2_special_tokens(),
        non_special=KIMI_K2_NON_SPECIAL,
    )
