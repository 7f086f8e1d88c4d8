"""OpenAI-compatible generation endpoints: chat completions and completions."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
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
from neutrino.frontends.http.sse import SSEPushWriter
from neutrino.pipeline.generation import Generation
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
        render: Callable[[Generation, str, Any], dict[str, Any]],
    ) -> web.StreamResponse:
        try:
            body = await read_json(request, self.cfg.limits.max_body_bytes)
            req = parse(body, self.cfg.limits)
            req.traceparent = request.headers.get("traceparent", "")
            if req.stream:
                return await self._stream(request, req)
            gen = await self.orch.start(req)
            try:
                text, outcome = await gen.collect()
            finally:
                gen.close()
            return json_response(render(gen, text, outcome))
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
            resp = await self._open(request)

        try:
            gen = await self.orch.start(req, on_queued=on_queued)
        except NeutrinoError as err:
            if resp is None:
                raise
            with contextlib.suppress(_GONE):
                await resp.write(sse_error(err) + SSE_DONE)
            return resp
        reason = "client disconnected"
        try:
            if resp is None:
                resp = await self._open(request)
            enc = ChunkEncoder(gen, req.kind, req.include_usage)
            transport = request.transport
            if transport is not None and resp.headers.get("Transfer-Encoding") == "chunked":
                gone = await self._push(transport, gen, enc)
                if gone is None:
                    await resp.write_eof()
                else:
                    reason = gone
            else:  # HTTP/1.0: aiohttp frames the body; write through it
                await self._pump(resp, gen, enc)
        except _GONE:
            pass  # the client left; close() below cancels the engine request
        finally:
            gen.close(reason)
        assert resp is not None
        return resp

    async def _push(
        self, transport: asyncio.Transport, gen: Generation, enc: ChunkEncoder
    ) -> str | None:
        """Stream in push mode; returns why the client was lost, or None."""
        writer = SSEPushWriter(transport, enc, self.cfg.limits.stream_buffer_bytes)
        first = enc.first()
        if first:
            writer.write(first)
        gen.start_keepalive(self._keepalive)
        gen.push_to(writer)
        await writer.done
        return writer.gone

    async def _pump(self, resp: web.StreamResponse, gen: Generation, enc: ChunkEncoder) -> None:
        first = enc.first()
        if first:
            await resp.write(first)
        gen.start_keepalive(self._keepalive)
        while True:
            await gen.wait()
            text, _ = gen.take()
            lps = gen.take_logprobs()
            out = enc.text(text, lps) if text or lps else b""
            if gen.keepalive_due:
                gen.keepalive_due = False
                if not out:
                    out = SSE_KEEPALIVE
            err = gen.error
            if err is not None:
                await resp.write(out + sse_error(err) + SSE_DONE)
                break
            outcome = gen.outcome
            if outcome is not None:
                await resp.write(out + enc.final(outcome) + SSE_DONE)
                break
            if out:
                await resp.write(out)
        await resp.write_eof()
