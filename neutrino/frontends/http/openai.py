"""OpenAI-compatible generation endpoints: chat completions and completions."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson
from aiohttp import web

from neutrino.config import Config
from neutrino.errors import ErrorKind, NeutrinoError, bad_request
from neutrino.frontends.http.guard import error_response, guarded
from neutrino.frontends.http.parse import parse_chat, parse_completion
from neutrino.frontends.http.render import (
    SSE_DONE,
    SSE_KEEPALIVE,
    SSE_OPEN,
    ChunkEncoder,
    chat_response,
    completion_response,
    sse_error,
)
from neutrino.frontends.http.sse import ChoiceWriter, SSEStream
from neutrino.pipeline.generation import Generation, Outcome
from neutrino.pipeline.orchestrator import Orchestrator
from neutrino.pipeline.request import GenerateRequest

log = logging.getLogger("neutrino.http")

_SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}
_JSON = "application/json"

# What aiohttp raises when the client went away while we were writing.
_GONE = ConnectionError


_JSON_HEADERS = {"Content-Type": "application/json"}


def json_response(payload: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(payload), status=status, headers=_JSON_HEADERS)


async def read_json(request: web.Request, max_bytes: int) -> Any:
    length = request.content_length
    if length is not None and length > max_bytes:
        raise NeutrinoError(
            ErrorKind.PAYLOAD_TOO_LARGE, f"the request body exceeds {max_bytes} bytes"
        )
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise NeutrinoError(
            ErrorKind.PAYLOAD_TOO_LARGE, f"the request body exceeds {max_bytes} bytes"
        ) from None
    if not raw:
        raise bad_request("the request body is empty; send a JSON object")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise bad_request("the request body is not valid JSON") from None


class OpenAIRoutes:
    def __init__(self, cfg: Config, orchestrator: Orchestrator) -> None:
        self.cfg = cfg
        self.orch = orchestrator
        self._keepalive = cfg.http.sse_keepalive_s

    def register(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", guarded(self.chat))
        app.router.add_post("/v1/completions", guarded(self.completions))

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, parse_chat, chat_response)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, parse_completion, completion_response)

    async def _handle(
        self,
        request: web.Request,
        parse: Callable[[Any, Any], GenerateRequest],
        render: Callable[[list[Generation], list[tuple[str, Outcome]], str], dict[str, Any]],
    ) -> web.StreamResponse:
        try:
            body = await read_json(request, self.cfg.limits.max_body_bytes)
            req = parse(body, self.cfg.limits)
            req.traceparent = request.headers.get("traceparent", "")
            if req.stream:
                return await self._stream(request, req)
            gens: list[Generation] = []
            results: list[tuple[str, Outcome]] = []
            try:
                for choice in _choices(req):
                    gens.append(await self.orch.start(choice))
                for gen in gens:
                    results.append(await gen.collect())
            finally:
                for gen in gens:
                    gen.close()
            return json_response(render(gens, results, self.cfg.http.reasoning_field))
        except NeutrinoError as err:
            return error_response(err)

    async def _open(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers=_SSE_HEADERS)
        await resp.prepare(request)
        await resp.write(SSE_OPEN)
        return resp

    async def _stream(self, request: web.Request, req: GenerateRequest) -> web.StreamResponse:
        resp: web.StreamResponse | None = None

        async def on_queued() -> None:
            nonlocal resp
            if resp is None:
                resp = await self._open(request)

        gens: list[Generation] = []
        reason = "client disconnected"
        try:
            try:
                for choice in _choices(req):
                    gens.append(await self.orch.start(choice, on_queued=on_queued))
            except NeutrinoError as err:
                if resp is None:
                    raise
                with contextlib.suppress(_GONE):
                    await resp.write(sse_error(err) + SSE_DONE)
                return resp
            if resp is None:
                resp = await self._open(request)
            encs = [ChunkEncoder(g, req.kind, req.include_usage, i) for i, g in enumerate(gens)]
            transport = request.transport
            if transport is not None and resp.headers.get("Transfer-Encoding") == "chunked":
                gone = await self._push(transport, gens, encs)
                if gone is None:
                    await resp.write_eof()
                else:
                    reason = gone
            else:  # HTTP/1.0: aiohttp frames the body; write through it, choice by choice
                await self._pump(resp, gens, encs)
        except _GONE:
            pass  # the client left; close() below cancels the engine requests
        finally:
            for gen in gens:
                gen.close(reason)
        assert resp is not None
        return resp

    async def _push(
        self, transport: asyncio.Transport, gens: list[Generation], encs: list[ChunkEncoder]
    ) -> str | None:
        """Stream in push mode; returns why the client was lost, or None."""
        stream = SSEStream(transport, len(gens), self.cfg.limits.stream_buffer_bytes)
        for gen, enc in zip(gens, encs, strict=True):
            first = enc.first()
            if first:
                stream.write(first)
            if gen.echo:
                stream.write(enc.text(gen.echo))
        gens[0].start_keepalive(self._keepalive)
        for i, (gen, enc) in enumerate(zip(gens, encs, strict=True)):
            gen.push_to(ChoiceWriter(stream, enc, i, self.cfg.http.reasoning_field))
        await stream.done
        return stream.gone

    async def _pump(
        self, resp: web.StreamResponse, gens: list[Generation], encs: list[ChunkEncoder]
    ) -> None:
        outcomes: list[Outcome] = []
        for gen, enc in zip(gens, encs, strict=True):
            first = enc.first()
            if first:
                await resp.write(first)
            if gen.echo:
                await resp.write(enc.text(gen.echo))
            gen.start_keepalive(self._keepalive)
            while True:
                await gen.wait()
                reasoning, calls = gen.take_parts()
                text, _ = gen.take()
                lps = gen.take_logprobs()
                out = enc.parts(reasoning, calls, self.cfg.http.reasoning_field)
                out += enc.text(text, lps) if text or lps else b""
                if gen.keepalive_due:
                    gen.keepalive_due = False
                    if not out:
                        out = SSE_KEEPALIVE
                err = gen.error
                if err is not None:
                    await resp.write(out + sse_error(err) + SSE_DONE)
                    await resp.write_eof()
                    return
                outcome = gen.outcome
                if outcome is not None:
                    outcomes.append(outcome)
                    await resp.write(out + enc.final(outcome))
                    break
                if out:
                    await resp.write(out)
        await resp.write(encs[0].usage_chunk(outcomes) + SSE_DONE)
        await resp.write_eof()


def _choices(req: GenerateRequest) -> list[GenerateRequest]:
    """One request per choice (``n``); a seed moves on by one per choice so they differ."""
    if req.n == 1:
        return [req]
    return [
        replace(req, seed=None if req.seed is None else (req.seed + i) % (1 << 64))
        for i in range(req.n)
    ]
