"""The registration record and load report as ``sombrero.v1`` messages, and back."""

from __future__ import annotations

from neutrino.frontends.grpc.codegen import not_generated
from neutrino.registration.record import InstanceRecord, Listener, LoadReport, ServedModel

try:
    from neutrino.v1 import sombrero_pb2 as pb
    from neutrino.v1 import sombrero_pb2_grpc as pb_grpc
except ModuleNotFoundError as exc:  # pragma: no cover - a checkout that skipped `make`
    raise not_generated(exc, "Sombrero") from exc

__all__ = ["pb", "pb_grpc", "record_from_pb", "record_to_pb", "report_from_pb", "report_to_pb"]


def record_to_pb(record: InstanceRecord) -> pb.InstanceRecord:
    return pb.InstanceRecord(
        instance_id=record.instance_id,
        version=record.version,
        listeners=[pb.Listener(protocol=x.protocol, address=x.address) for x in record.listeners],
        models=[
            pb.ServedModel(
                name=m.name, context_length=m.context_length, capabilities=list(m.capabilities)
            )
            for m in record.models
        ],
        capacity=record.capacity,
        workers=record.workers,
        started_at=record.started_at,
    )


def record_from_pb(msg: pb.InstanceRecord) -> InstanceRecord:
    return InstanceRecord(
        instance_id=msg.instance_id,
        version=msg.version,
        listeners=tuple(Listener(x.protocol, x.address) for x in msg.listeners),
        models=tuple(
            ServedModel(m.name, m.context_length, tuple(m.capabilities)) for m in msg.models
        ),
        capacity=msg.capacity,
        workers=msg.workers,
        started_at=msg.started_at,
    )


def report_to_pb(instance_id: str, load: LoadReport, sequence: int) -> pb.LoadReport:
    return pb.LoadReport(
        instance_id=instance_id,
        inflight=load.inflight,
        queue_depth=load.queue_depth,
        tokens_per_s=load.tokens_per_s,
        estimated_wait_s=load.estimated_wait_s,
        capacity=load.capacity,
        sequence=sequence,
    )


def report_from_pb(msg: pb.LoadReport) -> LoadReport:
    return LoadReport(
        inflight=msg.inflight,
        queue_depth=msg.queue_depth,
        tokens_per_s=msg.tokens_per_s,
        estimated_wait_s=msg.estimated_wait_s,
        capacity=msg.capacity,
    )
