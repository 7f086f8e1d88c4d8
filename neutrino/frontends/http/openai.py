"""OpenAI-compatible generation endpoints: chat completions and completions."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import orjson
from aiohttp import web

from neutrino.config import Config
from neutrino.errors import NeutrinoError
from neutrino.frontends.common import client_request_id, request_id_for
from neutrino.frontends.http.exchange import (
    GONE,
    AiohttpExchange,
    Exchange,
    check_json_type,
    parse_json,
)
from neutrino.frontends.http.guard import guarded
from neutrino.frontends.http.parse import parse_chat, parse_completion
from neutrino.frontends.http.render import ChunkEncoder, chat_response, completion_response
from neutrino.frontends.http.sse import ChoiceWriter, SlowClient, SSEStream
from neutrino.observability.logs import bind_request_id
from neutrino.pipeline.generation import Generation, Outcome
from neutrino.pipeline.orchestrator import Orchestrator
from neutrino.pipeline.pull import collect
from neutrino.pipeline.request import GenerateRequest

log = logging.getLogger("neutrino.http")


Parse = Callable[[Any, Any], GenerateRequest]
_PREFIXES = {"chat": "chatcmpl", "completion": "cmpl"}
Render = Callable[[list[Generation], list[tuple[str, Outcome]], str], dict[str, Any]]


class OpenAIRoutes:
    @property
    def cfg(self) -> Config:
        """The running configuration (the orchestrator's: a reload swaps it)."""
        return self.orch.cfg

    def __init__(self, cfg: Config, orchestrator: Orchestrator) -> None:
        self.orch = orchestrator
        self._keepalive = cfg.http.sse_keepalive_s

    def register(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", guarded(self.chat))
        app.router.add_post("/v1/completions", guarded(self.completions))

    def fast_routes(self) -> dict[bytes, Callable[[Any], Awaitable[None]]]:
        """The same routes for the lean HTTP/1.1 server (path -> handler of an Exchange)."""

        async def chat(ex: Exchange) -> None:
            await self.serve(ex, parse_chat, chat_response, "chat")

        async def completions(ex: Exchange) -> None:
            await self.serve(ex, parse_completion, completion_response, "completion")

        return {b"/v1/chat/completions": chat, b"/v1/completions": completions}

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._aiohttp(request, parse_chat, chat_response, "chat")

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._aiohttp(request, parse_completion, completion_response, "completion")

    async def _aiohttp(
        self, request: web.Request, parse: Parse, render: Render, route: str
    ) -> web.StreamResponse:
        ex = AiohttpExchange(request, self.cfg.limits.send_timeout_s)
        await self.serve(ex, parse, render, route)
        assert ex.response is not None
        return ex.response

    async def serve(self, ex: Exchange, parse: Parse, render: Render, route: str) -> None:
        """Answer one generation request on ``ex``, streamed or not."""
        received = time.monotonic_ns()
        client_id = ex.request_id = client_request_id(ex.header("x-request-id"))
        try:
            principal = self.orch.keys.authenticate(
                ex.header("authorization"), ex.header("x-api-key")
            )
            check_json_type(ex.header("content-type"))
            cfg = self.cfg
            req = parse(parse_json(await ex.read(cfg.limits.max_body_bytes)), cfg.limits)
            if client_id:
                req.request_id = request_id_for(_PREFIXES[req.kind], client_id)
            else:
                ex.request_id = req.request_id
            bind_request_id(req.request_id)  # every log line of this task names it
            log.debug("%s request for %s (stream: %s)", route, req.model, req.stream)
            req.principal = principal
            req.traceparent = ex.header("traceparent")
            req.received_ns = received
            if req.stream:
                await self._stream(ex, req)
                return
            gens: list[Generation] = []
            results: list[tuple[str, Outcome]] = []
            try:
                for choice in _choices(req):
                    gens.append(await self.orch.start(choice))
                for gen in gens:
                    results.append(await collect(gen))
            finally:
                for gen in gens:
                    gen.close()
            ex.reply(200, orjson.dumps(render(gens, results, cfg.http.reasoning_field)))
        except NeutrinoError as err:
            self.orch.observe.refused("http", route, err)
            ex.fail(err)

    async def _stream(self, ex: Exchange, req: GenerateRequest) -> None:
        stream: SSEStream | None = None

        async def open_stream() -> SSEStream:
            nonlocal stream
            if stream is None:
                stream = SSEStream(
                    await ex.open_stream(),
                    req.n,
                    self.cfg.limits.stream_buffer_bytes,
                    req.request_id,
                    self.orch.counters,
                )
                # One keepalive for the response, from now: queued, then generating.
                stream.keep_alive(self._keepalive)
            return stream

        async def on_queued() -> None:
            await open_stream()

        gens: list[Generation] = []
        reason = "client disconnected"
        try:
            try:
                for choice in _choices(req):
                    gens.append(await self.orch.start(choice, on_queued=on_queued))
            except NeutrinoError as err:
                if stream is None:
                    raise
                stream.fail(err)
                await stream.end()
                return
            reason = await self._push(await open_stream(), gens, req) or reason
        except SlowClient:
            reason = "client too slow"  # it read nothing for send_timeout_s: reset
        except GONE:
            pass  # the client left; close() below cancels the engine requests
        finally:
            if stream is not None:
                # Why the client was lost, as the stream saw it (a reset slow reader's
                # handler may be cancelled before it reads the answer).
                if stream.gone is not None and reason == "client disconnected":
                    reason = stream.gone
                stream.stop()  # its keepalive timer and writer end with the response
            for gen in gens:
                gen.close(reason)

    async def _push(
        self, stream: SSEStream, gens: list[Generation], req: GenerateRequest
    ) -> str | None:
        """Stream every choice in push mode; returns why the client was lost, or None."""
        encs = [ChunkEncoder(g, req.kind, req.include_usage, i) for i, g in enumerate(gens)]
        for gen, enc in zip(gens, encs, strict=True):
            first = enc.first()
            if first:
                stream.write(first)
            if gen.echo:
                stream.write(enc.text(gen.echo))
        for i, (gen, enc) in enumerate(zip(gens, encs, strict=True)):
            gen.push_to(ChoiceWriter(stream, enc, i, self.cfg.http.reasoning_field))
        await stream.done
        await stream.end()
        return stream.gone


def _choices(req: GenerateRequest) -> list[GenerateRequest]:
    """One request per choice (``n``); a seed moves on by one per choice so they differ."""
    if req.n == 1:
        return [req]
    return [
        replace(req, seed=None if req.seed is None else (req.seed + i) % (1 << 64))
        for i in range(req.n)
    ]
