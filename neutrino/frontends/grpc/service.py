"""The ``neutrino.v1.Inference`` servicer: requests into the orchestrator, text out.

Streams use the generation's pull API (``wait``/``take``), so every write is awaited
and a slow client holds the stream back instead of growing a buffer in grpc. A call
that ends early (client gone, deadline passed) always reaches ``gen.close``, which
sends the engine its one cancel frame.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from neutrino.config import Config
from neutrino.errors import ClientTooSlow, NeutrinoError
from neutrino.frontends.grpc import convert
from neutrino.frontends.grpc.calls import (
    Context,
    caller,
    end_reason,
    error_metadata,
    guarded,
    metadata,
    refusals,
    send,
    status_code,
    timeout_s,
)
from neutrino.frontends.grpc.stubs import common_pb2, inference_pb2, inference_pb2_grpc
from neutrino.observability.logs import bind_request_id
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.orchestrator import Orchestrator
from neutrino.pipeline.pull import Pull, collect
from neutrino.pipeline.request import GenerateRequest

__all__ = ["InferenceService", "error_metadata", "status_code"]


def _refusals(
    orch: Orchestrator, msg: inference_pb2.GenerateRequest
) -> Callable[[NeutrinoError], None]:
    return refusals(orch, "chat" if msg.WhichOneof("input") == "chat" else "completion")


class InferenceService(inference_pb2_grpc.InferenceServicer):
    @property
    def cfg(self) -> Config:
        """The running configuration (the orchestrator's: a reload swaps it)."""
        return self.orch.cfg

    def __init__(
        self, cfg: Config, orchestrator: Orchestrator, started: float | None = None
    ) -> None:
        self.orch = orchestrator
        self._created = int(started if started is not None else time.time())

    def _request(
        self, msg: inference_pb2.GenerateRequest, context: Context, *, stream: bool
    ) -> GenerateRequest:
        received = time.monotonic_ns()
        principal = caller(context, self.orch.keys)  # first: nothing is done for a refusal
        req = convert.to_request(msg, self.cfg.limits, stream=stream)
        req.principal = principal
        req.traceparent = metadata(context, "traceparent")
        req.protocol = "grpc"
        req.received_ns = received
        bind_request_id(req.request_id)  # every log line of this call's task names it
        timeout = timeout_s(context, self.cfg)
        if timeout is not None:
            req.timeout_s = timeout
        return req

    # ---------------------------------------------------------------- Generate

    async def Generate(
        self, request: inference_pb2.GenerateRequest, context: Context
    ) -> inference_pb2.GenerateResponse | None:
        async def run() -> inference_pb2.GenerateResponse:
            req = self._request(request, context, stream=False)
            gen = await self.orch.start(req)
            reason = "client disconnected"
            try:
                text, outcome = await collect(gen)
            except asyncio.CancelledError:
                reason = end_reason(context)
                raise
            finally:
                gen.close(reason)
            return inference_pb2.GenerateResponse(
                id=gen.request_id,
                model=gen.model,
                created=gen.created,
                text=text,
                finish_reason=convert.finish_reason(outcome),
                usage=convert.usage(outcome),
                stop_reason=convert.stop_reason(outcome),
            )

        return await guarded(context, "Generate", run, _refusals(self.orch, request))

    # ---------------------------------------------------------------- GenerateStream

    async def GenerateStream(
        self, request: inference_pb2.GenerateRequest, context: Context
    ) -> None:
        async def run() -> None:
            req = self._request(request, context, stream=True)
            gen = await self.orch.start(req)
            reason = "client disconnected"
            try:
                await self._pump(gen, context)
            except asyncio.CancelledError:
                reason = end_reason(context)
                raise
            except ClientTooSlow:
                reason = "client too slow"
                raise
            finally:
                gen.close(reason)

        await guarded(context, "GenerateStream", run, _refusals(self.orch, request))

    async def _pump(self, gen: Generation, context: Context) -> None:
        def chunk(text: str) -> inference_pb2.GenerateStreamResponse:
            return inference_pb2.GenerateStreamResponse(
                id=gen.request_id, model=gen.model, created=gen.created, delta=text
            )

        limit = self.cfg.limits.send_timeout_s
        pull = Pull(gen)
        while True:
            await pull.wait()
            text, _ = pull.take()
            if not pull.ended:
                if text:
                    await send(context, chunk(text), limit)
                continue
            err = gen.error
            if err is not None:
                if text:
                    await send(context, chunk(text), limit)
                raise err.fresh()
            outcome = gen.outcome
            if outcome is not None:
                last = chunk(text)
                last.finish_reason = convert.finish_reason(outcome)
                last.usage.CopyFrom(convert.usage(outcome))
                stop = convert.stop_reason(outcome)
                if stop is not None:
                    last.stop_reason.CopyFrom(stop)
                await send(context, last, limit)
                return

    # ---------------------------------------------------------------- ListModels

    async def ListModels(
        self, request: common_pb2.ListModelsRequest, context: Context
    ) -> common_pb2.ListModelsResponse | None:
        async def run() -> common_pb2.ListModelsResponse:
            principal = caller(context, self.orch.keys)
            models = self.orch.engines.models()
            return common_pb2.ListModelsResponse(
                models=[
                    convert.model_card(m, self._created)
                    for m in models.values()
                    if principal is None or principal.allows(m.name)
                ]
            )

        return await guarded(context, "ListModels", run)
