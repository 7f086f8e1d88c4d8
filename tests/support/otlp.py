"""A real OTLP/gRPC trace receiver for tests: a gRPC server on a free local port that keeps
every span it is sent, flattened, and the metadata of every export call.

    with OtlpReceiver() as receiver:
        ... # point [tracing] endpoint at receiver.endpoint
        spans = receiver.wait_for(8, timeout=10)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1 import trace_pb2


@dataclass(frozen=True, slots=True)
class ReceivedSpan:
    name: str
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_span_id: str  # "" for a root span
    kind: str  # SERVER, INTERNAL, CLIENT, ...
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status: str  # UNSET, OK, ERROR
    status_message: str
    resource: dict[str, Any]
    scope: str


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return _attributes(v.kvlist_value.values)
    return None if which is None else getattr(v, which)


def _attributes(kvs: Iterable[KeyValue]) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


def _flatten(request: trace_service_pb2.ExportTraceServiceRequest) -> list[ReceivedSpan]:
    out = []
    for rs in request.resource_spans:
        resource = _attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(
                    ReceivedSpan(
                        name=s.name,
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex(),
                        kind=trace_pb2.Span.SpanKind.Name(s.kind).removeprefix("SPAN_KIND_"),
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                        attributes=_attributes(s.attributes),
                        status=trace_pb2.Status.StatusCode.Name(s.status.code).removeprefix(
                            "STATUS_CODE_"
                        ),
                        status_message=s.status.message,
                        resource=resource,
                        scope=ss.scope.name,
                    )
                )
    return out


class _Service(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    def Export(
        self,
        request: trace_service_pb2.ExportTraceServiceRequest,
        context: grpc.ServicerContext,
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self._receiver._add(_flatten(request), dict(context.invocation_metadata()))
        return trace_service_pb2.ExportTraceServiceResponse()


class OtlpReceiver:
    """An OTLP/gRPC trace collector on 127.0.0.1 (a free port unless ``port`` is given)."""

    def __init__(self, port: int = 0) -> None:
        self._lock = threading.Condition()
        self._spans: list[ReceivedSpan] = []
        self.metadata: list[dict[str, Any]] = []  # one entry per export call
        self._server = grpc.server(ThreadPoolExecutor(max_workers=4))
        add = trace_service_pb2_grpc.add_TraceServiceServicer_to_server
        add(_Service(self), self._server)  # type: ignore[no-untyped-call]
        self.port = self._server.add_insecure_port(f"127.0.0.1:{port}")
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def start(self) -> OtlpReceiver:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(grace=None).wait(5)

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _add(self, spans: list[ReceivedSpan], metadata: dict[str, Any]) -> None:
        with self._lock:
            self._spans.extend(spans)
            self.metadata.append(metadata)
            self._lock.notify_all()

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def wait_for(self, n: int, timeout: float = 10.0) -> list[ReceivedSpan]:
        """The spans received once there are at least ``n``; AssertionError after
        ``timeout`` seconds with fewer."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self._spans) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    names = [s.name for s in self._spans]
                    raise AssertionError(f"{len(names)} spans received of {n}: {names}")
                self._lock.wait(left)
            return list(self._spans)
