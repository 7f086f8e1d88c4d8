"""What the pipeline tells metrics and tracing about a request: once at its start (a span,
whose id the engine frame carries) and once at its end (one tally, one span tree).

Nothing here runs per token: the end is read off the lifecycle's state times and the
request's counts. ``Tracer`` is the seam to ``observability/tracing.py``; the metrics are
``observability/metrics.py``'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from neutrino.errors import NeutrinoError
from neutrino.observability.metrics import Gaps, Metrics
from neutrino.pipeline.history import Spent, moves
from neutrino.pipeline.state import Lifecycle, State

AttrValue = str | bool | int | float | Sequence[str]
NOTHING_SPENT = Spent(0)  # a request that ended before an engine saw it


class Span(Protocol):
    """A request's span: begun when it was received, ended once with its phases."""

    @property
    def traceparent(self) -> str: ...

    def end(
        self,
        phases: Mapping[str, int],
        attributes: Mapping[str, AttrValue],
        error: tuple[str, str] | None = None,
    ) -> None: ...


class Attributed(Protocol):
    """An ended request, as its span describes its response."""

    request_id: str
    model: str
    route: str
    hops: list[tuple[str, str]] | None


def response_attributes(source: Attributed, finish_reason: str | None) -> dict[str, AttrValue]:
    """A span's response attributes (only a traced request's are made)."""
    attrs: dict[str, AttrValue] = {
        "gen_ai.response.id": source.request_id,
        "gen_ai.response.model": source.model,
    }
    if finish_reason is not None:
        attrs["gen_ai.response.finish_reasons"] = [finish_reason]
    if source.route:
        attrs["neutrino.route"] = source.route
    hops = source.hops
    if hops:
        attrs["neutrino.migrations"] = len(hops)
        attrs["neutrino.migrated_to"] = moves(hops)
    return attrs


class Tracer(Protocol):
    def begin(
        self,
        name: str,
        traceparent: str | None,
        start_mono_ns: int,
        attributes: Mapping[str, AttrValue],
    ) -> Span | None: ...


class Observed:
    """One request, as metrics and tracing see it: labels, and its span when traced
    (with the monotonic ns of the phases only a span needs)."""

    __slots__ = ("phases", "protocol", "received", "route", "span")

    def __init__(self, protocol: str, route: str, received: int) -> None:
        self.protocol = protocol
        self.route = route
        self.received = received
        self.span: Span | None = None
        self.phases: dict[str, int] | None = None  # a traced request's, from its begin

    def mark(self, phase: str) -> None:
        if self.phases is not None:
            self.phases[phase] = time.monotonic_ns()


def outcome_of(lifecycle: Lifecycle, error: NeutrinoError | None) -> str:
    """The outcome label of an ended request."""
    state = lifecycle.state
    if state is State.COMPLETE and error is None:
        return "ok"
    if state is State.CANCELLED:
        return "cancelled"
    return error.kind.spec.label if error is not None else "internal"


# Lifecycle states -> the phase names of a span.
_PHASES = (
    (State.QUEUED, "queued"),
    (State.PROCESSING, "admitted"),
    (State.GENERATING, "first_token"),
)


class Observer:
    """The pipeline's one call site for metrics and tracing."""

    def __init__(self, metrics: Metrics | None, tracer: Tracer | None) -> None:
        self.metrics = metrics
        self.tracer = tracer
        # Told of each completed request: (admitted ns, ended ns, generated tokens); the
        # registration's queue estimator learns service rates from it.
        self.finished: Callable[[int, int, int], None] | None = None

    def refused(self, protocol: str, route: str, error: NeutrinoError) -> None:
        """A front end refused a request the pipeline never took (a bad key, bad JSON);
        an error the pipeline raised was counted already."""
        if not error.counted and self.metrics is not None:
            error.counted = True
            self.metrics.refused(protocol, route, error.kind.spec.label)

    def begin(
        self,
        obs: Observed,
        model: str,
        operation: str,
        traceparent: str,
        attrs: dict[str, AttrValue],
    ) -> str:
        """Start the request's span, if traced; the traceparent for the engine frame."""
        tracer = self.tracer
        if tracer is None:
            return traceparent
        attrs["gen_ai.operation.name"] = operation
        attrs["gen_ai.request.model"] = model
        attrs["neutrino.protocol"] = obs.protocol
        attrs["neutrino.route"] = obs.route
        span = tracer.begin(f"{operation} {model}", traceparent or None, obs.received, attrs)
        if span is None:
            return traceparent
        obs.span = span
        obs.phases = {}
        return span.traceparent

    def end(
        self,
        obs: Observed,
        model: str,
        lifecycle: Lifecycle,
        error: NeutrinoError | None,
        spent: Spent = NOTHING_SPENT,
        source: Attributed | None = None,
        gaps: Gaps | None = None,
    ) -> None:
        """The request ended: one tally (``gaps``: between its deliveries of tokens), and
        its span's end (with ``source``'s response attributes)."""
        usage = spent[:4]  # prompt, generated, cached and reasoning tokens
        metrics, span, finished = self.metrics, obs.span, self.finished
        if metrics is None and span is None and finished is None:
            return
        times = lifecycle.times
        end = times[lifecycle.state]
        if finished is not None and lifecycle.state is State.COMPLETE:
            admitted = times.get(State.PROCESSING)
            if admitted is not None:
                finished(admitted, end, usage[1])
        if metrics is not None:
            outcome = outcome_of(lifecycle, error)
            metrics.ended(
                obs.protocol, obs.route, model, outcome, times, obs.received, end, usage, gaps
            )
        if span is None:
            return
        phases = obs.phases if obs.phases is not None else {}
        phases["received"] = obs.received
        for state, name in _PHASES:
            t = times.get(state)
            if t is not None:
                phases[name] = t
        phases["ended"] = end
        out = response_attributes(source, spent.finish_reason) if source is not None else {}
        out["gen_ai.usage.input_tokens"] = usage[0]
        out["gen_ai.usage.output_tokens"] = usage[1]
        out["gen_ai.usage.cache_read.input_tokens"] = usage[2]
        out["gen_ai.usage.reasoning.output_tokens"] = usage[3]
        failed = None if error is None else (error.kind.spec.label, error.message)
        span.end(phases, out, failed)
