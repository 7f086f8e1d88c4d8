"""One classification of every error Neutrino can report, rendered per protocol.

An :class:`ErrorKind` fixes, once, the HTTP status, the OpenAI error ``type`` and
default ``code``, the gRPC status name and the metric label. Front ends only ever
render a :class:`NeutrinoError`; they never invent statuses of their own.
"""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    http_status: int
    type: str  # OpenAI error "type"
    code: str | None  # OpenAI error "code" by default
    grpc: str  # grpc.StatusCode name
    label: str  # metric label
    # Seconds a client should wait before retrying (HTTP Retry-After, gRPC retry pushback):
    # set on the refusals that say "not now" (429, 503), absent where retrying is no use.
    retry_after_s: int | None = None


class ErrorKind(enum.Enum):
    BAD_REQUEST = ErrorSpec(400, "invalid_request_error", None, "INVALID_ARGUMENT", "bad_request")
    CONTEXT_LENGTH = ErrorSpec(
        400,
        "invalid_request_error",
        "context_length_exceeded",
        "INVALID_ARGUMENT",
        "context_length",
    )
    UNSUPPORTED = ErrorSpec(
        400, "invalid_request_error", "unsupported_parameter", "UNIMPLEMENTED", "unsupported"
    )
    UNAUTHENTICATED = ErrorSpec(
        401, "invalid_request_error", "invalid_api_key", "UNAUTHENTICATED", "unauthenticated"
    )
    PERMISSION_DENIED = ErrorSpec(
        403, "permission_error", "permission_denied", "PERMISSION_DENIED", "permission_denied"
    )
    NOT_FOUND = ErrorSpec(404, "invalid_request_error", "not_found", "NOT_FOUND", "not_found")
    MODEL_NOT_FOUND = ErrorSpec(
        404, "invalid_request_error", "model_not_found", "NOT_FOUND", "model_not_found"
    )
    METHOD_NOT_ALLOWED = ErrorSpec(
        405, "invalid_request_error", "method_not_allowed", "UNIMPLEMENTED", "method_not_allowed"
    )
    REQUEST_TIMEOUT = ErrorSpec(
        408, "invalid_request_error", "request_timeout", "DEADLINE_EXCEEDED", "request_timeout"
    )
    PAYLOAD_TOO_LARGE = ErrorSpec(
        413, "invalid_request_error", "request_too_large", "RESOURCE_EXHAUSTED", "too_large"
    )
    UNSUPPORTED_MEDIA_TYPE = ErrorSpec(
        415,
        "invalid_request_error",
        "unsupported_media_type",
        "INVALID_ARGUMENT",
        "unsupported_media_type",
    )
    QUEUE_FULL = ErrorSpec(
        429, "rate_limit_error", "queue_full", "RESOURCE_EXHAUSTED", "queue_full", 1
    )
    ENGINE_OVERLOADED = ErrorSpec(
        429, "rate_limit_error", "engine_overloaded", "RESOURCE_EXHAUSTED", "engine_overloaded", 1
    )
    KEY_CONCURRENCY = ErrorSpec(
        429,
        "rate_limit_error",
        "key_concurrency_limit",
        "RESOURCE_EXHAUSTED",
        "key_concurrency_limit",
        1,
    )
    # A key past its requests or tokens per minute, or its daily budget (the wait is the
    # error's own: until the window resets).
    RATE_LIMITED = ErrorSpec(
        429, "rate_limit_error", "rate_limit_exceeded", "RESOURCE_EXHAUSTED", "rate_limited", 1
    )
    INTERNAL = ErrorSpec(500, "server_error", "internal_error", "INTERNAL", "internal")
    ENGINE_ERROR = ErrorSpec(502, "server_error", "engine_error", "INTERNAL", "engine_error")
    ENGINE_DISCONNECTED = ErrorSpec(
        502, "server_error", "engine_disconnected", "UNAVAILABLE", "engine_disconnected"
    )
    NO_ENGINE = ErrorSpec(503, "server_error", "no_engine", "UNAVAILABLE", "no_engine", 2)
    SHUTTING_DOWN = ErrorSpec(
        503, "server_error", "shutting_down", "UNAVAILABLE", "shutting_down", 5
    )
    TIMEOUT = ErrorSpec(504, "timeout_error", "timeout", "DEADLINE_EXCEEDED", "timeout")
    CANCELLED = ErrorSpec(499, "cancelled", "cancelled", "CANCELLED", "cancelled")

    @property
    def spec(self) -> ErrorSpec:
        value: ErrorSpec = self.value
        return value


# One step of a field's path: an index in brackets, or a key.
_STEP = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


def parse_path(param: str) -> tuple[str | int, ...]:
    """``messages[2].content`` -> ``("messages", 2, "content")``: the keys and indexes of a
    path as ``neutrino.pipeline.fields.path`` writes it (its inverse)."""
    return tuple(int(index) if index else key for index, key in _STEP.findall(param))


class NeutrinoError(Exception):
    """An error with a client-safe message and a fixed classification."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        loc: tuple[str | int, ...] | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(message)
        self._retry_after_s = retry_after_s  # None: the kind's
        self.kind = kind
        self.message = message
        self.param = param
        self.code = code if code is not None else kind.spec.code
        # Where the bad field is in the client's request, as keys and indexes (see
        # neutrino.pipeline.fields; read from ``param`` when not given); None for an error
        # that is not about one field.
        self.loc = loc if loc is not None or not param else parse_path(param)
        # The pipeline counted the request it ended (a front end counts the rest).
        self.counted = False

    @property
    def http_status(self) -> int:
        return self.kind.spec.http_status

    @property
    def retry_after_s(self) -> int | None:
        own = self._retry_after_s
        return own if own is not None else self.kind.spec.retry_after_s

    def openai_body(self) -> dict[str, Any]:
        """The ``{"error": {...}}`` object of OpenAI's API."""
        return {
            "error": {
                "message": self.message,
                "type": self.kind.spec.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def anthropic_body(self) -> dict[str, Any]:
        """The ``{"type": "error", "error": {...}}`` object of Anthropic's Messages API."""
        return {
            "type": "error",
            "error": {"type": ANTHROPIC_TYPES[self.kind], "message": self.message},
        }

    def fresh(self) -> NeutrinoError:
        """A copy to raise, for an error that an object keeps (a request's ending).

        Raising the kept error itself would attach a traceback to it, whose frames hold
        the request (its parsed body, its messages) in a reference cycle with the keeper;
        that memory would wait for the garbage collector's next full pass.
        """
        return NeutrinoError(
            self.kind, self.message, param=self.param, code=self.code, loc=self.loc,
            retry_after_s=self._retry_after_s,
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"NeutrinoError({self.kind.name}, {self.message!r}, param={self.param!r})"


# The error ``type`` of Anthropic's API for each kind (its status stays the kind's own:
# Anthropic answers an overloaded server with 529, Neutrino with the kind's 429 or 503).
ANTHROPIC_TYPES: dict[ErrorKind, str] = {
    ErrorKind.BAD_REQUEST: "invalid_request_error",
    ErrorKind.CONTEXT_LENGTH: "invalid_request_error",
    ErrorKind.UNSUPPORTED: "invalid_request_error",
    ErrorKind.UNAUTHENTICATED: "authentication_error",
    ErrorKind.PERMISSION_DENIED: "permission_error",
    ErrorKind.NOT_FOUND: "not_found_error",
    ErrorKind.MODEL_NOT_FOUND: "not_found_error",
    ErrorKind.METHOD_NOT_ALLOWED: "invalid_request_error",
    ErrorKind.REQUEST_TIMEOUT: "timeout_error",
    ErrorKind.PAYLOAD_TOO_LARGE: "request_too_large",
    ErrorKind.UNSUPPORTED_MEDIA_TYPE: "invalid_request_error",
    ErrorKind.QUEUE_FULL: "rate_limit_error",
    ErrorKind.ENGINE_OVERLOADED: "overloaded_error",
    ErrorKind.KEY_CONCURRENCY: "rate_limit_error",
    ErrorKind.RATE_LIMITED: "rate_limit_error",
    ErrorKind.INTERNAL: "api_error",
    ErrorKind.ENGINE_ERROR: "api_error",
    ErrorKind.ENGINE_DISCONNECTED: "api_error",
    ErrorKind.NO_ENGINE: "overloaded_error",
    ErrorKind.SHUTTING_DOWN: "overloaded_error",
    ErrorKind.TIMEOUT: "timeout_error",
    ErrorKind.CANCELLED: "api_error",
}


class ClientTooSlow(NeutrinoError):
    """A client did not take what was written to it within the send timeout: it is
    dropped (the engine request gets one cancel, "client too slow")."""

    def __init__(self) -> None:
        super().__init__(ErrorKind.CANCELLED, "the client did not read its stream in time")


def bad_request(message: str, param: str | None = None) -> NeutrinoError:
    return NeutrinoError(ErrorKind.BAD_REQUEST, message, param=param)


def unsupported(message: str, param: str | None = None) -> NeutrinoError:
    """A valid request for something this server does not do (400 unsupported_parameter)."""
    return NeutrinoError(ErrorKind.UNSUPPORTED, message, param=param)


class StartupError(Exception):
    """Neutrino cannot start: a port is taken, the embedded engine cannot be run. Not a
    request error: the ``neutrino`` command prints the message, which names what failed and
    the setting that changes it, as one line and exits 1."""


def os_reason(exc: OSError) -> str:
    """``address already in use`` for an OSError, without the call's own wording."""
    if exc.errno is not None and exc.errno > 0:
        return os.strerror(exc.errno).lower()
    return (exc.strerror or str(exc)).lower()
