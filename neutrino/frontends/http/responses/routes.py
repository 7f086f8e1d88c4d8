"""OpenAI's Responses API: ``POST /v1/responses`` (streamed and not), and with the
optional store ``GET`` / ``DELETE /v1/responses/{id}``.

A request is parsed into the pipeline's chat request (``responses_parse``), run like a
chat completion (``generate``: admit, run, stream), and answered as a Response object
(``responses_render``) or as the Responses API's typed events (``responses_stream``).
Errors are OpenAI's error JSON; in a stream, an ``error`` event and ``response.failed``.
"""

from __future__ import annotations

import asyncio
import logging
import time

import orjson
from aiohttp import web

from neutrino.config import LimitsConfig
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.http.exchange import Exchange, json_response
from neutrino.frontends.http.generate import (
    StartPush,
    admit,
    reply_in_pieces,
    run_all,
    run_stream,
)
from neutrino.frontends.http.guard import caller
from neutrino.frontends.http.openai.pieces import chat_entries_json, marker, pieces
from neutrino.frontends.http.responses.parse import (
    ResponsesRequest,
    not_found_previous,
    parse_responses,
)
from neutrino.frontends.http.responses.render import output_items, response_id, response_object
from neutrino.frontends.http.responses.store import ResponseStore, owner_of
from neutrino.frontends.http.responses.stream import ResponseEvents, ResponsesWriter
from neutrino.frontends.http.routes import AiohttpHandler, ExchangeHandler, RouteGroup
from neutrino.frontends.http.sse import SSEStream
from neutrino.pipeline.assembler import Outcome
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.logprobs import chat_entries, large
from neutrino.pipeline.orchestrator import Orchestrator
from neutrino.pipeline.request import GenerateRequest

log = logging.getLogger("neutrino.http")

PATH = "/v1/responses"


class ResponsesRoutes(RouteGroup):
    def __init__(self, orchestrator: Orchestrator) -> None:
        super().__init__(orchestrator)
        rc = orchestrator.cfg.responses
        # The store is sized at start (a reload keeps it as it is).
        self.store: ResponseStore | None = None
        if rc.store_entries > 0 and rc.store_bytes > 0:
            self.store = ResponseStore(rc.store_entries, rc.store_bytes)

    def exchange_routes(self) -> dict[str, ExchangeHandler]:
        return {PATH: self.serve}

    def aiohttp_routes(self) -> list[tuple[str, str, AiohttpHandler]]:
        """Retrieving and deleting a stored response go to aiohttp alone."""
        return [("GET", PATH + "/{id}", self.retrieve), ("DELETE", PATH + "/{id}", self.delete)]

    async def serve(self, ex: Exchange) -> None:
        """Answer one ``POST /v1/responses`` on ``ex``, streamed or not."""
        received = time.monotonic_ns()
        parsed: list[ResponsesRequest] = []
        lookup = self.store.get if self.store is not None else None

        def parse(body: object, limits: LimitsConfig) -> GenerateRequest:
            parsed.append(parse_responses(body, limits, lookup))
            return parsed[-1].req

        try:
            req = await admit(ex, self.orch, parse, "resp", received, "responses")
            p = parsed[-1]
            owner = owner_of(req.origin.principal)
            if p.previous is not None and p.previous.owner != owner:
                raise not_found_previous(str(p.echo["previous_response_id"]))
            rid = response_id(req.request_id)
            created = int(time.time())
            log.debug("responses request for %s (stream: %s)", req.model, req.stream)
            if req.stream:
                events = ResponseEvents(p.echo, rid, created, req.model)
                start = self._start_push(events, p, owner)
                await run_stream(ex, self.orch, req, start, self._keepalive, events.failed)
                return
            gens, results = await run_all(self.orch, req)
            ex.route = gens[0].route
            text, outcome = results[0]
            model = gens[0].model
            columns = outcome.logprobs
            if columns is not None and large([columns]):
                await self._reply_large(ex, p, owner, (rid, created, model, text), outcome)
                return
            body = response_object(
                p.echo, rid, created, model, output_items(rid, text, outcome), outcome
            )
            self._keep(p, owner, body)
            ex.reply(200, orjson.dumps(body))
        except NeutrinoError as err:
            self.orch.observe.refused(ex.protocol, "responses", err)
            ex.fail(err)

    def _start_push(self, events: ResponseEvents, p: ResponsesRequest, owner: str) -> StartPush:
        def keep(final: dict[str, object]) -> None:
            self._keep(p, owner, final)

        def start(stream: SSEStream, gens: list[Generation]) -> None:
            events.model = gens[0].model
            stream.write(events.opening())
            gens[0].push_to(ResponsesWriter(stream, events, keep))

        return start

    async def _reply_large(
        self,
        ex: Exchange,
        p: ResponsesRequest,
        owner: str,
        head: tuple[str, int, str, str],
        outcome: Outcome,
    ) -> None:
        """An answer with large logprobs: written in pieces (pieces.py); when it is to be
        stored, its logprobs are rendered a slice per turn of the loop first."""
        rid, created, model, text = head
        columns = outcome.logprobs
        assert columns is not None
        if self.store is not None and p.store:
            entries: list[dict[str, object]] = []
            for batch in columns.slices():
                entries += chat_entries(batch)
                await asyncio.sleep(0)
            items = output_items(rid, text, outcome, entries)
            body = response_object(p.echo, rid, created, model, items, outcome)
            self._keep(p, owner, body)
        items = output_items(rid, text, outcome, marker(0))
        skeleton = response_object(p.echo, rid, created, model, items, outcome)
        answer = pieces(skeleton, [lambda: chat_entries_json(columns)])
        await reply_in_pieces(ex, answer, self.orch.cfg.limits.send_timeout_s)

    def _keep(self, p: ResponsesRequest, owner: str, response: dict[str, object]) -> None:
        """Store a finished response with its conversation, if the store is on and the
        client did not say ``store: false``."""
        if self.store is None or not p.store:
            return
        output = response["output"]
        items = [*p.items, *(output if isinstance(output, list) else ())]
        self.store.put(owner, items, response)

    # ---------------------------------------------------------------- stored responses

    def _stored(self, request: web.Request) -> str:
        """The id of a stored response the caller may see (404 otherwise)."""
        principal = caller(self.orch.keys, request)
        resp_id = request.match_info["id"]
        if self.store is None or self.store.lookup(owner_of(principal), resp_id) is None:
            raise NeutrinoError(
                ErrorKind.NOT_FOUND, f"Response with id {resp_id[:128]!r} not found.", param="id"
            )
        return resp_id

    async def retrieve(self, request: web.Request) -> web.StreamResponse:
        resp_id = self._stored(request)
        assert self.store is not None
        stored = self.store.get(resp_id)
        assert stored is not None
        return json_response(stored.response)

    async def delete(self, request: web.Request) -> web.StreamResponse:
        resp_id = self._stored(request)
        assert self.store is not None
        self.store.delete(resp_id)
        return json_response({"id": resp_id, "object": "response", "deleted": True})
