"""What every ``neutrino.v1`` handler shares: the error mapping, the call's deadline as
the request's timeout, its metadata, and the end of a call that goes away early.

Errors are rendered from the one classification (``NeutrinoError.kind.spec.grpc``) with
client-safe messages only; a call cancelled under a handler (client gone, deadline
passed) still reaches ``close()`` on the request, which sends the engine its one cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

import grpc

from neutrino.config import Config
from neutrino.errors import ClientTooSlow, ErrorKind, NeutrinoError
from neutrino.frontends.common import new_id
from neutrino.pipeline.auth import KeyRing, Principal

if TYPE_CHECKING:
    from neutrino.engine.messages import ModalResult
    from neutrino.pipeline.call import ModalCall
    from neutrino.pipeline.modalities import ModalJob
    from neutrino.pipeline.orchestrator import Orchestrator

log = logging.getLogger("neutrino.grpc")

T = TypeVar("T")
Context = grpc.aio.ServicerContext[object, object]


class Closable(Protocol):
    def close(self, reason: str = ...) -> None: ...


def status_code(err: NeutrinoError) -> grpc.StatusCode:
    """The gRPC status of ``err``: its kind's one classification, shared with HTTP."""
    return grpc.StatusCode[err.kind.spec.grpc]


def error_metadata(err: NeutrinoError) -> tuple[tuple[str, str], ...]:
    """Trailing metadata with the OpenAI-style ``code`` and the offending ``param``, and
    ``grpc-retry-pushback-ms`` (what gRPC's retry policy waits) where retrying later helps."""
    md = []
    if err.code:
        md.append(("neutrino-error-code", err.code))
    if err.param:
        md.append(("neutrino-error-param", err.param))
    if err.retry_after_s is not None:
        md.append(("grpc-retry-pushback-ms", str(1000 * err.retry_after_s)))
    return tuple(md)


async def guarded(
    context: Context,
    what: str,
    run: Callable[[], Awaitable[T]],
    refused: Callable[[NeutrinoError], None] | None = None,
) -> T | None:
    """Run a handler; errors become statuses with client-safe messages only
    (``refused`` counts one the pipeline did not: ``Observer.refused``).

    The status is set on the call and the handler returns (None: no message), rather
    than raised with ``context.abort``: grpc keeps the AbortError it raises in a cycle
    with the call's state, and the traceback's frames would keep the request (a
    20 MB prompt, say) until the garbage collector's next full pass.
    """
    try:
        return await run()
    except NeutrinoError as err:
        if refused is not None:
            refused(err)
        fail(context, err)
    except (asyncio.CancelledError, grpc.aio.AbortError):
        raise
    except Exception:
        log.exception("gRPC %s failed", what)
        fail(context, NeutrinoError(ErrorKind.INTERNAL, "internal error"))
    return None


def refusals(orch: Orchestrator, route: str) -> Callable[[NeutrinoError], None]:
    """What counts a gRPC call's refusal on ``route`` (for :func:`guarded`)."""
    return functools.partial(orch.observe.refused, "grpc", route)


def fail(context: Context, err: NeutrinoError) -> None:
    """End the call with ``err``'s status, message and trailing metadata."""
    context.set_code(status_code(err))
    context.set_details(err.message)
    context.set_trailing_metadata(error_metadata(err))


def caller(context: Context, keys: KeyRing) -> Principal | None:
    """The API key's principal of a call (``authorization: Bearer KEY`` or ``x-api-key``
    metadata); None when keys are off; UNAUTHENTICATED raised for a missing or bad key."""
    return keys.authenticate(metadata(context, "authorization"), metadata(context, "x-api-key"))


async def send(context: Context, message: object, limit_s: float) -> None:
    """Write one message of a stream; ClientTooSlow once the client has taken nothing
    for ``limit_s`` (flow control holds the write: the client stopped reading)."""
    try:
        async with asyncio.timeout(limit_s):
            await context.write(message)
    except TimeoutError:
        raise ClientTooSlow() from None


def metadata(context: Context, key: str) -> str:
    """The first value of an invocation metadata entry ("" when absent)."""
    for k, v in context.invocation_metadata() or ():
        if k == key and isinstance(v, str):
            return v
    return ""


# The client's deadline passes a little before the server's (the server counts from when
# the call reached it), and the client then cancels the call: a call cancelled this close
# to its deadline is taken as timed out.
DEADLINE_SLACK_S = 0.05


def end_reason(context: Context) -> str:
    """Why a call was cancelled under us: its deadline passed, or the client left."""
    remaining = context.time_remaining()
    if remaining is not None and remaining <= DEADLINE_SLACK_S:
        return "timeout"
    return "client disconnected"


def timeout_s(context: Context, cfg: Config) -> float | None:
    """The call's deadline as the request's timeout, capped by the server's own
    (None without a deadline: the server's default applies)."""
    remaining = context.time_remaining()
    if remaining is None:
        return None
    return max(0.001, min(remaining, cfg.limits.request_timeout_s))


@contextlib.asynccontextmanager
async def closed_at_end(context: Context, requests: Sequence[Closable]) -> AsyncIterator[None]:
    """Close every one of ``requests`` when the block ends: a no-op for one that has
    ended, else one cancel to the engine, with the reason the call went away."""
    reason = "client disconnected"
    try:
        yield
    except asyncio.CancelledError:
        reason = end_reason(context)
        raise
    except ClientTooSlow:
        reason = "client too slow"
        raise
    finally:
        for request in requests:
            request.close(reason)


async def closing(context: Context, request: Closable, run: Callable[[], Awaitable[T]]) -> T:
    """Run ``run`` and always close ``request`` after it (``closed_at_end``)."""
    async with closed_at_end(context, (request,)):
        return await run()


@dataclass(frozen=True, slots=True)
class Arrival:
    """A call as it came: when, whose (its key checked on arrival, so nothing is done
    for a refusal) and its trace context."""

    received_ns: int
    principal: Principal | None
    traceparent: str


class Service:
    """What every gRPC service of Neutrino's is: the pipeline it serves through."""

    def __init__(self, orchestrator: Orchestrator) -> None:
        self.orch = orchestrator

    @property
    def cfg(self) -> Config:
        """The running configuration (the orchestrator's: a reload swaps it)."""
        return self.orch.cfg

    async def guarded(
        self, context: Context, what: str, route: str, run: Callable[[Arrival], Awaitable[T]]
    ) -> T | None:
        """:func:`guarded` ``run`` of the call's :class:`Arrival`, a refusal counted on
        ``route``. The arrival is taken first: the time, then the key (UNAUTHENTICATED
        for a missing or bad one), then the ``traceparent``."""

        async def arrived() -> T:
            received = time.monotonic_ns()
            principal = caller(context, self.orch.keys)
            return await run(Arrival(received, principal, metadata(context, "traceparent")))

        return await guarded(context, what, arrived, refusals(self.orch, route))

    async def call(
        self, job: ModalJob, prefix: str, context: Context, arrival: Arrival
    ) -> ModalCall:
        """A modality job submitted for this call (its id: ``prefix`` and a new id)."""
        return await self.orch.call(
            job,
            request_id=new_id(prefix),
            timeout_s=timeout_s(context, self.cfg),
            principal=arrival.principal,
            protocol="grpc",
            received_ns=arrival.received_ns,
        )

    async def answer(
        self, job: ModalJob, prefix: str, context: Context, arrival: Arrival
    ) -> tuple[ModalCall, ModalResult]:
        """A one-answer job's call and its result (the call closed after it)."""
        call = await self.call(job, prefix, context, arrival)
        return call, await closing(context, call, call.result)
