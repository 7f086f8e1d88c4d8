"""OpenAI-compatible generation endpoints: chat completions and completions."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Protocol

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
from neutrino.frontends.http.sse import ChoiceWriter, SlowClient, SSEStream, within
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


class Exchange(Protocol):
    """One request and its answer, as the generation routes see them.

    Two adapters carry it: :class:`AiohttpExchange` and the lean HTTP/1.1 server's
    ``H1Exchange``; the route logic below is written once against this.
    """

    def header(self, name: str) -> str:
        """A request header's value ("" when absent)."""
        ...

    async def read(self, max_bytes: int) -> bytes:
        """The request body; NeutrinoError (413) when it exceeds ``max_bytes``."""
        ...

    def reply(self, status: int, body: bytes) -> None:
        """Answer with a JSON body (a non-streamed response)."""
        ...

    def fail(self, err: NeutrinoError) -> None:
        """Answer with ``err`` (OpenAI's error JSON, Retry-After where it applies)."""
        ...

    async def open_stream(self) -> asyncio.Transport | None:
        """Send the SSE headers; the transport when chunks may be written straight to
        it (chunked encoding), else None and the body goes through ``write``."""
        ...

    async def write(self, data: bytes) -> None: ...

    async def end(self) -> None:
        """End a streamed body."""
        ...


class AiohttpExchange:
    """An :class:`Exchange` over an aiohttp request; ``response`` is what to return."""

    __slots__ = ("request", "response", "send_timeout_s")

    def __init__(self, request: web.Request, send_timeout_s: float = 60.0) -> None:
        self.request = request
        self.response: web.StreamResponse | None = None
        self.send_timeout_s = send_timeout_s

    def header(self, name: str) -> str:
        return self.request.headers.get(name, "")

    async def read(self, max_bytes: int) -> bytes:
        request = self.request
        length = request.content_length
        try:
            if length is not None and length > max_bytes:
                raise web.HTTPRequestEntityTooLarge(max_size=max_bytes, actual_size=length)
            return await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise NeutrinoError(
                ErrorKind.PAYLOAD_TOO_LARGE, f"the request body exceeds {max_bytes} bytes"
            ) from None

    def reply(self, status: int, body: bytes) -> None:
        self.response = web.Response(body=body, status=status, headers=_JSON_HEADERS)

    def fail(self, err: NeutrinoError) -> None:
        self.response = error_response(err)

    async def open_stream(self) -> asyncio.Transport | None:
        resp = self.response = web.StreamResponse(headers=_SSE_HEADERS)
        await resp.prepare(self.request)
        await resp.write(SSE_OPEN)
        transport = self.request.transport
        if transport is not None and resp.headers.get("Transfer-Encoding") == "chunked":
            return transport
        return None  # HTTP/1.0: aiohttp frames the body

    async def write(self, data: bytes) -> None:
        assert self.response is not None
        await within(self.response.write(data), self.request.transport, self.send_timeout_s)

    async def end(self) -> None:
        assert self.response is not None
        await within(self.response.write_eof(), self.request.transport, self.send_timeout_s)


def check_json_type(content_type: str) -> None:
    """A JSON route takes only a JSON body, declared as such (``application/json``, or
    ``application/<x>+json``, with any parameters): 415 otherwise. A browser sends a
    cross-site JSON body only after a CORS preflight that Neutrino never grants, but it
    sends ``text/plain`` and forms without one, so a page in a local browser could drive
    an open server if such bodies were read as JSON."""
    media = content_type.partition(";")[0].strip().lower()
    if media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    ):
        return
    shown = media[:64] or "none"
    raise NeutrinoError(
        ErrorKind.UNSUPPORTED_MEDIA_TYPE,
        f"the request body must be JSON sent with Content-Type: application/json (got {shown})",
    )


def parse_json(raw: bytes) -> Any:
    if not raw:
        raise bad_request("the request body is empty; send a JSON object")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise bad_request("the request body is not valid JSON") from None


async def read_json(request: web.Request, max_bytes: int) -> Any:
    """The JSON body of an aiohttp request (declared JSON, bounded; errors as
    NeutrinoError)."""
    check_json_type(request.headers.get("Content-Type", ""))
    return parse_json(await AiohttpExchange(request).read(max_bytes))


Parse = Callable[[Any, Any], GenerateRequest]
Render = Callable[[list[Generation], list[tuple[str, Outcome]], str], dict[str, Any]]


class OpenAIRoutes:
    def __init__(self, cfg: Config, orchestrator: Orchestrator) -> None:
        self.cfg = cfg
        self.orch = orchestrator
        self._keepalive = cfg.http.sse_keepalive_s

    def register(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", guarded(self.chat))
        app.router.add_post("/v1/completions", guarded(self.completions))

    def fast_routes(self) -> dict[bytes, Callable[[Any], Awaitable[None]]]:
        """The same routes for the lean HTTP/1.1 server (path -> handler of an Exchange)."""

        async def chat(ex: Exchange) -> None:
            await self.serve(ex, parse_chat, chat_response)

        async def completions(ex: Exchange) -> None:
            await self.serve(ex, parse_completion, completion_response)

        return {b"/v1/chat/completions": chat, b"/v1/completions": completions}

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._aiohttp(request, parse_chat, chat_response)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._aiohttp(request, parse_completion, completion_response)

    async def _aiohttp(
        self, request: web.Request, parse: Parse, render: Render
    ) -> web.StreamResponse:
        ex = AiohttpExchange(request, self.cfg.limits.send_timeout_s)
        await self.serve(ex, parse, render)
        assert ex.response is not None
        return ex.response

    async def serve(self, ex: Exchange, parse: Parse, render: Render) -> None:
        """Answer one generation request on ``ex``, streamed or not."""
        try:
            principal = self.orch.keys.authenticate(
                ex.header("authorization"), ex.header("x-api-key")
            )
            check_json_type(ex.header("content-type"))
            req = parse(parse_json(await ex.read(self.cfg.limits.max_body_bytes)), self.cfg.limits)
            req.principal = principal
            req.traceparent = ex.header("traceparent")
            if req.stream:
                await self._stream(ex, req)
                return
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
            ex.reply(200, orjson.dumps(render(gens, results, self.cfg.http.reasoning_field)))
        except NeutrinoError as err:
            ex.fail(err)

    async def _stream(self, ex: Exchange, req: GenerateRequest) -> None:
        opened = False
        transport: asyncio.Transport | None = None
        waiting: asyncio.Task[None] | None = None

        async def open_stream() -> None:
            nonlocal opened, transport
            if not opened:
                opened = True
                transport = await ex.open_stream()

        async def on_queued() -> None:
            nonlocal waiting
            await open_stream()
            if self._keepalive > 0 and waiting is None:  # comments while it waits for a slot
                waiting = asyncio.create_task(self._queued_keepalive(ex))

        gens: list[Generation] = []
        reason = "client disconnected"
        try:
            try:
                for choice in _choices(req):
                    gens.append(await self.orch.start(choice, on_queued=on_queued))
            except NeutrinoError as err:
                if not opened:
                    raise
                if waiting is not None:
                    waiting.cancel()  # it stops at its sleep: no comment after the error
                with contextlib.suppress(_GONE):
                    await ex.write(sse_error(err) + SSE_DONE)
                    await ex.end()
                return
            finally:
                if waiting is not None:
                    waiting.cancel()  # the request left the queue: generation's own timer now
            await open_stream()
            encs = [ChunkEncoder(g, req.kind, req.include_usage, i) for i, g in enumerate(gens)]
            if transport is not None:
                gone = await self._push(transport, gens, encs)
                if gone is None:
                    await ex.end()
                else:
                    reason = gone
            else:
                await self._pump(ex, gens, encs)
        except SlowClient:
            reason = "client too slow"  # it read nothing for send_timeout_s: reset
        except _GONE:
            pass  # the client left; close() below cancels the engine requests
        finally:
            for gen in gens:
                gen.close(reason)

    async def _queued_keepalive(self, ex: Exchange) -> None:
        with contextlib.suppress(_GONE):
            while True:
                await asyncio.sleep(self._keepalive)
                await ex.write(SSE_KEEPALIVE)

    async def _push(
        self, transport: asyncio.Transport, gens: list[Generation], encs: list[ChunkEncoder]
    ) -> str | None:
        """Stream in push mode; returns why the client was lost, or None."""
        stream = SSEStream(
            transport,
            len(gens),
            self.cfg.limits.stream_buffer_bytes,
            gens[0].request_id,
            self.orch.counters,
        )
        for gen, enc in zip(gens, encs, strict=True):
            first = enc.first()
            if first:
                stream.write(first)
            if gen.echo:
                stream.write(enc.text(gen.echo))
        stream.keep_alive(self._keepalive)  # one timer for the response, all choices
        try:
            for i, (gen, enc) in enumerate(zip(gens, encs, strict=True)):
                gen.push_to(ChoiceWriter(stream, enc, i, self.cfg.http.reasoning_field))
            await stream.done
        finally:
            stream.stop()  # its keepalive timer ends with the response, however it ends
        return stream.gone

    async def _pump(self, ex: Exchange, gens: list[Generation], encs: list[ChunkEncoder]) -> None:
        outcomes: list[Outcome] = []
        for gen, enc in zip(gens, encs, strict=True):
            first = enc.first()
            if first:
                await ex.write(first)
            if gen.echo:
                await ex.write(enc.text(gen.echo))
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
                    await ex.write(out + sse_error(err) + SSE_DONE)
                    await ex.end()
                    return
                outcome = gen.outcome
                if outcome is not None:
                    outcomes.append(outcome)
                    await ex.write(out + enc.final(outcome))
                    break
                if out:
                    await ex.write(out)
        await ex.write(encs[0].usage_chunk(outcomes) + SSE_DONE)
        await ex.end()


def _choices(req: GenerateRequest) -> list[GenerateRequest]:
    """One request per choice (``n``); a seed moves on by one per choice so they differ."""
    if req.n == 1:
        return [req]
    return [
        replace(req, seed=None if req.seed is None else (req.seed + i) % (1 << 64))
        for i in range(req.n)
    ]
