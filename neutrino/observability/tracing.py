"""OpenTelemetry tracing: one span per request, its phases as child spans, OTLP/gRPC export.

Nothing here runs per token. :meth:`Tracing.begin` starts a request's span when the request
is received (a few microseconds; ``None`` at once when tracing is off) and
:meth:`RequestSpan.end` ends it once, building the child spans from the phase times the
pipeline recorded (monotonic ns, turned into wall-clock ns here). Spans go to the SDK's
BatchSpanProcessor, whose own thread exports them: ``begin`` and ``end`` never do I/O, and a
collector that is down costs dropped spans, never a waiting request. Shutdown waits at most
``[tracing] shutdown_timeout_s``.

The provider lives inside :class:`Tracing` (no global provider), and every setting the SDK
would otherwise take from ``OTEL_*`` environment variables is passed explicitly.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

import grpc
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
    set_span_in_context,
)

from neutrino import __version__
from neutrino.config import TracingConfig

log = logging.getLogger("neutrino.tracing")

AttrValue: TypeAlias = str | bool | int | float | Sequence[str]

# Attribute names: OpenTelemetry's GenAI semantic conventions (now kept in the
# semantic-conventions-genai repository), then Neutrino's own.
OPERATION: Final = "gen_ai.operation.name"  # "chat", "text_completion", "embeddings"
PROVIDER: Final = "gen_ai.provider.name"
SYSTEM: Final = "gen_ai.system"  # gen_ai.provider.name's older name, for older backends
REQUEST_MODEL: Final = "gen_ai.request.model"
REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
REQUEST_TOP_P: Final = "gen_ai.request.top_p"
REQUEST_TOP_K: Final = "gen_ai.request.top_k"
REQUEST_SEED: Final = "gen_ai.request.seed"
REQUEST_STREAM: Final = "gen_ai.request.stream"
REQUEST_CHOICE_COUNT: Final = "gen_ai.request.choice.count"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_ID: Final = "gen_ai.response.id"
RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
USAGE_CACHED_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
USAGE_REASONING_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
ERROR_TYPE: Final = "error.type"
REQUEST_ID: Final = "neutrino.request_id"
PROTOCOL: Final = "neutrino.protocol"  # "http", "grpc"
ROUTE: Final = "neutrino.route"
ENGINE: Final = "neutrino.engine"

PROVIDER_NAME: Final = "neutrino"

# Phase names RequestSpan.end reads, in the order a request passes them.
PHASES: Final = (
    "received",
    "parsed",
    "templated",
    "tokenized",
    "queued",
    "admitted",
    "first_token",
    "ended",
)

# Child spans of the request's span: (name, from phase, to phase).
_STEPS: Final = (
    ("parse", "received", "parsed"),
    ("template", "parsed", "templated"),
    ("tokenize", "templated", "tokenized"),
    ("queue", "queued", "admitted"),
)
_ENGINE_STEP: Final = ("engine", "admitted", "ended")
# Children of the engine span: time to the first token, then the rest of the generation
# (decoding, and the stream to the client while it lasts).
_ENGINE_STEPS: Final = (
    ("prefill", "admitted", "first_token"),
    ("decode", "first_token", "ended"),
)

# Export: the exporter's own deadline for one batch, retries included; batches leave at
# least every second, and a collector that cannot keep up loses the oldest spans.
_EXPORT_TIMEOUT_S: Final = 3.0
_SCHEDULE_DELAY_MS: Final = 1000
_MAX_QUEUE: Final = 4096  # spans: 512 requests of 8
_MAX_BATCH: Final = 512
# Part of the shutdown wait given to a clean flush before the exporter is stopped outright.
_FLUSH_SHARE: Final = 0.75
# OTLP's retryable gRPC codes.
_RETRYABLE: Final = frozenset(
    {
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
_NO_PARENT: Final = Context()
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


@dataclass(frozen=True, slots=True)
class TraceParent:
    """A valid W3C ``traceparent`` (version 00)."""

    trace_id: int
    span_id: int
    flags: int

    @property
    def sampled(self) -> bool:
        return bool(self.flags & 0x01)


def parse_traceparent(value: str | None) -> TraceParent | None:
    """The header's trace id, parent span id and flags; ``None`` for an absent or invalid
    header (another version, wrong lengths, upper-case or non-hex digits, an all-zero id)."""
    if not value:
        return None
    m = _TRACEPARENT.fullmatch(value.strip())
    if m is None:
        return None
    trace_id, span_id = int(m[1], 16), int(m[2], 16)
    if trace_id == 0 or span_id == 0:
        return None
    return TraceParent(trace_id, span_id, int(m[3], 16))


def span_name(operation: str, model: str) -> str:
    """The request span's name as the GenAI conventions write it."""
    return f"{operation} {model}" if model else operation


def format_traceparent(ctx: SpanContext) -> str:
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


class _NoHeaders(tuple[tuple[str, str], ...]):
    """No export metadata. It is true: the exporter reads OTEL_EXPORTER_OTLP_HEADERS in
    place of a false (empty) value."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return True


def _parent_context(parent: TraceParent | None) -> Context:
    if parent is None:
        return _NO_PARENT
    ctx = SpanContext(parent.trace_id, parent.span_id, True, TraceFlags(parent.flags))
    return set_span_in_context(NonRecordingSpan(ctx), _NO_PARENT)


def _resource(cfg: TracingConfig) -> Resource:
    return Resource(
        {
            "service.name": cfg.service_name,
            "service.version": __version__,
            "service.instance.id": f"{socket.gethostname()}-{os.getpid()}",
        }
    )


def _limits() -> SpanLimits:
    """The SDK's defaults, given explicitly (unset ones come from OTEL_* variables), with
    string attributes capped."""
    return SpanLimits(
        max_attributes=128,
        max_events=128,
        max_links=128,
        max_span_attributes=128,
        max_event_attributes=128,
        max_link_attributes=128,
        max_attribute_length=1024,
        max_span_attribute_length=1024,
    )


def _exporter(cfg: TracingConfig) -> OTLPSpanExporter:
    # An https:// endpoint means TLS whatever `insecure` says (the exporter's rule too);
    # TLS takes the system's roots, not OTEL_EXPORTER_OTLP_CERTIFICATE.
    tls = cfg.endpoint.startswith("https://") or not cfg.insecure
    return OTLPSpanExporter(
        endpoint=cfg.endpoint,
        insecure=not tls,
        credentials=grpc.ssl_channel_credentials() if tls else None,
        headers=_NoHeaders(),
        timeout=_EXPORT_TIMEOUT_S,
        compression=grpc.Compression.NoCompression,
        retryable_error_codes=_RETRYABLE,
        meter_provider=NoOpMeterProvider(),
    )


def _processor(exporter: OTLPSpanExporter) -> BatchSpanProcessor:
    return BatchSpanProcessor(
        exporter,
        max_queue_size=_MAX_QUEUE,
        schedule_delay_millis=_SCHEDULE_DELAY_MS,
        max_export_batch_size=_MAX_BATCH,
        export_timeout_millis=_EXPORT_TIMEOUT_S * 1000,
        meter_provider=NoOpMeterProvider(),
    )


class Tracing:
    """The server's tracer: off (``enabled`` false) when ``[tracing] endpoint`` is empty."""

    def __init__(self, cfg: TracingConfig) -> None:
        self._cfg = cfg
        self._tracer: Tracer | None = None
        self._provider: TracerProvider | None = None
        self._exporter: OTLPSpanExporter | None = None
        self._closing: _Closing | None = None
        if cfg.endpoint:
            self._start(cfg)

    def _start(self, cfg: TracingConfig) -> None:
        provider = TracerProvider(
            sampler=ParentBased(TraceIdRatioBased(cfg.sample_ratio)),
            resource=_resource(cfg),
            shutdown_on_exit=False,  # an exit waits for no collector; shutdown() is bounded
            id_generator=RandomIdGenerator(),
            span_limits=_limits(),
            meter_provider=NoOpMeterProvider(),
        )
        tracer = provider.get_tracer("neutrino", __version__)
        if not isinstance(tracer, SdkTracer):
            # The one setting the SDK takes from the environment whatever it is given.
            log.warning("tracing is off: OTEL_SDK_DISABLED is set, the SDK will not record")
            return
        self._exporter = _exporter(cfg)
        provider.add_span_processor(_processor(self._exporter))
        self._provider = provider
        self._tracer = tracer
        log.info(
            "tracing to %s (sample ratio %g, service %s)",
            cfg.endpoint,
            cfg.sample_ratio,
            cfg.service_name,
        )

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    def begin(
        self,
        name: str,
        traceparent: str | None,
        start_mono_ns: int,
        attributes: Mapping[str, AttrValue],
    ) -> RequestSpan | None:
        """Start a request's span at ``start_mono_ns`` (``time.monotonic_ns()``), as a child
        of a valid incoming ``traceparent`` (whose sampled flag decides), else as a new
        trace sampled at ``sample_ratio``. ``None`` when tracing is off."""
        tracer = self._tracer
        if tracer is None:
            return None
        offset = time.time_ns() - time.monotonic_ns()
        attrs: dict[str, AttrValue] = {PROVIDER: PROVIDER_NAME, SYSTEM: PROVIDER_NAME}
        attrs.update(attributes)
        span = tracer.start_span(
            name,
            context=_parent_context(parse_traceparent(traceparent)),
            kind=SpanKind.SERVER,
            attributes=attrs,
            start_time=start_mono_ns + offset,
        )
        return RequestSpan(self, tracer, span, start_mono_ns, offset)

    def _close(self) -> _Closing | None:
        if self._closing is None and self._provider is not None and self._exporter is not None:
            self._tracer = None
            timeout = self._cfg.shutdown_timeout_s
            self._closing = _Closing(self._provider, self._exporter, timeout)
        return self._closing

    async def shutdown(self) -> None:
        """Export what is left and stop the exporter, within ``shutdown_timeout_s``."""
        closing = self._close()
        if closing is not None:
            await closing.wait()

    def shutdown_sync(self) -> None:
        """:meth:`shutdown` for a caller without an event loop (blocks, as long at most)."""
        closing = self._close()
        if closing is not None:
            closing.wait_sync()


class RequestSpan:
    """One request's span, from :meth:`Tracing.begin` to its one :meth:`end`."""

    __slots__ = ("_ended", "_offset", "_owner", "_span", "_start_mono", "_tracer", "traceparent")

    def __init__(
        self, owner: Tracing, tracer: Tracer, span: Span, start_mono_ns: int, offset: int
    ) -> None:
        self._owner = owner
        self._tracer = tracer
        self._span = span
        self._start_mono = start_mono_ns
        self._offset = offset  # wall ns - monotonic ns, taken once per request
        self._ended = False
        # For the engine frame: the engine's spans become children of this span.
        self.traceparent = format_traceparent(span.get_span_context())

    def end(
        self,
        phases: Mapping[str, int],
        attributes: Mapping[str, AttrValue],
        error: tuple[str, str] | None = None,
    ) -> None:
        """End the span at phase ``ended`` (else now) with its children, from the phases
        present (monotonic ns); ``error`` is (kind, message). A second call does nothing."""
        if self._ended:
            return
        self._ended = True
        span = self._span
        if not span.is_recording() or not self._owner.enabled:
            return  # not sampled, or the exporter is shutting down
        if attributes:
            span.set_attributes(attributes)
        if error is not None:
            span.set_attribute(ERROR_TYPE, error[0])
            span.set_status(Status(StatusCode.ERROR, error[1]))
        ended = phases.get("ended")
        end_ns = ended + self._offset if ended is not None else time.time_ns()
        self._children(phases, end_ns)
        span.end(end_time=end_ns)

    def _children(self, phases: Mapping[str, int], end_ns: int) -> None:
        times = dict(phases)
        times.setdefault("received", self._start_mono)
        bounds = (self._start_mono + self._offset, end_ns)
        parent = set_span_in_context(self._span, _NO_PARENT)
        for step in _STEPS:
            self._child(parent, step, times, bounds)
        engine = self._child(parent, _ENGINE_STEP, times, bounds)
        if engine is not None:
            inner = set_span_in_context(engine, _NO_PARENT)
            for step in _ENGINE_STEPS:
                self._child(inner, step, times, bounds)

    def _child(
        self,
        parent: Context,
        step: tuple[str, str, str],
        times: Mapping[str, int],
        bounds: tuple[int, int],
    ) -> Span | None:
        """The span for one phase interval, kept inside ``bounds``; none where an end is
        missing (a request that failed early) or the interval runs backwards."""
        name, a, b = step
        start, stop = times.get(a), times.get(b)
        if start is None or stop is None or stop < start:
            return None
        lo = max(start + self._offset, bounds[0])
        hi = min(stop + self._offset, bounds[1])
        if hi < lo:
            return None
        span = self._tracer.start_span(name, context=parent, start_time=lo)
        span.end(end_time=hi)
        return span


class _Closing:
    """The provider's shutdown (its last export included) on a thread of its own, waited
    for at most ``timeout_s``: past most of it, the exporter is stopped, which ends its
    retry waits and closes its channel; past all of it, the thread is left behind."""

    def __init__(
        self, provider: TracerProvider, exporter: OTLPSpanExporter, timeout_s: float
    ) -> None:
        now = time.monotonic()
        self._flush_until = now + timeout_s * _FLUSH_SHARE
        self._until = now + timeout_s
        self._exporter = exporter
        self._stopped = False
        self._thread = threading.Thread(
            target=provider.shutdown, name="neutrino-tracing-shutdown", daemon=True
        )
        self._thread.start()

    def _stop_exporter(self) -> None:
        if self._thread.is_alive() and not self._stopped:
            self._stopped = True
            log.warning("tracing: the collector did not take the last spans in time")
            self._exporter.shutdown()

    def wait_sync(self) -> None:
        self._thread.join(max(0.0, self._flush_until - time.monotonic()))
        self._stop_exporter()
        self._thread.join(max(0.0, self._until - time.monotonic()))

    async def wait(self) -> None:
        await self._poll(self._flush_until)
        self._stop_exporter()
        await self._poll(self._until)

    async def _poll(self, until: float) -> None:
        while self._thread.is_alive() and time.monotonic() < until:
            await asyncio.sleep(0.01)
