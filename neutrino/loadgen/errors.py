"""How a failed request is counted: its kind (a short, bounded label) and a message."""

from __future__ import annotations

import json
from typing import Any

MAX_KIND = 80


class RequestFailed(Exception):
    """A request the server answered with an error, or whose answer broke its protocol."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind[:MAX_KIND]
        self.message = message


def http_failure(status: int, body: bytes) -> RequestFailed:
    """An HTTP error answer: ``http STATUS`` and the error's code or type from an OpenAI or
    Anthropic error body, when it has one."""
    label, message = error_fields(_json(body))
    kind = f"http {status}" + (f" {label}" if label else "")
    return RequestFailed(kind, message or body[:300].decode("utf-8", "replace"))


def stream_failure(obj: Any) -> RequestFailed:
    """An error event inside a stream that had started well."""
    label, message = error_fields(obj)
    return RequestFailed(f"stream error {label or 'unknown'}", message)


def error_fields(obj: Any) -> tuple[str, str]:
    """(code or type, message) of ``{"error": {...}}`` (OpenAI's and Anthropic's shapes)."""
    err = obj.get("error") if isinstance(obj, dict) else None
    if not isinstance(err, dict):
        return "", ""
    label = err.get("code") if isinstance(err.get("code"), str) else err.get("type")
    message = err.get("message")
    return (
        label if isinstance(label, str) else "",
        message if isinstance(message, str) else "",
    )


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def classify(exc: BaseException) -> tuple[str, str]:
    """The kind and message of a failure no driver classified: a timeout, a broken
    connection, or the exception's type."""
    if isinstance(exc, RequestFailed):
        return exc.kind, exc.message
    if isinstance(exc, TimeoutError):
        return "timeout", "no complete answer within --timeout"
    if isinstance(exc, ConnectionError | OSError):
        return "connection", str(exc) or type(exc).__name__
    return f"error {type(exc).__name__}", str(exc)
