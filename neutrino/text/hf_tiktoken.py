"""Byte-level BPE ``tokenizer.json`` vocabularies served by tiktoken, where proven identical.

Hugging Face's ``tokenizers`` encodes about a tenth as fast as tiktoken here. A byte-level
BPE vocabulary can be loaded into tiktoken's encoder: its ranks are the token ids (each
vocabulary string spelled back into bytes through the GPT-2 byte alphabet), its
pre-tokenisation becomes one tiktoken pattern, its added tokens become tiktoken's special
tokens. Whether that gives the ids the library gives is a property of the whole file, not
of its shape: tiktoken merges the adjacent pair whose concatenation has the lowest rank,
the library the pair listed first among its merges, and the two agree only where the merge
list and the ranks say the same thing everywhere a text can reach. So a conversion is used
only for a file whose *fingerprint* (vocabulary, merges, normaliser and pre-tokeniser) is
one the test suite proves identical to the library on a corpus, every code point in
several contexts and random text mixed with every added token
(``tests/unit/text/test_hf_tiktoken.py``); any other file keeps the library.

What is converted, and how each part keeps the library's meaning:

* **Pre-tokenisers** the library runs in sequence (each split applied to the pieces of the
  one before) become one pattern whose pieces are the same: the later splits' classes are
  narrowed to what the earlier ones left, and a lookahead that met the end of its piece
  meets the start of the next one instead. Only the sequences in ``_PRETOKENIZERS`` are
  known; their patterns are written out below.
* **Normalisers**: none, or NFC, applied per piece between added tokens as the library
  applies it (an added token is found in the raw text first), with the library's own NFC
  (``tokenizers.normalizers.NFC``: its Unicode tables, which may be newer than Python's).
* **Added tokens** become specials found leftmost-longest, as the library's are; a
  ``single_word`` one, or a ``normalized`` one under a normaliser that changes text or that
  overlaps a non-normalized one (the library finds those in two passes), is not converted.
* **Bytes the vocabulary lacks**: a vocabulary without every byte (SmolLM2 has no token for
  a few control characters) cannot spell some characters; a piece holding one is encoded by
  the library itself (``Conversion.unspellable``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import tokenizers

from neutrino.text.bytelevel import CHAR_TO_BYTE
from neutrino.text.hf_tokenizer import HFTokenizer
from neutrino.text.tiktoken_tokenizer import TiktokenTokenizer
from neutrino.text.vocabularies import LLAMA3_PATTERN, QWEN2_PATTERN

__all__ = [
    "PROVEN",
    "Conversion",
    "convert",
    "fingerprint",
    "tokenizer_json",
]

# GPT-2's pre-tokenisation, the ByteLevel pre-tokeniser's own regex (use_regex: true).
GPT2_PATTERN: Final = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
# Digits (individual) then GPT-2's regex on what is between digits (SmolLM2, StarCoder2):
# every digit is a piece of its own; the regex's ` ?\p{N}+` cannot match between digits,
# and its `\s+(?!\S)` saw the end of its piece where a digit follows.
DIGITS_GPT2_PATTERN: Final = (
    r"\p{N}|'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+"
)
# DeepSeek V3 (and R1, V3.1, V3.2): runs of 1-3 digits, then runs of CJK ideographs and
# kana, then its main regex on what is left. Below, the main regex's classes lose digits
# and those CJK characters (they were split off before it ran), its lookahead treats a
# digit or CJK character as the end of the piece, and a last branch takes what the main
# regex leaves unmatched (control and format characters, private use, unassigned code
# points not followed by a letter), which the library keeps as a piece and tiktoken would
# drop.
_CJK: Final = "\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff"
_DS_PUNCT: Final = r"[!" '"' r"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]"
_DS_LETTER: Final = rf"[[\p{{L}}\p{{M}}]--[{_CJK}]]"
DEEPSEEK_V3_PATTERN: Final = "|".join(
    (
        r"\p{N}{1,3}",
        f"[{_CJK}]+",
        _DS_PUNCT + "[A-Za-z]+",
        rf"[^\r\n\p{{L}}\p{{P}}\p{{S}}\p{{N}}{_CJK}]?{_DS_LETTER}+",
        rf" ?[[\p{{P}}\p{{S}}]--[{_CJK}]]+[\r\n]*",
        r"\s*[\r\n]+",
        rf"\s+(?![^\s\p{{N}}{_CJK}])",
        r"\s+",
        rf"(?:[^\p{{L}}\p{{M}}\p{{P}}\p{{S}}\p{{N}}\s{_CJK}](?!{_DS_LETTER}))+",
    )
)
# DeepSeek V3's own three regexes, as its file writes them (with a carriage return and a
# line feed, not their escapes, in two classes).
_DEEPSEEK_V3_SPLITS: Final = (
    r"\p{N}{1,3}",
    f"[{_CJK}]+",
    _DS_PUNCT + "[A-Za-z]+|[^\r\n"
    r"\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
    r"| ?[\p{P}\p{S}]+["
    "\r\n"
    r"]*|\s*["
    "\r\n"
    r"]+|\s+(?!\S)|\s+",
)


def _split(regex: str, behavior: str = "Isolated", invert: bool = False) -> dict[str, Any]:
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": behavior, "invert": invert}


_BYTES: Final = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}
_BYTES_GPT2: Final = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}

# Known pre-tokeniser sequences (``trim_offsets`` left out: it moves offsets, not pieces)
# and the one tiktoken pattern that cuts text into the same pieces.
_PRETOKENIZERS: Final[tuple[tuple[list[dict[str, Any]], str], ...]] = (
    # Llama 3, GLM-4, the DeepSeek-R1 Llama distills: one regex that matches every
    # character (each is a letter, a digit, a space or something else: a branch each).
    ([_split(LLAMA3_PATTERN), _BYTES], LLAMA3_PATTERN),
    ([_split(QWEN2_PATTERN), _BYTES], QWEN2_PATTERN),
    # OLMo 2: the matches kept, the rest removed: tiktoken's own way with a pattern.
    ([_split(LLAMA3_PATTERN, "Removed", invert=True), _BYTES], LLAMA3_PATTERN),
    ([_BYTES_GPT2], GPT2_PATTERN),
    ([{"type": "Digits", "individual_digits": True}, _BYTES_GPT2], DIGITS_GPT2_PATTERN),
    ([*(_split(r) for r in _DEEPSEEK_V3_SPLITS), _BYTES], DEEPSEEK_V3_PATTERN),
)

# Fingerprints (``fingerprint``) of the files the test suite proves identical to the
# library, each with the vocabulary it was proven on. A model folder whose tokenizer.json
# has one of these (a fine-tune keeps its base model's tokenizer) is served by tiktoken too.
PROVEN: Final[Mapping[str, str]] = {
    "e58ae3a17d694f1928b112f9a05545b610051df43a154db6cf70ddf7d0b90584": "GLM-4.7-Flash",
    "49a5ef45d595c20c592bb7b3c65a073b1c71bec8c53f6e51c1b9e7ddde8aa313": "DeepSeek-V3, R1, V3.1",
    "4c0dfd4f4832168c1476a430214b72ae17269cd376c5e6c7c3da283a1e828c97": "Llama 3.1",
    "0e9e65a2eaf5fe763696085b1a315ca3a816974c20b83a85cf19cdd9732d4216": "Qwen2.5",
    "5036d856ec930c25db8a9a58ddf13ba28928468b8dc387a5c3f899d560eecacc": "OLMo 2",
    "8af47af00820e0ea784c10442609bc99eb50e2c73d75a8a616119aed833888bc": "SmolLM2",
}


@dataclass(frozen=True, slots=True)
class Conversion:
    """What tiktoken needs to encode as a ``tokenizer.json`` does."""

    fingerprint: str
    ranks: dict[bytes, int]
    pattern: str
    specials: dict[str, int]  # every added token, by its text
    non_special: frozenset[str]  # added tokens that are not special
    lstrip: frozenset[str]
    rstrip: frozenset[str]
    nfc: bool
    # A regex matching a character the vocabulary cannot spell (a byte it has no token
    # for), or None: a piece holding one is encoded by the library.
    unspellable: str | None


def _steps(node: Any) -> list[dict[str, Any]]:
    """A pre-tokeniser (or normaliser) as the list of the steps it runs, in order."""
    if node is None:
        return []
    if node.get("type") == "Sequence":
        inner = node.get("pretokenizers", node.get("normalizers", []))
        return [step for child in inner for step in _steps(child)]
    return [{k: v for k, v in node.items() if k != "trim_offsets"}]


def _pattern_of(pre_tokenizer: Any) -> str | None:
    steps = _steps(pre_tokenizer)
    for known, pattern in _PRETOKENIZERS:
        if steps == known:
            return pattern
    return None


def _merge_pairs(merges: Sequence[Any]) -> list[tuple[str, str]]:
    """Merges as pairs: a list of two strings each, or (older files) ``"a b"``."""
    pairs: list[tuple[str, str]] = []
    for m in merges:
        if isinstance(m, str):
            a, _, b = m.partition(" ")
            pairs.append((a, b))
        else:
            a, b = m
            pairs.append((str(a), str(b)))
    return pairs


def fingerprint(doc: Mapping[str, Any], merges: Sequence[tuple[str, str]] | None = None) -> str:
    """SHA-256 of what decides a file's BPE ids: its model (vocabulary in the file's order,
    merges, and the flags that change how they apply), normaliser and pre-tokeniser; not
    its added tokens, decoder or post-processor. ``merges``: the model's, as pairs, where
    the caller has them already."""
    model = doc.get("model") or {}
    flags = ("type", "ignore_merges", "byte_fallback", "dropout", "unk_token",
             "continuing_subword_prefix", "end_of_word_suffix")  # fmt: skip
    pairs = _merge_pairs(model.get("merges") or []) if merges is None else merges
    h = hashlib.sha256()
    for part in (
        {k: model.get(k) for k in flags},
        _steps(doc.get("normalizer")),
        _steps(doc.get("pre_tokenizer")),
        model.get("vocab") or {},
        pairs,
    ):
        h.update(json.dumps(part, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class Added:
    """An added token with the flags the library matches it by."""

    content: str
    id: int
    special: bool = True
    normalized: bool = False
    lstrip: bool = False
    rstrip: bool = False
    single_word: bool = False


def added_in_file(doc: Mapping[str, Any]) -> list[Added]:
    """A ``tokenizer.json``'s own ``added_tokens``."""
    return [
        Added(
            str(t["content"]),
            int(t["id"]),
            bool(t.get("special")),
            bool(t.get("normalized")),
            bool(t.get("lstrip")),
            bool(t.get("rstrip")),
            bool(t.get("single_word")),
        )
        for t in doc.get("added_tokens") or []
    ]


def added_in(tk: tokenizers.Tokenizer) -> list[Added]:
    """The added tokens a loaded tokenizer holds (a model folder's config applied)."""
    return [
        Added(t.content, int(i), t.special, t.normalized, t.lstrip, t.rstrip, t.single_word)
        for i, t in sorted(tk.get_added_tokens_decoder().items())
    ]


def convert(
    doc: Mapping[str, Any],
    added: Sequence[Added],
    *,
    proven: Mapping[str, str] | None = None,
) -> Conversion | str:
    """The conversion of a parsed ``tokenizer.json`` whose added tokens are ``added``, or
    why there is none: a one-line reason. ``proven``: the fingerprints accepted (default
    :data:`PROVEN`; the test suite passes its own to prove a file)."""
    model = doc.get("model") or {}
    reason = _shape(doc, model)
    if reason is not None:
        return reason
    nfc = _normalizer(doc.get("normalizer")) is True
    pattern = _pattern_of(doc.get("pre_tokenizer"))
    assert pattern is not None  # _shape checked it
    ranks = _ranks(model.get("vocab") or {}, added)
    if isinstance(ranks, str):
        return ranks
    merges = _merge_pairs(model.get("merges") or [])
    if not _monotone(model.get("vocab") or {}, merges):
        return "merges that do not follow the ranks"
    unspellable = _unspellable(ranks)
    if unspellable == "":
        return "a vocabulary missing UTF-8 continuation bytes"
    specials = _specials(added, nfc)
    if isinstance(specials, str):
        return specials
    print_ = fingerprint(doc, merges)
    if print_ not in (PROVEN if proven is None else proven):
        return "a vocabulary not proven identical to the tokenizers library"
    named, non_special, lstrip, rstrip = specials
    return Conversion(print_, ranks, pattern, named, non_special, lstrip, rstrip, nfc, unspellable)


def _shape(doc: Mapping[str, Any], model: Mapping[str, Any]) -> str | None:
    """Why a file's kind of model, normaliser or pre-tokeniser is not converted; None."""
    if model.get("type") != "BPE":
        return "not a BPE model"
    if model.get("dropout") or model.get("byte_fallback"):
        return "BPE dropout or byte fallback"
    if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        return "subword prefixes or suffixes"
    if (doc.get("decoder") or {}).get("type") != "ByteLevel":
        return "not a byte-level vocabulary"
    if _normalizer(doc.get("normalizer")) is None:
        return "a normaliser other than NFC"
    if _pattern_of(doc.get("pre_tokenizer")) is None:
        return "a pre-tokeniser with no known tiktoken pattern"
    return None


def _normalizer(node: Any) -> bool | None:
    """True for NFC, False for none; None for any other normaliser."""
    steps = _steps(node)
    if not steps:
        return False
    if steps == [{"type": "NFC"}]:
        return True
    return None


# str.translate table: a byte-alphabet character -> the latin-1 character of its byte; any
# other latin-1 character -> U+0100, which the latin-1 encode then refuses.
_STRICT: Final[dict[int, str]] = {
    **{b: "\u0100" for b in range(256)},
    **{ord(c): chr(b) for c, b in CHAR_TO_BYTE.items()},
}


def _ranks(vocab: Mapping[str, int], added: Sequence[Added]) -> dict[bytes, int] | str:
    """Each vocabulary string's bytes -> its id. A string outside the byte alphabet is
    allowed only as an added token on its own id (DeepSeek's files list a few specials in
    the vocabulary too): it is served as a special, never reached by a merge."""
    ranks: dict[bytes, int] = {}
    specials = {t.content: t.id for t in added}
    for token, token_id in vocab.items():
        try:
            piece = token.translate(_STRICT).encode("latin-1")
        except UnicodeEncodeError:
            if specials.get(token) == token_id:
                continue
            return "a vocabulary string outside the byte alphabet"
        if ranks.setdefault(piece, token_id) != token_id:
            return "two vocabulary strings for the same bytes"
    if len(set(ranks.values())) != len(ranks):
        return "two vocabulary strings on one id"
    return ranks


def _monotone(vocab: Mapping[str, int], merges: Sequence[tuple[str, str]]) -> bool:
    """Every merge's result is a token, and results' ids never fall along the list
    (tiktoken merges in the order of the ids)."""
    last = -1
    for a, b in merges:
        rank = vocab.get(a + b)
        if rank is None or rank < last:
            return False
        last = rank
    return True


def _unspellable(ranks: Mapping[bytes, int]) -> str | None:
    """A character class of what the vocabulary cannot spell; None: it spells every
    character; "": a continuation byte is missing (too many characters to list)."""
    ranges: list[str] = []
    for b in (b for b in range(256) if bytes((b,)) not in ranks):
        if b < 0x80:
            ranges.append(_u(b))
        elif b < 0xC0:  # a continuation byte: in most characters
            return ""
        elif b < 0xC2 or b > 0xF4:  # in no UTF-8 text
            continue
        elif b < 0xE0:
            lo = (b & 0x1F) << 6
            ranges.append(f"{_u(lo)}-{_u(lo | 0x3F)}")
        elif b < 0xF0:
            lo = (b & 0x0F) << 12
            ranges.append(f"{_u(max(lo, 0x800))}-{_u(lo | 0xFFF)}")
        else:
            lo = (b & 0x07) << 18
            ranges.append(f"{_u(max(lo, 0x10000))}-{_u(min(lo | 0x3FFFF, 0x10FFFF))}")
    return f"[{''.join(ranges)}]" if ranges else None


def _u(cp: int) -> str:
    return f"\\U{cp:08x}"


def _specials(
    added: Sequence[Added], nfc: bool
) -> tuple[dict[str, int], frozenset[str], frozenset[str], frozenset[str]] | str:
    """Added tokens as specials, with their flags; or why they cannot be."""
    named: dict[str, int] = {}
    for tok in added:
        if tok.single_word:
            return "an added token matched as a single word"
        if named.setdefault(tok.content, tok.id) != tok.id:
            return "an added token listed on two ids"
    normalized = [t.content for t in added if t.normalized]
    raw = [t.content for t in added if not t.normalized]
    if normalized and (nfc or _overlapping(normalized, raw)):
        return "normalized added tokens that the library finds in a pass of their own"
    return (
        named,
        frozenset(t.content for t in added if not t.special),
        frozenset(t.content for t in added if t.lstrip),
        frozenset(t.content for t in added if t.rstrip),
    )


def _overlapping(first: Sequence[str], second: Sequence[str]) -> bool:
    """Whether a token of ``first`` and one of ``second`` can share characters in a text
    (one inside the other, or one's end the other's start)."""
    for a in first:
        for b in second:
            if a in b or b in a:
                return True
            for k in range(1, min(len(a), len(b))):
                if a.endswith(b[:k]) or b.endswith(a[:k]):
                    return True
    return False


def tokenizer_json(
    name: str,
    doc: Mapping[str, Any],
    tk: tokenizers.Tokenizer | None = None,
    *,
    proven: Mapping[str, str] | None = None,
) -> HFTokenizer | TiktokenTokenizer:
    """The tokenizer a parsed ``tokenizer.json`` is served by: tiktoken where the file is
    one proven identical (``proven``, default :data:`PROVEN`), else the library
    (:class:`HFTokenizer`, which refuses what it does not read). ``tk``: the file as the
    library loaded it, with the added tokens it serves (a model folder's config applied);
    without it, the file's own added tokens, and the library loads it only if needed."""
    added = added_in(tk) if tk is not None else added_in_file(doc)
    conversion = convert(doc, added, proven=proven)
    if isinstance(conversion, str):
        if tk is None:
            tk = tokenizers.Tokenizer.from_str(json.dumps(doc))
        return HFTokenizer(name, tk)
    fallback = None
    if conversion.unspellable is not None:
        library = tk if tk is not None else tokenizers.Tokenizer.from_str(json.dumps(doc))

        def fallback(piece: str) -> list[int]:
            ids: list[int] = library.encode(piece, add_special_tokens=False).ids
            return ids

    return TiktokenTokenizer(
        name,
        mergeable_ranks=conversion.ranks,
        pat_str=conversion.pattern,
        special_tokens=conversion.specials,
        non_special=conversion.non_special,
        normalization="NFC" if conversion.nfc else None,
        lstrip=conversion.lstrip,
        rstrip=conversion.rstrip,
        fallback=fallback,
        unspellable=conversion.unspellable,
    )
