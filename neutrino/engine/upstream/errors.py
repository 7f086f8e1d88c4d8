"""An HTTP upstream's error answers as engine errors (sans-IO).

Each becomes the :class:`EngineError` a socket engine would have sent, so that
``engine.client.classify_engine_error`` turns it into the client's error the same way:
what blames the request passes its message on, what is the upstream's own failure is
logged and hidden.
"""

from __future__ import annotations

import orjson

from neutrino.engine.messages import EngineError, ErrorCode

# OpenAI-style error types (llama.cpp's server, vLLM) that say more than the status.
_TYPES: dict[str, ErrorCode] = {
    "exceed_context_size_error": ErrorCode.CONTEXT_LENGTH,
    "not_supported_error": ErrorCode.UNSUPPORTED,
    "unavailable_error": ErrorCode.OVERLOADED,
}

_STATUSES: dict[int, ErrorCode] = {
    400: ErrorCode.INVALID_REQUEST,
    404: ErrorCode.UNKNOWN_MODEL,
    413: ErrorCode.CONTEXT_LENGTH,
    422: ErrorCode.INVALID_REQUEST,
    429: ErrorCode.OVERLOADED,
    501: ErrorCode.UNSUPPORTED,
    503: ErrorCode.OVERLOADED,
}

MAX_ERROR_BYTES = 64 * 1024  # read of an error answer's body, at most


def error_object(body: bytes | dict[str, object]) -> dict[str, object]:
    """The ``error`` object of an OpenAI-style error body (empty if it has none)."""
    doc: object = body
    if isinstance(body, bytes):
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            return {"message": body[:2000].decode("utf-8", "replace")} if body else {}
    if not isinstance(doc, dict):
        return {}
    err = doc.get("error", doc)
    if isinstance(err, str):
        return {"message": err}
    return err if isinstance(err, dict) else {}


def upstream_error(status: int, body: bytes | dict[str, object]) -> EngineError:
    """The engine error for an upstream's answer with HTTP ``status`` (or an ``error``
    event inside a stream, status 0 then) and its body."""
    err = error_object(body)
    message = err.get("message")
    text = message if isinstance(message, str) and message else f"HTTP status {status}"
    code = _TYPES.get(str(err.get("type", "")))
    if code is None:
        inner = err.get("code")
        status = inner if not status and isinstance(inner, int) else status
        code = _STATUSES.get(status, ErrorCode.INTERNAL)
    if code is ErrorCode.INVALID_REQUEST and "context" in text.lower():
        code = ErrorCode.CONTEXT_LENGTH
    return EngineError(code, text)
