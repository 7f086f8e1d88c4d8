"""Exceptions raised by the text layer."""

from __future__ import annotations

__all__ = [
    "InvalidTokenId",
    "TemplateError",
    "TokenizerError",
    "TokenizerUnavailable",
    "UnknownTokenizer",
]


class TokenizerError(Exception):
    """Base class for tokenizer problems."""


class TokenizerUnavailable(TokenizerError):
    """A known tokenizer whose files cannot be found (its package is not installed)."""


class UnknownTokenizer(KeyError):
    """No tokenizer is registered under this name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "unknown tokenizer"


class InvalidTokenId(TokenizerError, ValueError):
    """A token id outside the tokenizer's vocabulary (or in a hole of it)."""


class TemplateError(ValueError):
    """A chat template could not be rendered; the message is safe to show a client.

    ``param`` names the request field the template could not render, where known
    (e.g. ``messages[2].content``).
    """

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param
