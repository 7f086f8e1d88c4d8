"""The GPT-2 byte-level alphabet: maps every byte to a printable unicode character.

Byte-level BPE vocabularies (GPT-2, Llama 3, Qwen2, DeepSeek) store tokens as strings over
this alphabet. The table is a published fact of the format; built here from its definition:
printable latin-1 bytes map to themselves, the other 68 bytes to U+0100 onward, in order.
"""

from __future__ import annotations

from typing import Final

__all__ = ["BYTE_TO_CHAR", "CHAR_TO_BYTE", "token_string_to_bytes"]


def _build() -> tuple[str, ...]:
    printable = {
        *range(ord("!"), ord("~") + 1),
        *range(ord("\N{INVERTED EXCLAMATION MARK}"), ord("\N{NOT SIGN}") + 1),
        *range(ord("\N{REGISTERED SIGN}"), ord("\N{LATIN SMALL LETTER Y WITH DIAERESIS}") + 1),
    }
    chars: list[str] = []
    extra = 0
    for b in range(256):
        if b in printable:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return tuple(chars)


BYTE_TO_CHAR: Final[tuple[str, ...]] = _build()
CHAR_TO_BYTE: Final[dict[str, int]] = {c: b for b, c in enumerate(BYTE_TO_CHAR)}
# str.translate table: alphabet character -> the latin-1 character of its byte; a latin-1
# character outside the alphabet -> U+0100, which then fails the latin-1 encode.
_TO_LATIN1: Final[dict[int, str]] = {
    **{b: "\u0100" for b in range(256)},
    **{ord(c): chr(b) for b, c in enumerate(BYTE_TO_CHAR)},
}


def token_string_to_bytes(token: str) -> bytes:
    """Raw bytes of a byte-level vocabulary string.

    A string containing a character outside the alphabet is not a byte-level token; like the
    HF ByteLevel decoder, its own UTF-8 encoding is used instead.
    """
    try:
        return token.translate(_TO_LATIN1).encode("latin-1")
    except UnicodeEncodeError:
        return token.encode("utf-8")
