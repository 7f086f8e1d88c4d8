"""Bare tiktoken rank files served with a pattern and special tokens from the config.

A ``.tiktoken`` file holds ranks only (one ``<base64 token> <rank>`` line each): the
pre-tokenisation pattern and the special tokens are not in it. ``[model] tiktoken`` gives
them per model::

    [model]
    tiktoken = { "my-model" = { file = "/models/my.tiktoken", pattern = "cl100k",
                                special_tokens = { "<|endoftext|>" = 100257 } } }

``pattern`` is ``"o200k"``, ``"cl100k"`` or ``"llama3"`` (the published pre-tokenisation
patterns of o200k_base, cl100k_base and Llama 3) or a regex of its own. Everything is
checked when the configuration is loaded, each failure a one-line error naming the key: the
file is a regular file (a named pipe would block the start), readable, at most
``MAX_FILE_BYTES``, and a rank file whose ranks are 0..n-1 and cover every single byte; the
pattern compiles in tiktoken (Rust's fancy-regex, which also reads ``\\p{..}`` classes, ``&&``
intersections and possessive quantifiers) and in the ``regex`` package's V1 syntax (the same
class syntax), never matches the empty string, splits a probe text within tiktoken's
backtracking limit and leaves no character of it unmatched (tiktoken would drop it); the
special tokens are non-empty strings with unique ids at or past the ranks. When the model's
texts are set up (at start and at each reload), its special tokens must also hold what its
family needs as single tokens (:func:`family_tokens`: BOS, EOS, stop tokens and the chat
template's ``<|...|>`` markers). The tokenizer built by the check is kept (keyed by the
file's identity and the settings), so serving the model reuses it.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import Any, Final

import regex  # type: ignore[import-untyped]  # tiktoken's dependency; no stubs

from neutrino.text.errors import TemplateError, TokenizerError
from neutrino.text.families import ModelFamily
from neutrino.text.templates import ChatTemplate
from neutrino.text.tiktoken_tokenizer import TiktokenTokenizer, parse_tiktoken_ranks
from neutrino.text.tokenizer_config import MAX_SPECIAL_IDS
from neutrino.text.vocabularies import CL100K_PATTERN, LLAMA3_PATTERN, O200K_PATTERN

__all__ = [
    "MAX_FILE_BYTES",
    "NAMED_PATTERNS",
    "TiktokenFile",
    "TiktokenFileError",
    "check_family_tokens",
    "check_tiktoken_files",
    "family_tokens",
    "parse_tiktoken_files",
    "tiktoken_file_tokenizer",
]

NAMED_PATTERNS: Final[Mapping[str, str]] = {
    "o200k": O200K_PATTERN,
    "cl100k": CL100K_PATTERN,
    "llama3": LLAMA3_PATTERN,
}
# o200k_base's file is 3.6 MB; a rank file past this is not a tokenizer anyone publishes.
MAX_FILE_BYTES: Final = 64 * 1024 * 1024
MAX_PATTERN_CHARS: Final = 4096
MAX_TOKEN_CHARS: Final = 256  # the text of one special token
_KEYS: Final = ("file", "pattern", "special_tokens")

# What every pattern must split without dropping a character or matching nothing: letters
# of several scripts and cases, digits, punctuation, contractions, every kind of space.
_PROBE: Final = (
    "Hello, World! It's 12345 o'clock; don't PANIC... getElementById(x) += 3.14\n"
    "\tnaïve café Ünïcödé — «quotes» ‘single’ “double” … 1,000,000\r\n\r\n"  # noqa: RUF001
    "你好世界，今天天气很好。日本語のテキスト 한국어 텍스트 Привет мир Γειά σου κόσμε "  # noqa: RUF001
    "مرحبا بالعالم שלום עולם नमस्ते दुनिया 🎉🚀👍🏽 👨‍👩‍👧 ❤️ "
    "def f(a, b):\n    return {'k': [a, b]}  # comment\n\u00a0\u2003\u3000x\x0b\x0c"
    "  trailing spaces   \n\n\n"
)


class TiktokenFileError(TokenizerError, ValueError):
    """A ``[model] tiktoken`` entry that cannot be served; the message names its key."""


@dataclass(frozen=True, slots=True)
class TiktokenFile:
    """One model's bare rank file, the pattern it is split with and its special tokens."""

    file: str
    pattern: str  # a name in NAMED_PATTERNS, or a regex
    special_tokens: Mapping[str, int] = field(default_factory=dict)

    @property
    def pat_str(self) -> str:
        return NAMED_PATTERNS.get(self.pattern, self.pattern)


def parse_tiktoken_files(raw: Any, where: str) -> dict[str, TiktokenFile]:
    """``[model] tiktoken`` (a TOML table, model name -> table) read into specs; the
    shape only (no file is read): wrong types and unknown keys are refused."""
    if not isinstance(raw, Mapping):
        raise TiktokenFileError(f"{where} must be a table of model name -> table")
    return {str(model): _entry(value, f'{where}."{model}"') for model, value in raw.items()}


def check_tiktoken_files(specs: Mapping[str, TiktokenFile], where: str) -> None:
    """Build each model's tokenizer now (kept for serving), or raise naming the key."""
    for model, spec in specs.items():
        tiktoken_file_tokenizer(model, spec, f'{where}."{model}"')


def _entry(value: Any, where: str) -> TiktokenFile:
    if not isinstance(value, Mapping):
        raise TiktokenFileError(f"{where} must be a table with file, pattern, special_tokens")
    unknown = sorted(set(value) - set(_KEYS))
    if unknown:
        raise TiktokenFileError(f"unknown key {where}.{unknown[0]} (known: {', '.join(_KEYS)})")
    for key in ("file", "pattern"):
        if not isinstance(value.get(key), str) or not value[key]:
            raise TiktokenFileError(f"{where}.{key} must be a non-empty string")
    if len(value["pattern"]) > MAX_PATTERN_CHARS:
        raise TiktokenFileError(f"{where}.pattern is longer than {MAX_PATTERN_CHARS} characters")
    specials = value.get("special_tokens", {})
    if not isinstance(specials, Mapping):
        raise TiktokenFileError(f"{where}.special_tokens must be a table of token = id")
    if len(specials) > MAX_SPECIAL_IDS:
        raise TiktokenFileError(f"{where}.special_tokens has more than {MAX_SPECIAL_IDS} tokens")
    for text, token_id in specials.items():
        if not text or len(text) > MAX_TOKEN_CHARS:
            raise TiktokenFileError(
                f"{where}.special_tokens: a token must have 1 to {MAX_TOKEN_CHARS} characters"
            )
        if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
            raise TiktokenFileError(
                f'{where}.special_tokens."{text}" must be a non-negative integer id'
            )
    return TiktokenFile(value["file"], value["pattern"], dict(specials))


# --- building (and keeping) the tokenizer ----------------------------------------------------

_built: dict[tuple[Any, ...], TiktokenTokenizer] = {}
_lock = threading.Lock()
_KEEP: Final = 16  # tokenizers kept for reuse (a reload may name new files)


def tiktoken_file_tokenizer(model: str, spec: TiktokenFile, where: str) -> TiktokenTokenizer:
    """The tokenizer ``spec`` describes, named ``model``; built once per file identity
    (path, size, modification time) and settings, then shared. Raises
    :class:`TiktokenFileError` naming ``where`` (the config key)."""
    path = Path(spec.file).expanduser()
    try:
        stat = path.stat()
    except OSError as e:
        raise TiktokenFileError(f"{where}.file: cannot read {spec.file!r}: {e.strerror}") from None
    if not S_ISREG(stat.st_mode):  # a FIFO would block the start for ever; a device, likewise
        raise TiktokenFileError(f"{where}.file: cannot read {spec.file!r}: not a regular file")
    specials = tuple(sorted(spec.special_tokens.items()))
    key = (model, str(path.resolve()), stat.st_size, stat.st_mtime_ns, spec.pat_str, specials)
    with _lock:
        hit = _built.get(key)
        if hit is not None:
            return hit
        tokenizer = _build(model, path, spec, where)
        if len(_built) >= _KEEP:
            _built.pop(next(iter(_built)))
        _built[key] = tokenizer
        return tokenizer


def _build(model: str, path: Path, spec: TiktokenFile, where: str) -> TiktokenTokenizer:
    ranks = _read_ranks(path, f"{where}.file")
    _check_specials(spec.special_tokens, len(ranks), f"{where}.special_tokens")
    pattern = spec.pat_str
    _check_pattern_syntax(pattern, f"{where}.pattern")
    try:
        tokenizer = TiktokenTokenizer(
            model, mergeable_ranks=ranks, pat_str=pattern, special_tokens=spec.special_tokens
        )
    except ValueError as e:  # tiktoken (fancy-regex) refuses the pattern
        raise TiktokenFileError(f"{where}.pattern does not compile in tiktoken: {e}") from None
    _check_pattern_splits(tokenizer, pattern, f"{where}.pattern")
    return tokenizer


def _read_ranks(path: Path, where: str) -> dict[bytes, int]:
    try:  # non-blocking: a file swapped for a FIFO since the stat must not hang the open
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with open(fd, "rb") as fh:
            if not S_ISREG(os.fstat(fd).st_mode):
                raise TiktokenFileError(f"{where}: cannot read {str(path)!r}: not a regular file")
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise TiktokenFileError(f"{where}: cannot read {str(path)!r}: {e.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise TiktokenFileError(f"{where}: {path} is larger than {MAX_FILE_BYTES} bytes")
    try:
        ranks = parse_tiktoken_ranks(data.splitlines())
    except TokenizerError as e:
        raise TiktokenFileError(f"{where}: {path}: not a tiktoken rank file ({e})") from None
    if not ranks:
        raise TiktokenFileError(f"{where}: {path}: not a tiktoken rank file (no ranks)")
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise TiktokenFileError(f"{where}: {path}: ranks are not 0..{len(ranks) - 1}")
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise TiktokenFileError(
            f"{where}: {path}: the byte 0x{missing[0]:02x} has no rank "
            f"({len(missing)} of the 256 single bytes have none; tiktoken needs all)"
        )
    return ranks


def _check_specials(specials: Mapping[str, int], base: int, where: str) -> None:
    by_id: dict[int, str] = {}
    for text, token_id in specials.items():
        if token_id < base:
            raise TiktokenFileError(
                f'{where}."{text}" = {token_id} is a rank of the file (ids 0..{base - 1})'
            )
        if token_id >= base + MAX_SPECIAL_IDS:
            raise TiktokenFileError(
                f'{where}."{text}" = {token_id} is implausibly far past the ranks ({base})'
            )
        if token_id in by_id:
            raise TiktokenFileError(
                f'{where}: "{by_id[token_id]}" and "{text}" have the same id {token_id}'
            )
        by_id[token_id] = text


def _check_pattern_syntax(pattern: str, where: str) -> None:
    try:
        regex.compile(pattern, regex.V1)
    except regex.error as e:
        raise TiktokenFileError(f"{where} is not a valid regex: {e}") from None
    except RecursionError:
        raise TiktokenFileError(f"{where} is nested too deeply") from None


def _check_pattern_splits(tokenizer: TiktokenTokenizer, pattern: str, where: str) -> None:
    """The pattern matches no empty piece (tiktoken cannot encode one) and drops nothing."""
    try:
        spans = [m.span() for m in regex.finditer(pattern, _PROBE, regex.V1, timeout=2.0)]
    except (TimeoutError, MemoryError, RecursionError):
        raise TiktokenFileError(f"{where} takes too much to split a probe text") from None
    empty = [at for at, end in spans if at == end]
    if empty:
        raise TiktokenFileError(
            f"{where} matches the empty string (at character {empty[0]} of a probe text); "
            "tiktoken cannot encode with such a pattern"
        )
    try:  # tiktoken's own regex engine gives up past a backtracking limit
        split_back = tokenizer.decode(tokenizer.encode(_PROBE))
    except ValueError as e:
        raise TiktokenFileError(
            f"{where} exceeds tiktoken's backtracking limit on a probe text ({e})"
        ) from None
    if split_back != _PROBE:
        raise TiktokenFileError(
            f"{where} leaves characters of a probe text unmatched (tiktoken drops them): "
            "it must match every character"
        )


# --- the family's tokens ---------------------------------------------------------------------

# The shape of the special (and added) tokens chat templates write: ``<|name|>``, and
# DeepSeek's, the same with full-width bars (U+FF5C).
_MARKER: Final = re.compile(r"<\|[^|\s<>]{1,64}\|>|<\uff5c[^\uff5c\s<>]{1,64}\uff5c>")
# Families whose templates write role markers of that shape that their published tokenizers
# read as plain text (several tokens each), as a rank file's pattern would too.
_PLAIN_ROLES: Final = frozenset({"<|system|>", "<|user|>", "<|assistant|>"})
_PLAIN_MARKERS: Final[Mapping[str, frozenset[str]]] = {
    "zephyr": _PLAIN_ROLES,
    "tinyllama": _PLAIN_ROLES,
    "olmo2": _PLAIN_ROLES,
}
_CHAT: Final = ({"role": "user", "content": "u"}, {"role": "assistant", "content": "a"})
_PROBE_CHATS: Final = (({"role": "system", "content": "s"}, *_CHAT), _CHAT)


def family_tokens(family: ModelFamily) -> list[str]:
    """The tokens a model of ``family`` needs its tokenizer to hold as single ids: its
    ``bos_token`` where it is used (put in front of completions, or written by the
    template), its ``eos_token`` and stop tokens, and the ``<|...|>`` markers its chat
    template writes for a plain conversation."""
    needed: dict[str, None] = {}
    if family.bos_token and (family.add_bos_token or "bos_token" in family.template):
        needed[family.bos_token] = None
    for token in (family.eos_token, *family.stop_tokens):
        if token:
            needed[token] = None
    plain = _PLAIN_MARKERS.get(family.name, frozenset())
    for marker in _MARKER.findall(_rendered(family)):
        if marker not in plain:
            needed[marker] = None
    return list(needed)


def _rendered(family: ModelFamily) -> str:
    """The template's text for a few plain conversations (those it refuses are left out:
    a template that takes no system message, one that needs tools)."""
    template = ChatTemplate(family)
    texts = []
    for chat in _PROBE_CHATS:
        for tools in (None, ()):
            try:
                texts.append(template.render(chat, tools=tools))
            except TemplateError:
                continue
    return "".join(texts)


def check_family_tokens(spec: TiktokenFile, family: ModelFamily, where: str) -> None:
    """``spec``'s special tokens hold every token ``family`` needs (see
    :func:`family_tokens`), or raise naming ``where``.special_tokens: without them the model
    would run with no stop ids or BOS, its template's markers encoded as plain bytes."""
    missing = [t for t in family_tokens(family) if t not in spec.special_tokens]
    if missing:
        shown = ", ".join(f'"{t}"' for t in missing)
        raise TiktokenFileError(
            f"{where}.special_tokens lacks {shown}: the model's family {family.name} needs "
            "them as single tokens (its BOS, EOS and stop tokens and the markers its chat "
            "template writes); give each its id in the rank file's tokenizer"
        )
