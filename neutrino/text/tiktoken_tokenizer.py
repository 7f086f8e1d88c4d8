"""Tokenizer over a tiktoken ``Encoding`` built from a ``.tiktoken`` BPE rank file."""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Literal, TypedDict, Unpack

import tiktoken
import tokenizers

from neutrino.text.errors import TokenizerError
from neutrino.text.segments import Head, PrefixCache, SegmentCache
from neutrino.text.token_table import TableTokenizer

__all__ = ["WHITESPACE", "TiktokenTokenizer", "parse_tiktoken_ranks", "read_tiktoken_ranks"]

# What an added token's lstrip/rstrip flag consumes next to it: the characters Rust's
# char::is_whitespace accepts (Unicode White_Space), as the tokenizers library strips them;
# str.isspace() without the separators U+001C-U+001F.
WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def read_tiktoken_ranks(path: str | os.PathLike[str]) -> dict[bytes, int]:
    """Parse a tiktoken BPE file: one ``<base64 token> <rank>`` pair per line."""
    with open(path, "rb") as f:
        return parse_tiktoken_ranks(f)


def parse_tiktoken_ranks(lines: Iterable[bytes]) -> dict[bytes, int]:
    """The ranks of a tiktoken BPE file's lines; a token listed twice is refused (the
    file would mean two ranks for one token)."""
    ranks: dict[bytes, int] = {}
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            token, rank = line.split()
            piece = base64.b64decode(token, validate=True)
            value = int(rank)
        except ValueError as e:  # binascii.Error is a ValueError
            raise TokenizerError(f"malformed BPE rank file at line {lineno}") from e
        if ranks.setdefault(piece, value) != value:
            raise TokenizerError(f"malformed BPE rank file at line {lineno}: token listed twice")
    return ranks


_SPLIT_ABOVE = 64
# How far back from its end a prompt is searched for the head of an earlier turn: the
# last answer and question of a conversation are within it (else it is tokenized whole).
HEAD_WINDOW = 8192
HEAD_NEAR = 2048


def _literal_regex(words: Collection[str]) -> re.Pattern[str]:
    """One regex matching any of ``words``, longest first, built as a prefix trie.

    A trie keeps the pattern's leading literal (``<`` for every vocabulary we ship),
    which lets ``re`` skip quickly to candidate positions.
    """
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = True

    def build(node: dict[str, Any]) -> str:
        alts = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        if "" in node:
            return "(?:" + body + ")?"
        return body

    return re.compile(build(trie))


def special_splitter(words: Collection[str]) -> re.Pattern[str] | None:
    """A pattern whose ``split`` returns text and ``words`` alternating (text first, one
    group around the words); ``None`` when there are no words."""
    return re.compile(f"({_literal_regex(words).pattern})") if words else None


def _piece_encoder(
    enc: tiktoken.Encoding,
    normalization: Literal["NFC"] | None,
    fallback: Callable[[str], list[int]] | None,
    unspellable: str | None,
) -> Callable[[str], list[int]]:
    """What encodes one piece of text between added tokens: tiktoken, after the library's
    NFC where asked, or ``fallback`` for a piece ``unspellable`` finds a character in."""
    ordinary = enc.encode_ordinary
    if (fallback is None) != (unspellable is None):
        raise TokenizerError("a fallback encoder goes with the characters it is for")
    nfc = tokenizers.normalizers.NFC().normalize_str if normalization == "NFC" else None
    spell = re.compile(unspellable).search if unspellable is not None else None
    if nfc is None and spell is None:
        return ordinary

    def piece(text: str) -> list[int]:
        if spell is not None and spell(text):
            return fallback(text)  # type: ignore[misc]  # set with spell
        if nfc is not None and not text.isascii():  # NFC leaves ASCII as it is
            text = nfc(text)
        return ordinary(text)

    return piece


class AddedTokens(TypedDict, total=False):
    """The added-token options of :meth:`TiktokenTokenizer.from_file` (``__init__``'s)."""

    non_special: Collection[str]
    normalization: Literal["NFC"] | None
    lstrip: Collection[str]
    rstrip: Collection[str]


class TiktokenTokenizer(TableTokenizer):
    """A byte-level BPE tokenizer backed by tiktoken.

    ``special_tokens`` are recognised in ``encode`` input. Those also listed in
    ``non_special`` are added tokens that are *not* special: ``is_special`` is false for them
    and ``decode(skip_special=True)`` keeps them (Qwen2.5's ``<tool_call>`` for example).
    ``normalization="NFC"`` NFC-normalises the text between added tokens before encoding it,
    as Qwen2's ``tokenizer.json`` does (an added token is found in the raw text first), with
    the ``tokenizers`` library's NFC (its Unicode tables, which may be newer than Python's).
    ``fallback`` encodes a piece of text (between added tokens) that ``unspellable`` (a
    regex) finds a character in: one the vocabulary has no bytes for.
    Those in ``lstrip`` take the whitespace right before them and those in ``rstrip`` the
    whitespace right after them (a Hugging Face added token's ``lstrip`` / ``rstrip`` flags,
    as Phi-4's tokenizer sets them on all its added tokens): that whitespace is not encoded.
    """

    def __init__(
        self,
        name: str,
        *,
        mergeable_ranks: Mapping[bytes, int],
        pat_str: str,
        special_tokens: Mapping[str, int],
        non_special: Collection[str] = (),
        normalization: Literal["NFC"] | None = None,
        lstrip: Collection[str] = (),
        rstrip: Collection[str] = (),
        fallback: Callable[[str], list[int]] | None = None,
        unspellable: str | None = None,
    ) -> None:
        super().__init__()
        unknown = (set(non_special) | set(lstrip) | set(rstrip)) - set(special_tokens)
        if unknown:
            raise TokenizerError(f"unknown tokens named as added-token flags: {sorted(unknown)}")
        self.name = name
        self._enc = tiktoken.Encoding(
            name,
            pat_str=pat_str,
            mergeable_ranks=dict(mergeable_ranks),
            special_tokens=dict(special_tokens),
        )
        self.vocab_size = int(self._enc.n_vocab)
        self._ranks: Mapping[bytes, int] | None = mergeable_ranks
        self._special = dict(special_tokens)
        plain = frozenset(non_special)
        self._special_ids = frozenset(i for t, i in special_tokens.items() if t not in plain)
        self._ordinary = _piece_encoder(self._enc, normalization, fallback, unspellable)
        # tiktoken converts its allowed-special set on every call: cheap for a few
        # specials, costly for Llama 3's 256. Past a few dozen, split here instead (and
        # wherever a piece is not handed to tiktoken as it is).
        self._allowed = frozenset(self._special)
        self._lstrip = frozenset(lstrip)
        self._rstrip = frozenset(rstrip)
        self._split_here = (
            len(self._special) > _SPLIT_ABOVE
            or bool(lstrip or rstrip)
            or normalization is not None
            or fallback is not None
        )
        # An ASCII text needs no NFC: tiktoken takes it whole where only NFC made the split.
        self._ascii_whole = (
            normalization is not None
            and fallback is None
            and not (lstrip or rstrip)
            and len(self._special) <= _SPLIT_ABOVE
        )
        self._splitter = special_splitter(self._special)
        self._segments = SegmentCache()
        # Heads of recent prompts (not where specials strip the text around them: a
        # head's last piece would depend on what follows it).
        self._prefixes = None if lstrip or rstrip else PrefixCache()

    @classmethod
    def from_file(
        cls,
        name: str,
        path: str | os.PathLike[str],
        *,
        pat_str: str,
        special_tokens: Mapping[str, int],
        **added: Unpack[AddedTokens],
    ) -> TiktokenTokenizer:
        """The tokenizer of a ``.tiktoken`` ranks file (the other options: ``__init__``'s)."""
        ranks = read_tiktoken_ranks(path)
        return cls(
            name, mergeable_ranks=ranks, pat_str=pat_str, special_tokens=special_tokens, **added
        )

    @property
    def special_tokens(self) -> Mapping[str, int]:
        """All added tokens recognised in input (special or not), by text."""
        return self._special

    def encode(self, text: str) -> list[int]:
        """Special-token strings become their ids; the text between them is BPE-encoded.

        For vocabularies with many specials, splitting here, rather than passing
        tiktoken the set of allowed specials, avoids converting that set (hundreds of
        strings) on every call; the result is the same, as tiktoken also encodes the
        pieces between specials apart.
        """
        if not self._split_here or (self._ascii_whole and text.isascii()):
            encoded: list[int] = self._enc.encode(
                text, allowed_special=self._allowed, disallowed_special=()
            )
            return encoded
        return self._encode_split(text)

    def encode_prompt(self, text: str) -> list[int]:
        """``encode`` for rendered prompts: the text between special tokens is cached.

        Equal to ``encode(text)``: the pieces between specials are BPE-encoded apart
        either way, and a piece's ids depend on its text alone.
        """
        prefixes = self._prefixes
        if prefixes is None or len(text) < prefixes.min_chars:
            return self._encode_marked(text)[0]
        return self._encode_after_head(text, prefixes)

    def clear_caches(self) -> None:
        """Forget every cached segment and prompt head (benchmarks, tests)."""
        self._segments = SegmentCache()
        if self._prefixes is not None:
            self._prefixes = PrefixCache()

    def _encode_after_head(self, text: str, prefixes: PrefixCache) -> list[int]:
        """``text``'s ids: those of the longest remembered head it starts with, then the
        rest's; its own head is remembered for the next turn."""
        hit = self._head_of(text, prefixes)
        if hit is None:
            ids, cut, n = self._encode_marked(text)
            if cut:
                prefixes.put(text[:cut], ids[:n])
            return ids
        start = len(hit.text)
        rest, cut, n = self._encode_marked(text[start:])
        ids = hit.ids[: hit.n]
        ids += rest
        if cut:  # a special token past the head's own (which starts the rest)
            prefixes.extend(hit, text[: start + cut], rest[:n])
        return ids

    def _head_of(self, text: str, prefixes: PrefixCache) -> Head | None:
        """The longest remembered head ``text`` starts with, searched for where special
        tokens start near the text's end: the last ``HEAD_NEAR`` characters first (a
        conversation's last answer and question are most often within them), then the
        rest of ``HEAD_WINDOW``."""
        pattern = self._splitter
        assert pattern is not None
        far = max(prefixes.min_chars, len(text) - HEAD_WINDOW)
        near = max(far, len(text) - HEAD_NEAR)
        for lo, hi in ((near, len(text)), (far, near)):
            if lo >= hi:
                continue
            starts = [m.start() for m in pattern.finditer(text, lo, hi)]
            starts.reverse()
            hit = prefixes.find(text, starts)
            if hit is not None:
                return hit
        return None

    def _pieces_of(self, text: str) -> list[str]:
        """``text`` cut at its special tokens: pieces of text between them (even k) and
        the specials (odd k), with the whitespace that stripping specials absorb gone."""
        pattern = self._splitter
        pieces = pattern.split(text) if pattern is not None else [text]
        if self._lstrip or self._rstrip:
            self._strip_around_specials(pieces)
        return pieces

    def _encode_marked(self, text: str) -> tuple[list[int], int, int]:
        """``text``'s ids, through the segment cache, and where its last special token
        starts: its offset and the number of ids before it (0, 0: none). The offset is
        in the text as cut, which is ``text`` itself where no special strips what is
        around it (the prompt heads are used only there)."""
        pieces = self._pieces_of(text)
        ordinary = self._ordinary
        special = self._special
        lookup, keep = self._segments.get, self._segments.put
        last = len(pieces) - 1
        ids: list[int] = []
        pos = cut = n = 0
        for k in range(0, last + 1, 2):
            piece = pieces[k]
            if piece:
                got = lookup(piece)
                if got is None:
                    got = ordinary(piece)
                    keep(piece, got)
                ids += got
                pos += len(piece)
            if k < last:
                name = pieces[k + 1]
                cut, n = pos, len(ids)
                ids.append(special[name])
                pos += len(name)
        return ids, cut, n

    def _encode_split(self, text: str) -> list[int]:
        """Specials become their ids; the pieces between them are BPE-encoded apart."""
        pieces = self._pieces_of(text)
        ordinary = self._ordinary
        special = self._special
        last = len(pieces) - 1
        ids: list[int] = []
        for k in range(0, last + 1, 2):
            if pieces[k]:
                ids += ordinary(pieces[k])
            if k < last:
                ids.append(special[pieces[k + 1]])
        return ids

    def _strip_around_specials(self, pieces: list[str]) -> None:
        """Strip the whitespace that specials marked lstrip/rstrip absorb (in place)."""
        lstrip, rstrip = self._lstrip, self._rstrip
        last = len(pieces) - 1
        for k in range(0, last + 1, 2):
            piece = pieces[k]
            if k and pieces[k - 1] in rstrip:
                piece = piece.lstrip(WHITESPACE)
            if k < last and pieces[k + 1] in lstrip:
                piece = piece.rstrip(WHITESPACE)
            pieces[k] = piece

    def token_to_id(self, token: str) -> int | None:
        special = self._special.get(token)
        if special is not None:
            return special
        try:
            return int(self._enc.encode_single_token(token.encode("utf-8")))
        except KeyError:
            return None

    def _pieces(self) -> list[bytes | None]:
        pieces: list[bytes | None] = [None] * self.vocab_size
        ranks = self._ranks
        if ranks is None:  # pragma: no cover - built once, ranks dropped afterwards
            raise TokenizerError("token table already built")
        for piece, rank in ranks.items():
            pieces[rank] = piece
        for text, i in self._special.items():
            pieces[i] = text.encode("utf-8")
        self._ranks = None  # the table now holds the same bytes objects
        return pieces
