"""The ``neutrino.v1.Inference`` servicer: requests into the orchestrator, answers out.

A request is converted (``convert``: through the HTTP routes' parser) into the
pipeline's request, its ``n`` choices run as over HTTP, and the outcomes are rendered
(``render``); streams are written by ``stream.pump``, every write awaited. A call that
ends early (client gone, deadline passed) always reaches ``gen.close`` for each choice,
which sends the engine its one cancel frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

from neutrino.config.keys import MAX_PRIORITY
from neutrino.errors import NeutrinoError, bad_request
from neutrino.frontends.common import (
    PRIORITY_HEADER,
    SCHEMA_OFFLOAD_BYTES,
    asked_priority,
    off_loop,
)
from neutrino.frontends.grpc import convert, render
from neutrino.frontends.grpc.calls import (
    Context,
    Service,
    caller,
    closed_at_end,
    error_metadata,
    guarded,
    metadata,
    refusals,
    status_code,
    timeout_s,
)
from neutrino.frontends.grpc.stream import pump
from neutrino.frontends.grpc.stubs import common_pb2, inference_pb2, inference_pb2_grpc
from neutrino.observability.logs import bind_request_id
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.orchestrator import Orchestrator
from neutrino.pipeline.pull import collect
from neutrino.pipeline.request import GenerateRequest, Origin

__all__ = ["InferenceService", "error_metadata", "status_code"]


def _refusals(
    orch: Orchestrator, msg: inference_pb2.GenerateRequest
) -> Callable[[NeutrinoError], None]:
    return refusals(orch, "chat" if msg.WhichOneof("input") == "chat" else "completion")


class InferenceService(Service, inference_pb2_grpc.InferenceServicer):
    def __init__(self, orchestrator: Orchestrator, started: float | None = None) -> None:
        super().__init__(orchestrator)
        self._created = int(started if started is not None else time.time())

    async def _request(
        self, msg: inference_pb2.GenerateRequest, context: Context, *, stream: bool
    ) -> GenerateRequest:
        received = time.monotonic_ns()
        principal = caller(context, self.orch.keys)  # first: nothing is done for a refusal
        limits = self.cfg.limits
        size = msg.ByteSize()
        schema = msg.HasField("structured_outputs") or msg.chat.HasField("response_format")
        if size > limits.offload_bytes or (schema and size > SCHEMA_OFFLOAD_BYTES):  # off loop
            req = await off_loop(lambda: convert.to_request(msg, limits, stream=stream))
        else:
            req = convert.to_request(msg, limits, stream=stream)
        traceparent = metadata(context, "traceparent")
        timeout = timeout_s(context, self.cfg)
        asked = msg.priority if msg.HasField("priority") else -1
        if asked == -1:
            asked = asked_priority(metadata(context, PRIORITY_HEADER))
        elif not 0 <= asked <= MAX_PRIORITY:
            raise bad_request(f"priority must be 0 to {MAX_PRIORITY}, got {asked}", "priority")
        origin = Origin(principal, "grpc", "", received, traceparent, timeout, asked)
        req = req.replace(origin=origin)
        bind_request_id(req.request_id)  # every log line of this call's task names it
        return req

    @contextlib.asynccontextmanager
    async def _running(
        self, req: GenerateRequest, context: Context
    ) -> AsyncIterator[list[Generation]]:
        """Every choice of ``req`` started (``n``, as over HTTP), and closed at the end:
        one engine cancel for each still running when the call goes away."""
        gens: list[Generation] = []
        async with closed_at_end(context, gens):
            yield await self.orch.start_all(req, gens)

    # ---------------------------------------------------------------- Generate

    async def Generate(
        self, request: inference_pb2.GenerateRequest, context: Context
    ) -> inference_pb2.GenerateResponse | bytes | None:
        async def run() -> inference_pb2.GenerateResponse | bytes:
            req = await self._request(request, context, stream=False)
            async with self._running(req, context) as gens:
                results = [await collect(gen) for gen in gens]
            pieces = render.response_pieces(gens, results)
            if pieces is None:
                return render.response(gens, results)
            parts = []  # large logprobs: serialised a slice per turn of the event loop
            for piece in pieces:
                parts.append(piece)
                await asyncio.sleep(0)
            # Joined on a worker thread: bytes.join lets go of the interpreter while it
            # copies megabytes (~12 ms for 18 MB, on fresh pages).
            return await asyncio.to_thread(b"".join, parts)  # passed through: register.py

        return await guarded(context, "Generate", run, _refusals(self.orch, request))

    # ---------------------------------------------------------------- GenerateStream

    async def GenerateStream(
        self, request: inference_pb2.GenerateRequest, context: Context
    ) -> None:
        async def run() -> None:
            req = await self._request(request, context, stream=True)
            async with self._running(req, context) as gens:
                await pump(context, gens, self.cfg.limits.send_timeout_s)

        await guarded(context, "GenerateStream", run, _refusals(self.orch, request))

    # ---------------------------------------------------------------- ListModels

    async def ListModels(
        self, request: common_pb2.ListModelsRequest, context: Context
    ) -> common_pb2.ListModelsResponse | None:
        async def run() -> common_pb2.ListModelsResponse:
            principal = caller(context, self.orch.keys)
            models = self.orch.engines.models()
            return common_pb2.ListModelsResponse(
                models=[
                    render.model_card(m, self._created)
                    for m in models.values()
                    if principal is None or principal.allows(m.name)
                ]
            )

        return await guarded(context, "ListModels", run)
