"""The ``neutrino.v1.Inference`` servicer: requests into the orchestrator, text out.

Streams use the generation's pull API (``wait``/``take``), so every write is awaited
and a slow client holds the stream back instead of growing a buffer in grpc. A call
that ends early (client gone, deadline passed) always reaches ``gen.close``, which
sends the engine its one cancel frame.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc

from neutrino.config import Config
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.grpc import convert
from neutrino.frontends.grpc.stubs import common_pb2, inference_pb2, inference_pb2_grpc
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.orchestrator import Orchestrator
from neutrino.pipeline.request import GenerateRequest

log = logging.getLogger("neutrino.grpc")

T = TypeVar("T")
Context = grpc.aio.ServicerContext[object, object]


def status_code(err: NeutrinoError) -> grpc.StatusCode:
    """The gRPC status of ``err``: its kind's one classification, shared with HTTP."""
    return grpc.StatusCode[err.kind.spec.grpc]


def error_metadata(err: NeutrinoError) -> tuple[tuple[str, str], ...]:
    """Trailing metadata with the OpenAI-style ``code`` and the offending ``param``."""
    md = []
    if err.code:
        md.append(("neutrino-error-code", err.code))
    if err.param:
        md.append(("neutrino-error-param", err.param))
    return tuple(md)


async def _guarded(context: Context, what: str, run: Callable[[], Awaitable[T]]) -> T:
    """Run a handler; errors become statuses with client-safe messages only."""
    try:
        return await run()
    except NeutrinoError as err:
        await context.abort(status_code(err), err.message, error_metadata(err))
    except (asyncio.CancelledError, grpc.aio.AbortError):
        raise
    except Exception:
        log.exception("gRPC %s failed", what)
        internal = NeutrinoError(ErrorKind.INTERNAL, "internal error")
        await context.abort(status_code(internal), internal.message, error_metadata(internal))


def _metadata(context: Context, key: str) -> str:
    for k, v in context.invocation_metadata() or ():
        if k == key and isinstance(v, str):
            return v
    return ""


def _end_reason(context: Context) -> str:
    """Why a call was cancelled under us: its deadline passed, or the client left."""
    remaining = context.time_remaining()
    return "timeout" if remaining is not None and remaining <= 0 else "client disconnected"


class InferenceService(inference_pb2_grpc.InferenceServicer):
    def __init__(
        self, cfg: Config, orchestrator: Orchestrator, started: float | None = None
    ) -> None:
        self.cfg = cfg
        self.orch = orchestrator
        self._created = int(started if started is not None else time.time())

    def _request(
        self, msg: inference_pb2.GenerateRequest, context: Context, *, stream: bool
    ) -> GenerateRequest:
        req = convert.to_request(msg, self.cfg.limits, stream=stream)
        req.traceparent = _metadata(context, "traceparent")
        remaining = context.time_remaining()
        if remaining is not None:
            # The call's deadline is the request's timeout, capped by the server's own.
            req.timeout_s = max(0.001, min(remaining, self.cfg.limits.request_timeout_s))
        return req

    # ---------------------------------------------------------------- Generate

    async def Generate(
        self, request: inference_pb2.GenerateRequest, context: Context
    ) -> inference_pb2.GenerateResponse:
        async def run() -> inference_pb2.GenerateResponse:
            req = self._request(request, context, stream=False)
            gen = await self.orch.start(req)
            reason = "client disconnected"
            try:
                text, outcome = await gen.collect()
            except asyncio.CancelledError:
                reason = _end_reason(context)
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

        return await _guarded(context, "Generate", run)

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
                reason = _end_reason(context)
                raise
            finally:
                gen.close(reason)

        await _guarded(context, "GenerateStream", run)

    async def _pump(self, gen: Generation, context: Context) -> None:
        def chunk(text: str) -> inference_pb2.GenerateStreamResponse:
            return inference_pb2.GenerateStreamResponse(
                id=gen.request_id, model=gen.model, created=gen.created, delta=text
            )

        while True:
            await gen.wait()
            text, _ = gen.take()
            err = gen.error
            if err is not None:
                if text:
                    await context.write(chunk(text))
                raise err
            outcome = gen.outcome
            if outcome is not None:
                last = chunk(text)
                last.finish_reason = convert.finish_reason(outcome)
                last.usage.CopyFrom(convert.usage(outcome))
                stop = convert.stop_reason(outcome)
                if stop is not None:
                    last.stop_reason.CopyFrom(stop)
                await context.write(last)
                return
            if text:
                await context.write(chunk(text))

    # ---------------------------------------------------------------- ListModels

    async def ListModels(
        self, request: common_pb2.ListModelsRequest, context: Context
    ) -> common_pb2.ListModelsResponse:
        async def run() -> common_pb2.ListModelsResponse:
            models = self.orch.engines.models()
            return common_pb2.ListModelsResponse(
                models=[convert.model_card(m, self._created) for m in models.values()]
            )

        return await _guarded(context, "ListModels", run)
