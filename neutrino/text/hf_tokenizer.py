"""Tokenizer over a Hugging Face ``tokenizers`` BPE (``tokenizer.json``).

Two vocabulary spellings are read, both lossless (the concatenated token bytes are the text):

* byte-level (GPT-2 style, a ``ByteLevel`` decoder): each character of a token stands for
  one byte;
* SentencePiece style with byte fallback (Gemma's decoder: replace ``"▁"`` by a space,
  ``ByteFallback``, ``Fuse``): ``"▁"`` is a space and ``<0xNN>`` tokens are single bytes.

A decoder that also strips characters (Llama 2's leading-space ``Strip``) would make the
output differ from the token bytes, so such tokenizers are refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zipfile
from collections.abc import Mapping

import tokenizers
from tokenizers import AddedToken, decoders

from neutrino.text.bytelevel import BYTE_TO_CHAR, token_string_to_bytes
from neutrino.text.errors import TokenizerError
from neutrino.text.token_table import TableTokenizer

__all__ = ["HFTokenizer", "read_zipped"]


class HFTokenizer(TableTokenizer):
    """A byte-level BPE tokenizer from a ``tokenizer.json``.

    Vocabulary strings are mapped back to raw bytes through the GPT-2 byte alphabet; added
    tokens contribute their content as UTF-8. ``is_special`` follows each added token's
    ``special`` flag. Only byte-level tokenizers (ByteLevel decoder) are accepted: for them
    the concatenated token bytes are exactly what the library's own decode produces.
    """

    def __init__(self, name: str, tokenizer: tokenizers.Tokenizer) -> None:
        super().__init__()
        if isinstance(tokenizer.decoder, decoders.ByteLevel):
            self._metaspace = False
        elif _decoder_config(tokenizer) == _METASPACE_DECODER:
            self._metaspace = True
        else:
            raise TokenizerError(
                f"tokenizer {name!r} is neither byte-level nor SentencePiece-style "
                "with byte fallback"
            )
        self.name = name
        self._tk = tokenizer
        self.vocab_size = int(tokenizer.get_vocab_size(with_added_tokens=True))
        added = tokenizer.get_added_tokens_decoder()
        self._added: dict[str, int] = {tok.content: int(i) for i, tok in added.items()}
        self._added_by_id: dict[int, str] = {int(i): tok.content for i, tok in added.items()}
        self._special_ids = frozenset(int(i) for i, tok in added.items() if tok.special)

    @classmethod
    def from_file(
        cls, name: str, path: str | os.PathLike[str], *, special: Mapping[str, int] | None = None
    ) -> HFTokenizer:
        """The ``tokenizer.json`` at ``path``; ``special`` declares vocabulary tokens that a
        model's ``tokenizer_config.json`` adds on top of that file (``added_tokens_decoder``:
        special, not normalized, no whitespace stripping), each at the id given."""
        tokenizer = tokenizers.Tokenizer.from_file(os.fspath(path))
        if special:
            for text, token_id in special.items():
                if tokenizer.token_to_id(text) != token_id:
                    raise TokenizerError(f"tokenizer {name!r}: {text!r} is not id {token_id}")
            tokenizer.add_special_tokens(
                [AddedToken(text, special=True, normalized=False) for text in special]
            )
        return cls(name, tokenizer)

    @classmethod
    def from_zip(
        cls,
        name: str,
        path: str | os.PathLike[str],
        member: str = "tokenizer.json",
        *,
        sha256: str | None = None,
    ) -> HFTokenizer:
        """A ``tokenizer.json`` read from inside a zip archive (see :func:`read_zipped`)."""
        text = read_zipped(name, path, member, sha256=sha256)
        return cls(name, tokenizers.Tokenizer.from_str(text))

    @property
    def special_tokens(self) -> dict[str, int]:
        """All added tokens recognised in input (special or not), by text."""
        return dict(self._added)

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self._tk.encode(text, add_special_tokens=False).ids
        return ids

    def encode_prompt(self, text: str) -> list[int]:
        # HF pre-tokenizers may treat a piece's start specially, so pieces between
        # special tokens are not encoded apart (and not cached) here.
        return self.encode(text)

    def token_to_id(self, token: str) -> int | None:
        added = self._added.get(token)
        if added is not None:
            return added
        if self._metaspace:
            form = token.replace(" ", _SPACE)
        else:
            form = "".join([BYTE_TO_CHAR[b] for b in token.encode("utf-8")])
        found = self._tk.token_to_id(form)
        return None if found is None else int(found)

    def _pieces(self) -> list[bytes | None]:
        id_to_token = self._tk.id_to_token
        added = self._added_by_id
        spell = _metaspace_bytes if self._metaspace else token_string_to_bytes
        pieces: list[bytes | None] = []
        for i in range(self.vocab_size):
            content = added.get(i)
            if content is not None:
                # The decoder spells added tokens too (Gemma's "\u2581\u2581" is two spaces).
                pieces.append(_metaspace_bytes(content) if self._metaspace else content.encode())
                continue
            text = id_to_token(i)
            pieces.append(None if text is None else spell(text))
        return pieces


def read_zipped(
    name: str,
    path: str | os.PathLike[str],
    member: str = "tokenizer.json",
    *,
    sha256: str | None = None,
) -> str:
    """A ``tokenizer.json``'s text read from inside a zip archive, as some packages ship
    it; refused unless its bytes have the SHA-256 ``sha256`` (when given)."""
    try:
        with zipfile.ZipFile(path) as archive:
            data = archive.read(member)
        text = data.decode("utf-8")
    except (OSError, KeyError, zipfile.BadZipFile, UnicodeDecodeError) as e:
        raise TokenizerError(f"tokenizer {name!r}: cannot read {member} from {path}") from e
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise TokenizerError(f"tokenizer {name!r}: {member} in {path} has another SHA-256")
    return text


_SPACE = "\u2581"
_METASPACE_DECODER = {
    "type": "Sequence",
    "decoders": [
        {"type": "Replace", "pattern": {"String": _SPACE}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
    ],
}
_BYTE_TOKEN = re.compile(r"<0x([0-9A-F]{2})>")


def _decoder_config(tokenizer: tokenizers.Tokenizer) -> object:
    decoder = tokenizer.decoder
    if decoder is None:
        return None
    try:
        return json.loads(decoder.__getstate__())
    except (AttributeError, TypeError, ValueError):
        return None


def _metaspace_bytes(token: str) -> bytes:
    """A SentencePiece-style token's bytes: ``<0xNN>`` is one byte, ``\u2581`` a space."""
    m = _BYTE_TOKEN.fullmatch(token)
    if m is not None:
        return bytes((int(m.group(1), 16),))
    return token.replace(_SPACE, " ").encode("utf-8")
