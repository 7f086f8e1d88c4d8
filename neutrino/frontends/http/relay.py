"""The answer for a model of a passthrough upstream (OpenAI's chat and completions,
Anthropic's messages): the upstream's own answer to the same route, passed on as it comes
(a stream's bytes as they arrive, or the whole body).

An error before the answer starts is Neutrino's (its status, in the route's protocol);
one in the middle of a stream is the protocol's error event, as for every stream. A
client that leaves, or reads too slowly, ends the upstream request (``RelayCall.close``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from neutrino.errors import NeutrinoError
from neutrino.frontends.http.exchange import Exchange
from neutrino.frontends.http.generate import Passthrough
from neutrino.frontends.http.openai.render import SSE_KEEPALIVE
from neutrino.frontends.http.sse import openai_error_events
from neutrino.pipeline.orchestrator import Orchestrator
from neutrino.pipeline.relay import RelayCall

# The upstream's path (under its base URL, ".../v1") for each route relayed.
_PATHS = {"chat": "/chat/completions", "completion": "/completions", "messages": "/messages"}
ErrorEvents = Callable[[NeutrinoError], bytes]
MAX_ANSWER_BYTES = 64 * 1024 * 1024  # a non-streamed answer relayed, at most


async def relay_answer(
    ex: Exchange,
    orch: Orchestrator,
    req: Passthrough,
    route: str,
    error_events: ErrorEvents = openai_error_events,
) -> None:
    """Relay ``req`` and answer ``ex`` with what the upstream answers (raises
    NeutrinoError before anything was sent; ``error_events``: a stream's error, as the
    route's protocol writes it)."""
    call = await orch.relay(req.doc, req.raw, _PATHS[route], route, req.origin, req.request_id)
    try:
        if call.streamed:
            limit, every = orch.cfg.limits.stream_buffer_bytes, orch.cfg.http.sse_keepalive_s
            await _stream(ex, call, limit, every, error_events)
        else:
            ex.reply(200, await call.body(MAX_ANSWER_BYTES))
    finally:
        call.close()


async def _stream(
    ex: Exchange, call: RelayCall, unread_limit: int, keepalive_s: float, error_events: ErrorEvents
) -> None:
    """Pass the stream on; a comment after each ``keepalive_s`` without an event (the
    call yields whole events, so a comment never lands inside one)."""
    body = await ex.open_stream()
    loop = asyncio.get_running_loop()
    quiet = [True]
    timer: list[asyncio.TimerHandle] = []

    def tick() -> None:
        if quiet[0]:
            body.write(SSE_KEEPALIVE)
        quiet[0] = True
        timer[:] = [loop.call_later(keepalive_s, tick)]

    if keepalive_s > 0:
        timer.append(loop.call_later(keepalive_s, tick))
    try:
        async for chunk in call.chunks():
            quiet[0] = False
            unread = body.write(chunk)
            if unread < 0:
                return  # the client left: closing the call ends the upstream request
            if unread > unread_limit:
                body.reset()  # a client too slow to read its stream
                return
        await body.end()
    except NeutrinoError as err:
        body.write(error_events(err))
        await body.end()
    finally:
        for handle in timer:
            handle.cancel()
        body.close()
