"""Anthropic's Messages API: ``POST /v1/messages`` (streamed and not) and
``POST /v1/messages/count_tokens``.

A Messages request becomes the pipeline's chat request (``anthropic_parse``), runs as
any other, and is answered in Anthropic's shapes (``anthropic_render``,
``anthropic_stream``), its errors included. The ``anthropic-version`` and
``anthropic-beta`` headers are accepted and not read: the API served is the one
``anthropic_parse`` documents, whatever version a client names.
"""

from __future__ import annotations

import logging
import time

import orjson

from neutrino.errors import NeutrinoError
from neutrino.frontends.http.anthropic.parse import parse_count, parse_messages
from neutrino.frontends.http.anthropic.render import error_body, error_events, message
from neutrino.frontends.http.anthropic.stream import MessageWriter
from neutrino.frontends.http.exchange import Exchange
from neutrino.frontends.http.generate import (
    Passthrough,
    StartPush,
    admit,
    admit_or_relay,
    run_all,
    run_stream,
)
from neutrino.frontends.http.relay import relay_answer
from neutrino.frontends.http.routes import ExchangeHandler, FastRoutes, RouteGroup
from neutrino.frontends.http.sse import SSEStream
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.request import GenerateRequest

log = logging.getLogger("neutrino.http")

MESSAGES = "/v1/messages"
COUNT_TOKENS = "/v1/messages/count_tokens"
# The metric label of a Messages request: what it asks for is a chat generation.
ROUTE = "messages"  # the metrics' route label


class FastRoute:
    """A fast route's handler that also renders, in Anthropic's shape, the errors the
    lean server answers before the handler runs (a bad key, a body too large): the
    server calls its ``error_body``."""

    __slots__ = ("_handler",)

    def __init__(self, handler: ExchangeHandler) -> None:
        self._handler = handler

    async def __call__(self, ex: Exchange) -> None:
        await self._handler(ex)

    @staticmethod
    def error_body(err: NeutrinoError) -> bytes:
        return error_body(err)


class AnthropicRoutes(RouteGroup):
    def exchange_routes(self) -> dict[str, ExchangeHandler]:
        return {MESSAGES: self.messages, COUNT_TOKENS: self.count_tokens}

    def fast_routes(self) -> FastRoutes:
        """Its routes for the lean transports, rendering their early errors its way."""
        return {path: FastRoute(h) for path, h in super().fast_routes().items()}

    async def messages(self, ex: Exchange) -> None:
        """Answer one Messages request on ``ex``, streamed or not."""
        received = time.monotonic_ns()
        ex.rate_style = "anthropic"  # its key's limits as anthropic-ratelimit-* headers
        try:
            req = await admit_or_relay(ex, self.orch, parse_messages, "msg", received, ROUTE)
            if isinstance(req, Passthrough):
                await relay_answer(ex, self.orch, req, ROUTE, error_events)
                return
            log.debug("messages request for %s (stream: %s)", req.model, req.stream)
            stops = frozenset(req.stops.strings)
            if req.stream:
                start = self._start_push(stops)
                await run_stream(ex, self.orch, req, start, self._keepalive, error_events)
                return
            gens, results = await run_all(self.orch, req)
            text, outcome = results[0]
            ex.route = gens[0].route
            ex.reply(200, orjson.dumps(message(gens[0], text, outcome, stops)))
        except NeutrinoError as err:
            self.orch.observe.refused(ex.protocol, ROUTE, err)
            ex.fail(err, error_body(err))

    async def count_tokens(self, ex: Exchange) -> None:
        """``{"input_tokens": N}``: the prompt's length as generation counts it."""
        try:
            req: GenerateRequest = await admit(
                ex, self.orch, parse_count, "msgcount", time.monotonic_ns()
            )
            count = await self.orch.count_prompt(req)
            ex.reply(200, orjson.dumps({"input_tokens": count}))
        except NeutrinoError as err:
            ex.fail(err, error_body(err))

    def _start_push(self, stops: frozenset[str]) -> StartPush:
        def start(stream: SSEStream, gens: list[Generation]) -> None:
            writer = MessageWriter(stream, stops)
            writer.open(gens[0])
            gens[0].push_to(writer)

        return start
