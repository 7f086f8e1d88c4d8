"""The generation routes' shared steps, whatever API they speak.

OpenAI's chat and completions, Anthropic's Messages and OpenAI's Responses API differ in
how a request is parsed and how its answer is rendered; admitting the request (key,
body, request id), running its choices and streaming them are the same, and live here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any

from neutrino.config import LimitsConfig
from neutrino.errors import NeutrinoError
from neutrino.frontends.common import (
    PRIORITY_HEADER,
    SCHEMA_OFFLOAD_BYTES,
    asked_priority,
    client_request_id,
    off_loop,
    request_id_for,
)
from neutrino.frontends.http import jsonbody
from neutrino.frontends.http.exchange import GONE, Exchange, check_json_type
from neutrino.frontends.http.sse import Body, SlowClient, SSEStream, openai_error_events
from neutrino.observability.logs import bind_request_id
from neutrino.pipeline.assembler import Outcome
from neutrino.pipeline.auth import Principal
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.orchestrator import Orchestrator
from neutrino.pipeline.pull import collect
from neutrino.pipeline.quota import Rates
from neutrino.pipeline.request import GenerateRequest, Origin

log = logging.getLogger("neutrino.http")

Parse = Callable[[object, LimitsConfig], GenerateRequest]
# Starts the push delivery of a stream's generations (writes what opens the stream,
# then hands each generation its push target).
StartPush = Callable[[SSEStream, list[Generation]], None]


async def admit(
    ex: Exchange,
    orch: Orchestrator,
    parse: Parse,
    id_prefix: str,
    received_ns: int,
    route: str = "",
) -> GenerateRequest:
    """Authenticate, read and parse one generation request (raises NeutrinoError);
    ``route`` labels its metrics ("": the request's kind).

    A client's ``X-Request-Id`` names the request (``<id_prefix>-<id>``) and is echoed;
    otherwise the answer's header carries the request's own id.
    """
    raw, principal, client_id = await _read(ex, orch)
    limits = orch.cfg.limits
    if len(raw) > limits.offload_bytes or _has_schema(raw):  # on a worker thread
        cap = limits.max_json_containers
        req = await off_loop(lambda: parse(jsonbody.decode_large(raw, cap), limits))
    else:
        req = parse(jsonbody.decode(raw), limits)
    return _named(ex, req, principal, client_id, id_prefix, received_ns, route)


@dataclass(frozen=True, slots=True)
class Passthrough:
    """An OpenAI request for a model of a passthrough upstream: relayed as it was sent."""

    doc: dict[str, Any]
    raw: bytes  # as sent
    origin: Origin
    request_id: str


async def admit_or_relay(
    ex: Exchange,
    orch: Orchestrator,
    parse: Parse,
    id_prefix: str,
    received_ns: int,
    route: str = "",
) -> GenerateRequest | Passthrough:
    """:func:`admit`, for the routes a passthrough upstream also serves (OpenAI's chat
    and completions, Anthropic's messages): a request whose model such an upstream serves
    is not parsed but relayed (its body must be a JSON object naming the model)."""
    raw, principal, client_id = await _read(ex, orch)
    limits = orch.cfg.limits
    relayed = orch.engines.relayed
    if len(raw) > limits.offload_bytes or _has_schema(raw):  # one worker thread's turn
        cap = limits.max_json_containers
        req = await off_loop(
            lambda: _decoded(jsonbody.decode_large(raw, cap), parse, limits, relayed)
        )
    else:
        req = _decoded(jsonbody.decode(raw), parse, limits, relayed)
    if isinstance(req, dict):
        origin = Origin(
            principal, ex.protocol, "", received_ns, ex.header("traceparent"),
            priority=asked_priority(ex.header(PRIORITY_HEADER)), rates=ex.rates,
        )  # fmt: skip
        request_id = ex.request_id = request_id_for(id_prefix, client_id)
        bind_request_id(request_id)
        return Passthrough(req, raw, origin, request_id)
    return _named(ex, req, principal, client_id, id_prefix, received_ns, route)


def _decoded(
    doc: object, parse: Parse, limits: LimitsConfig, relayed: Collection[str]
) -> GenerateRequest | dict[str, Any]:
    """The body's request; or, for a model a passthrough upstream serves, the body's
    JSON object itself (relayed unparsed)."""
    if relayed and isinstance(doc, dict):
        model = doc.get("model")
        if isinstance(model, str) and model in relayed:
            return doc
    return parse(doc, limits)


async def _read(ex: Exchange, orch: Orchestrator) -> tuple[bytes, Principal | None, str]:
    """The request's body, its caller's key and its client's request id (raises
    NeutrinoError: a bad key, not JSON, too large)."""
    client_id = ex.request_id = client_request_id(ex.header("x-request-id"))
    principal = orch.keys.authenticate(ex.header("authorization"), ex.header("x-api-key"))
    if principal is not None and principal.key.rated:
        ex.rates = Rates()  # the pipeline tells it the key's limits; the answer shows them
    check_json_type(ex.header("content-type"))
    return await ex.read(orch.cfg.limits.max_body_bytes), principal, client_id


def _named(
    ex: Exchange,
    req: GenerateRequest,
    principal: Principal | None,
    client_id: str,
    id_prefix: str,
    received_ns: int,
    route: str,
) -> GenerateRequest:
    """``req`` with its origin and id (the client's, or its own: echoed either way)."""
    origin = Origin(
        principal, ex.protocol, route, received_ns, ex.header("traceparent"),
        priority=asked_priority(ex.header(PRIORITY_HEADER)), rates=ex.rates,
    )  # fmt: skip
    if client_id:
        req = req.replace(request_id=request_id_for(id_prefix, client_id), origin=origin)
    else:
        req = req.replace(origin=origin)
        ex.request_id = req.request_id
    bind_request_id(req.request_id)  # every log line of this task names it
    return req


# Fields that carry a JSON schema (checked with jsonschema).
_SCHEMA_FIELDS = (b'"json_schema"', b'"structured_outputs"', b'"guided_json"')


def _has_schema(raw: bytes) -> bool:
    """Whether a body may carry a JSON schema worth checking off the event loop."""
    return len(raw) > SCHEMA_OFFLOAD_BYTES and any(f in raw for f in _SCHEMA_FIELDS)


async def run_all(
    orch: Orchestrator, req: GenerateRequest
) -> tuple[list[Generation], list[tuple[str, Outcome]]]:
    """Every choice of a non-streamed request run to its end: the generations and, per
    choice, its text and outcome (raises the first error)."""
    gens: list[Generation] = []
    results: list[tuple[str, Outcome]] = []
    try:
        await orch.start_all(req, gens)
        for gen in gens:
            results.append(await collect(gen))
    finally:
        for gen in gens:
            gen.close()
    return gens, results


# A large answer's rendered bytes are handed to the connection in writes of this size,
# and the rendering waits while more than PIECES_UNREAD of it is not yet taken.
PIECES_WRITE = 256 * 1024
PIECES_UNREAD = 1024 * 1024


async def reply_in_pieces(ex: Exchange, answer: Iterator[bytes], send_timeout_s: float) -> None:
    """A large non-streamed answer, written as it is rendered (chunked over HTTP/1.1):
    the loop runs between pieces, and a client that takes nothing for
    ``send_timeout_s`` is dropped."""
    body = await ex.open_stream(json=True)
    buf = bytearray()
    try:
        for piece in answer:
            buf += piece
            if len(buf) >= PIECES_WRITE:
                if body.write(bytes(buf)) < 0 or not await _taken(body, send_timeout_s):
                    return
                buf.clear()
            await asyncio.sleep(0)  # each piece is a bounded amount of work
        if buf:
            body.write(bytes(buf))
        await body.end()
    except Exception:
        log.exception("request %s: writing its answer failed", ex.request_id)
        body.reset()  # half an answer must not look whole
    finally:
        body.close()


async def _taken(body: Body, send_timeout_s: float) -> bool:
    """Wait until the client has all but PIECES_UNREAD of what was written; False (and
    the connection reset) when it took nothing for ``send_timeout_s``."""
    waited, unread = 0.0, body.pending()
    while unread > PIECES_UNREAD:
        await asyncio.sleep(0.005)
        now = body.pending()
        if now < 0:
            return False
        waited = 0.0 if now < unread else waited + 0.005
        unread = now
        if waited >= send_timeout_s:
            body.reset()
            return False
    return True


async def run_stream(
    ex: Exchange,
    orch: Orchestrator,
    req: GenerateRequest,
    start_push: StartPush,
    keepalive_s: float,
    error_events: Callable[[NeutrinoError], bytes] = openai_error_events,
) -> None:
    """Stream every choice of ``req`` on ``ex``.

    The stream opens once the request is queued or running (a refusal before that is
    raised: the route answers it as a plain error); an error after that is written as
    the protocol's error event. A client that leaves, or reads too slowly, ends every
    choice with one engine cancel each.
    """
    lazy = _LazyStream(ex, orch, req, keepalive_s, error_events)
    gens: list[Generation] = []
    reason = "client disconnected"
    try:
        if not await _start_choices(orch, req, lazy, gens):
            return
        if gens and gens[0].route:  # (a stream opened while queued has its head sent)
            ex.route = gens[0].route
        opened = await lazy.open()
        start_push(opened, gens)
        await opened.done
        await opened.end()
        reason = opened.gone or reason
    except SlowClient:
        reason = "client too slow"  # it read nothing for send_timeout_s: reset
    except GONE:
        pass  # the client left; _close_all below cancels the engine requests
    finally:
        _close_all(lazy, gens, reason)


class _LazyStream:
    """A response's SSE stream, opened once, when its request is first queued or
    running (whichever comes first)."""

    __slots__ = ("_error_events", "_ex", "_keepalive_s", "_orch", "_req", "stream")

    def __init__(
        self,
        ex: Exchange,
        orch: Orchestrator,
        req: GenerateRequest,
        keepalive_s: float,
        error_events: Callable[[NeutrinoError], bytes],
    ) -> None:
        self._ex = ex
        self._orch = orch
        self._req = req
        self._keepalive_s = keepalive_s
        self._error_events = error_events
        self.stream: SSEStream | None = None

    async def open(self) -> SSEStream:
        if self.stream is None:
            req = self._req
            self.stream = SSEStream(
                await self._ex.open_stream(),
                req.n,
                self._orch.cfg.limits.stream_buffer_bytes,
                req.request_id,
                self._orch.counters,
                self._error_events,
            )
            # One keepalive for the response, from now: queued, then generating.
            self.stream.keep_alive(self._keepalive_s)
        return self.stream

    async def on_queued(self) -> None:
        await self.open()


async def _start_choices(
    orch: Orchestrator, req: GenerateRequest, lazy: _LazyStream, gens: list[Generation]
) -> bool:
    """Start every choice of ``req``, appending each generation to ``gens``. A refusal
    before the stream opened is raised; after, it is written as the stream's error
    event and the stream ended (returns False: nothing more to do)."""
    try:
        await orch.start_all(req, gens, on_queued=lazy.on_queued)
    except NeutrinoError as err:
        stream = lazy.stream
        if stream is None:
            raise
        stream.fail(err)
        await stream.end()
        return False
    return True


def _close_all(lazy: _LazyStream, gens: list[Generation], reason: str) -> None:
    """End the stream's timers and writer and every generation (an engine cancel for
    each one still running), naming why the client was lost."""
    stream = lazy.stream
    if stream is not None:
        # Why the client was lost, as the stream saw it (a reset slow reader's
        # handler may be cancelled before it reads the answer).
        if stream.gone is not None and reason == "client disconnected":
            reason = stream.gone
        stream.stop()  # its keepalive timer and writer end with the response
    for gen in gens:
        gen.close(reason)
