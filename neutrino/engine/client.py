"""The narrow seam between the pipeline and engines.

``EngineClient`` is what the pipeline needs of "the engines": which models are
served, and a way to submit a query whose results go to a sink. The real
implementation is :class:`neutrino.engine.fleet.router.EngineRouter` (UNIX sockets);
:class:`neutrino.engines.inprocess.InProcessEngineClient` runs an engine in the
same event loop for tests, without a socket. Both drive the same sans-IO
:class:`neutrino.engine.link.EngineLink`, which holds the client's protocol rules;
the in-process engine is served by the same :class:`neutrino.engines.session.EngineSession`
as an engine process.

The sink a query's results go to, the error a failing sink ends with and the
classification of engine errors live here too: the pipeline imports only this
module and ``messages``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from neutrino.engine.messages import (
    EngineError,
    ErrorCode,
    ModalResult,
    ModelInfo,
    ModelState,
    Query,
    TextResult,
)
from neutrino.errors import ErrorKind, NeutrinoError

log = logging.getLogger("neutrino.engine")


class StreamSink(Protocol):
    """Receives one request's results; called synchronously from the event loop.

    A sink that cannot take what the engine sent raises from ``on_result``,
    ``on_tokens`` or ``on_modal`` (a :class:`NeutrinoError` says why). The engine
    link then cancels that request on the engine and ends the sink with the error
    (see :func:`sink_failure`); the connection and its other requests go on.
    """

    def on_result(self, result: TextResult) -> bool:
        """Take a result; True asks for ``flush()`` once the current batch is done."""
        ...

    def on_tokens(self, tokens: list[int]) -> bool:
        """Take a mid-stream result that carries only token ids (the hot path)."""
        ...

    def on_error(self, error: NeutrinoError) -> None: ...

    def on_modal(self, result: ModalResult) -> None:
        """Take a modality result (embeddings, scores, transcript, audio chunk, boxes)."""
        ...

    def flush(self) -> None:
        """Deliver what the batch produced (one write per stream per batch)."""
        ...

    def on_moved(self, engine: str, reason: str) -> None:
        """Its answer goes on on ``engine``: the one it was on was lost, failed it or was
        drained (``reason``) after its first token (engine/fleet/migration.py)."""
        ...


def sink_failure(exc: Exception) -> NeutrinoError:
    """The error a request ends with when its sink raised while taking engine output."""
    if isinstance(exc, NeutrinoError):
        return exc
    log.error("handling an engine result failed", exc_info=exc)
    return NeutrinoError(ErrorKind.INTERNAL, "internal error while handling the engine's output")


_ENGINE_ERRORS: dict[ErrorCode, ErrorKind] = {
    ErrorCode.INVALID_REQUEST: ErrorKind.BAD_REQUEST,
    ErrorCode.UNKNOWN_MODEL: ErrorKind.MODEL_NOT_FOUND,
    ErrorCode.OVERLOADED: ErrorKind.ENGINE_OVERLOADED,
    ErrorCode.CONTEXT_LENGTH: ErrorKind.CONTEXT_LENGTH,
    ErrorCode.UNSUPPORTED: ErrorKind.UNSUPPORTED,
}


def classify_engine_error(err: EngineError, engine: str = "") -> NeutrinoError:
    """The client-facing error for an engine's error frame.

    A code that blames the request (invalid, unknown model, context length, unsupported,
    overloaded) passes the engine's message on as one bounded line: it tells the client
    what to change. An internal or protocol failure is the engine's own business: its
    message, which may hold a trace or a path, is logged and the client gets a fixed text.
    """
    kind = _ENGINE_ERRORS.get(err.code)
    if kind is not None:
        return NeutrinoError(kind, f"engine error: {_one_line(err.message)}")
    log.warning("engine %s failed a request (%s): %s", engine, err.code.name, err.message[:4000])
    return NeutrinoError(ErrorKind.ENGINE_ERROR, "the engine failed to process the request")


def _one_line(message: str, limit: int = 300) -> str:
    line = message.strip().partition("\n")[0]
    line = "".join(c if c.isprintable() else " " for c in line[: limit + 1])
    return line if len(line) <= limit else line[: limit - 3] + "..."


def lost_connection() -> NeutrinoError:
    """The error every request in flight on a lost engine connection ends with."""
    return NeutrinoError(ErrorKind.ENGINE_DISCONNECTED, "the engine connection was lost")


class Submission(Protocol):
    """A query in flight."""

    def cancel(self, reason: str) -> bool:
        """Send one cancel to the engine if still in flight; True if one was sent."""
        ...

    def forget(self) -> None:
        """Drop the sink without telling the engine (the request already ended)."""
        ...


class RequestOwner(Protocol):
    """What holds a request id: an engine link's adapter (socket or in-process)."""

    def cancel(self, rid: int, reason: str) -> bool: ...

    def forget(self, rid: int) -> None: ...


class LinkSubmission:
    """A :class:`Submission` for request ``rid`` on ``owner``."""

    __slots__ = ("owner", "rid")

    def __init__(self, owner: RequestOwner, rid: int) -> None:
        self.owner = owner
        self.rid = rid

    def cancel(self, reason: str) -> bool:
        return self.owner.cancel(self.rid, reason)

    def forget(self) -> None:
        self.owner.forget(self.rid)


class Relayed(Protocol):
    """A passthrough upstream's answer to a relayed request (status 200), read once:
    ``chunks`` as they arrive (a stream) or ``read`` whole; ``close`` ends it there."""

    content_type: str

    def chunks(self) -> AsyncIterator[bytes]: ...

    async def read(self, limit: int) -> bytes:
        """The whole body; NeutrinoError when it is longer than ``limit`` bytes."""
        ...

    def close(self) -> None: ...


class EngineClient(Protocol):
    def models(self) -> Mapping[str, ModelInfo]:
        """Models served by connected engines."""
        ...

    def has_engine(self) -> bool: ...

    async def wait_for(self, model: str, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds, while a managed engine that serves (or may
        serve) ``model`` is starting or restarting; whether ``model`` is served now."""
        ...

    def capacity(self) -> int:
        """Concurrent requests the connected engines accept, in total."""
        ...

    def submit(self, query: Query, sink: StreamSink) -> Submission:
        """Send ``query``; raises NeutrinoError (NO_ENGINE, MODEL_NOT_FOUND) if it cannot."""
        ...

    def ready(self, model: str) -> bool:
        """Whether a query of ``model`` may be submitted now (else :meth:`wait_for` and
        :meth:`ensure_loaded` first)."""
        ...

    async def ensure_loaded(self, model: str, timeout: float) -> None:
        """Return once an engine serving ``model`` has it loaded (an engine that loads
        models on demand loads it now; others hold theirs loaded)."""
        ...

    async def load(self, model: str, timeout: float) -> None:
        """An operator's load of ``model`` (raises NeutrinoError)."""
        ...

    async def unload(self, model: str) -> None:
        """An operator's unload of ``model`` (raises NeutrinoError)."""
        ...

    def model_engines(self, model: str) -> list[tuple[str, ModelState]]:
        """Each engine serving ``model``, and the model's state there."""
        ...

    def drain(self, engine: str) -> int:
        """An operator's drain of ``engine``: no request goes to it from now on, and the
        answers it is making move to other replicas (how many did; raises NeutrinoError
        NOT_FOUND for an unknown engine)."""
        ...

    def resume(self, engine: str) -> None:
        """Route to a drained ``engine`` again."""
        ...

    # The models served by passthrough upstreams only: their requests are relayed as the
    # client sent them, not submitted as queries (read on every request: a set, no call).
    relayed: frozenset[str]

    async def relay(
        self, model: str, path: str, doc: dict[str, Any], raw: bytes, traceparent: str
    ) -> Relayed:
        """POST the client's body (``raw``, decoded: ``doc``) to ``path`` of an upstream
        serving ``model`` in passthrough mode (re-encoded only where the model is renamed);
        its answer when 200, else the NeutrinoError its error maps to."""
        ...

    def snapshot(self) -> list[dict[str, object]]:
        """Per-engine state for /neutrino/v1/app_state."""
        ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...
