"""mock_sombrero's registry, its gRPC service and its HTTP page.

The registry is a dict of ``sombrero.v1.RegistryEntry`` keyed by instance id, in memory
only (a restart forgets every instance, as a real balancer's restart may). Every change is
an event: one JSON line in the events file, if any. The service can be told to fail:
the next N calls of a method (register, report, deregister) end with UNAVAILABLE.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import AsyncIterator
from typing import IO, Any

import grpc
import grpc.aio
from aiohttp import web
from google.protobuf.json_format import MessageToDict

from neutrino.registration.wire import pb, pb_grpc

__all__ = ["FAILABLE", "EventLog", "Registry", "SombreroService", "http_app"]

log = logging.getLogger("mock_sombrero")

Context = grpc.aio.ServicerContext[Any, Any]
FAILABLE = ("register", "report", "deregister")


class EventLog:
    """One JSON object per line (``event``, ``t`` and the event's fields), flushed as it
    happens; does nothing without a path."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self._file: IO[str] | None = (
            open(path, "a", encoding="utf-8") if path is not None else None  # noqa: SIM115
        )

    def emit(self, event: str, **fields: Any) -> None:
        if self._file is not None:
            record = {"event": event, **fields, "t": time.time()}
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _as_dict(msg: Any) -> dict[str, Any]:
    found: dict[str, Any] = MessageToDict(
        msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return found


class Registry:
    """The balancer's view: instance id -> RegistryEntry."""

    def __init__(self, events: EventLog) -> None:
        self.events = events
        self.entries: dict[str, Any] = {}  # instance_id -> pb.RegistryEntry
        self.failing = dict.fromkeys(FAILABLE, 0)  # method -> calls left to fail

    def fail_next(self, method: str) -> bool:
        """Whether this call of ``method`` is one told to fail (and counts it)."""
        if self.failing[method] <= 0:
            return False
        self.failing[method] -= 1
        self.events.emit("fail", method=method)
        return True

    def register(self, record: Any) -> bool:
        now = time.time()
        replaced = record.instance_id in self.entries
        entry = pb.RegistryEntry(last_seen=now, registered_at=now)
        entry.record.CopyFrom(record)
        self.entries[record.instance_id] = entry
        self.events.emit(
            "register",
            instance_id=record.instance_id,
            replaced=replaced,
            record=_as_dict(record),
        )
        return replaced

    def report(self, report: Any) -> bool:
        """Keeps the report; False for an instance not registered."""
        entry = self.entries.get(report.instance_id)
        fields = _as_dict(report)
        self.events.emit("report", known=entry is not None, **fields)
        if entry is None:
            return False
        entry.last_report.CopyFrom(report)
        entry.last_seen = time.time()
        return True

    def deregister(self, instance_id: str, reason: str) -> bool:
        found = self.entries.pop(instance_id, None) is not None
        self.events.emit("deregister", instance_id=instance_id, found=found, reason=reason)
        return found

    def forget(self, instance_id: str) -> bool:
        """Drop an instance without its asking (an operator, or lost state)."""
        found = self.entries.pop(instance_id, None) is not None
        self.events.emit("forget", instance_id=instance_id, found=found)
        return found

    def listing(self, model: str = "") -> list[Any]:
        return [
            self.entries[key]
            for key in sorted(self.entries)
            if not model or any(m.name == model for m in self.entries[key].record.models)
        ]

    def page(self) -> dict[str, Any]:
        return {"instances": [_as_dict(entry) for entry in self.listing()]}


class SombreroService(pb_grpc.SombreroServicer):
    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    async def Register(self, request: Any, context: Context) -> Any:
        if self.registry.fail_next("register"):
            await context.abort(grpc.StatusCode.UNAVAILABLE, "mock_sombrero: told to fail")
        if not request.record.instance_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "record.instance_id is empty")
        return pb.RegisterResponse(replaced=self.registry.register(request.record))

    async def Report(self, request_iterator: AsyncIterator[Any], context: Context) -> Any:
        accepted = 0
        async for report in request_iterator:
            if self.registry.fail_next("report"):
                await context.abort(grpc.StatusCode.UNAVAILABLE, "mock_sombrero: told to fail")
            if not self.registry.report(report):
                return pb.ReportAck(status=pb.ReportAck.UNKNOWN_INSTANCE, accepted=accepted)
            accepted += 1
        return pb.ReportAck(status=pb.ReportAck.OK, accepted=accepted)

    async def Deregister(self, request: Any, context: Context) -> Any:
        if self.registry.fail_next("deregister"):
            await context.abort(grpc.StatusCode.UNAVAILABLE, "mock_sombrero: told to fail")
        found = self.registry.deregister(request.instance_id, request.reason)
        return pb.DeregisterResponse(found=found)

    async def List(self, request: Any, context: Context) -> Any:
        return pb.ListResponse(instances=self.registry.listing(request.model))


def http_app(registry: Registry) -> web.Application:
    """``GET /`` and ``/instances``: the registry as JSON. ``POST /fail?count=N[&method=M]``:
    the next N calls of M (register by default; report, deregister) fail with UNAVAILABLE.
    ``POST /forget?instance_id=ID``: drop an instance (its next report hears
    UNKNOWN_INSTANCE)."""

    async def page(request: web.Request) -> web.Response:
        return web.json_response(registry.page())

    async def fail(request: web.Request) -> web.Response:
        method = request.query.get("method", "register")
        try:
            count = int(request.query.get("count", "1"))
        except ValueError:
            count = -1
        if method not in FAILABLE or count < 0:
            raise web.HTTPBadRequest(text=f"need count >= 0 and method in {FAILABLE}")
        registry.failing[method] = count
        return web.json_response({"failing": registry.failing})

    async def forget(request: web.Request) -> web.Response:
        found = registry.forget(request.query.get("instance_id", ""))
        return web.json_response({"found": found})

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/instances", page)
    app.router.add_post("/fail", fail)
    app.router.add_post("/forget", forget)
    return app
