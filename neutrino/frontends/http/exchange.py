"""The request/answer seam of the generation routes, and its aiohttp adapter.

An :class:`Exchange` is one request and its answer as the routes see it; two adapters
carry it: :class:`AiohttpExchange` here and the lean HTTP/1.1 server's ``H1Exchange``.
A streamed answer's body is the exchange's :class:`~neutrino.frontends.http.sse.Body`:
the exchange owns the connection and frames what is written to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

import orjson
from aiohttp import web

from neutrino.config import LimitsConfig
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.common import SSE_HEADERS, off_loop
from neutrino.frontends.http import jsonbody
from neutrino.frontends.http.browsers import is_json
from neutrino.frontends.http.guard import error_response
from neutrino.frontends.http.headers import rate_headers
from neutrino.frontends.http.openai.render import SSE_OPEN
from neutrino.frontends.http.reset import reset
from neutrino.frontends.http.sse import Body, SlowClient, within
from neutrino.pipeline.quota import Rates
from neutrino.running import running_loop

# What aiohttp raises when the client went away while we were writing.
GONE = ConnectionError


_JSON_HEADERS = {"Content-Type": "application/json"}


def json_response(payload: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(payload), status=status, headers=_JSON_HEADERS)


class Exchange(Protocol):
    """One request and its answer, as the generation routes see them.

    Two adapters carry it: :class:`AiohttpExchange` and the lean HTTP/1.1 server's
    ``H1Exchange``; the route logic below is written once against this.
    """

    # The X-Request-Id of the answer ("": none), set by the route before it answers.
    request_id: str
    # How a manifest route answered it (X-Neutrino-Route; "": not routed).
    route: str
    # The transport, as metrics label it: "http" (HTTP/1.1) or "quic" (HTTP/3).
    protocol: str
    # Its key's rate limits, once the pipeline counted it (None: a key without limits),
    # rendered as ``rate_style`` says ("openai" or "anthropic": which headers).
    rates: Rates | None
    rate_style: str

    def header(self, name: str) -> str:
        """A request header's value ("" when absent)."""
        ...

    async def read(self, max_bytes: int) -> bytes:
        """The request body; NeutrinoError (413) when it exceeds ``max_bytes``."""
        ...

    def reply(self, status: int, body: bytes) -> None:
        """Answer with a JSON body (a non-streamed response)."""
        ...

    def fail(self, err: NeutrinoError, body: bytes | None = None) -> None:
        """Answer with ``err``: its status and headers (Retry-After where it applies) and
        ``body``, the error as the route's protocol renders it (default: OpenAI's JSON)."""
        ...

    async def open_stream(self, json: bool = False) -> Body:
        """Send the headers of a streamed answer; the body to write it into: SSE
        events, or (``json``) one JSON document written in pieces (a large answer)."""
        ...


class AiohttpExchange:
    """An :class:`Exchange` over an aiohttp request; ``response`` is what to return."""

    __slots__ = (
        "rate_style", "rates", "request", "request_id", "response", "route", "send_timeout_s",
    )  # fmt: skip
    protocol = "http"

    def __init__(self, request: web.Request, send_timeout_s: float = 60.0) -> None:
        self.request = request
        self.response: web.StreamResponse | None = None
        self.send_timeout_s = send_timeout_s
        self.request_id = ""
        self.route = ""
        self.rates: Rates | None = None
        self.rate_style = "openai"

    def _tag(self, response: web.StreamResponse) -> web.StreamResponse:
        if self.request_id:
            response.headers["X-Request-Id"] = self.request_id
        if self.route:
            response.headers["X-Neutrino-Route"] = self.route
        if self.rates is not None:
            for name, value in rate_headers(self.rates.state, self.rate_style):
                response.headers[name] = value
        return response

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
        self.response = self._tag(web.Response(body=body, status=status, headers=_JSON_HEADERS))

    def fail(self, err: NeutrinoError, body: bytes | None = None) -> None:
        self.response = self._tag(error_response(err, body))

    async def open_stream(self, json: bool = False) -> Body:
        headers = _JSON_HEADERS if json else SSE_HEADERS
        resp = self.response = self._tag(web.StreamResponse(headers=headers))
        await resp.prepare(self.request)
        body = AiohttpBody(resp, self.request.transport, self.send_timeout_s)
        if not json:
            body.write(SSE_OPEN)
        return body


class AiohttpBody:
    """A streamed body through aiohttp's writer (which frames it, chunked or not).

    ``write`` never waits: it queues, and one task per response hands what is queued
    to aiohttp, awaiting each write within the send timeout (a client that reads
    nothing that long has its connection reset).
    """

    __slots__ = ("_buf", "_ending", "_limit_s", "_resp", "_task", "_transport", "_wake", "on_lost")

    def __init__(
        self, resp: web.StreamResponse, transport: asyncio.Transport | None, limit_s: float
    ) -> None:
        self._resp = resp
        self._transport = transport
        self._limit_s = limit_s
        self._buf = bytearray()
        self._ending = False
        self._wake: asyncio.Event = asyncio.Event()
        self._task: asyncio.Task[None] | None = running_loop().create_task(self._drain())
        self.on_lost: Callable[[str], None] | None = None

    def write(self, data: bytes) -> int:
        t = self._transport
        if t is None or t.is_closing() or self._task is None:
            return -1
        self._buf += data
        self._wake.set()
        return len(self._buf) + t.get_write_buffer_size()

    def pending(self) -> int:
        t = self._transport
        return len(self._buf) + (t.get_write_buffer_size() if t is not None else 0)

    def reset(self) -> None:
        if self._transport is not None:
            reset(self._transport)

    async def end(self) -> None:
        self._ending = True
        self._wake.set()
        task = self._task
        if task is not None:
            await task

    def close(self) -> None:
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def _drain(self) -> None:
        why = "client disconnected"
        try:
            while True:
                if not self._buf and not self._ending:
                    await self._wake.wait()
                    self._wake.clear()
                if self._buf:
                    data = bytes(self._buf)
                    self._buf.clear()
                    await within(self._resp.write(data), self._transport, self._limit_s)
                elif self._ending:
                    await within(self._resp.write_eof(), self._transport, self._limit_s)
                    self._task = None
                    return
        except SlowClient:
            why = "client too slow"
        except ConnectionError:
            pass
        self._task = None
        if self.on_lost is not None:
            self.on_lost(why)


def check_json_type(content_type: str) -> None:
    """A JSON route takes only a JSON body, declared as such (``application/json``, or
    ``application/<x>+json``, with any parameters): 415 otherwise. A browser sends a
    cross-site JSON body only after a CORS preflight that Neutrino never grants, but it
    sends ``text/plain`` and forms without one, so a page in a local browser could drive
    an open server if such bodies were read as JSON."""
    if is_json(content_type):
        return
    shown = content_type.partition(";")[0].strip().lower()[:64] or "none"
    raise NeutrinoError(
        ErrorKind.UNSUPPORTED_MEDIA_TYPE,
        f"the request body must be JSON sent with Content-Type: application/json (got {shown})",
    )


async def read_json(request: web.Request, limits: LimitsConfig) -> Any:
    """The JSON body of an aiohttp request (declared JSON, bounded; errors as
    NeutrinoError); a dense one decoded on a worker thread (jsonbody.py)."""
    check_json_type(request.headers.get("Content-Type", ""))
    raw = await AiohttpExchange(request).read(limits.max_body_bytes)
    if len(raw) <= limits.offload_bytes:
        return jsonbody.decode(raw)
    return await off_loop(lambda: jsonbody.decode_large(raw, limits.max_json_containers))
