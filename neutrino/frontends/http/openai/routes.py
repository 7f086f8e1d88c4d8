"""OpenAI-compatible generation endpoints: chat completions and completions."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from neutrino.errors import NeutrinoError
from neutrino.frontends.http.exchange import Exchange
from neutrino.frontends.http.generate import (
    Parse,
    Passthrough,
    StartPush,
    admit_or_relay,
    reply_in_pieces,
    run_all,
    run_stream,
)
from neutrino.frontends.http.openai.parse import parse_chat, parse_completion
from neutrino.frontends.http.openai.render import (
    Answer,
    ChunkEncoder,
    chat_answer,
    completion_answer,
)
from neutrino.frontends.http.relay import relay_answer
from neutrino.frontends.http.routes import ExchangeHandler, RouteGroup
from neutrino.frontends.http.sse import ChoiceWriter, SSEStream
from neutrino.pipeline.assembler import Outcome
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.request import GenerateRequest

log = logging.getLogger("neutrino.http")


_PREFIXES = {"chat": "chatcmpl", "completion": "cmpl"}
Render = Callable[[list[Generation], list[tuple[str, Outcome]], str], Answer]


class OpenAIRoutes(RouteGroup):
    def exchange_routes(self) -> dict[str, ExchangeHandler]:
        return {"/v1/chat/completions": self.chat, "/v1/completions": self.completions}

    async def chat(self, ex: Exchange) -> None:
        await self.serve(ex, parse_chat, chat_answer, "chat")

    async def completions(self, ex: Exchange) -> None:
        await self.serve(ex, parse_completion, completion_answer, "completion")

    async def serve(self, ex: Exchange, parse: Parse, render: Render, route: str) -> None:
        """Answer one generation request on ``ex``, streamed or not."""
        received = time.monotonic_ns()
        try:
            req = await admit_or_relay(ex, self.orch, parse, _PREFIXES[route], received)
            if isinstance(req, Passthrough):
                await relay_answer(ex, self.orch, req, route)
                return
            log.debug("%s request for %s (stream: %s)", route, req.model, req.stream)
            if req.stream:
                await run_stream(ex, self.orch, req, self._start_push(req), self._keepalive)
                return
            gens, results = await run_all(self.orch, req)
            ex.route = gens[0].route
            answer = render(gens, results, self.cfg.http.reasoning_field)
            if isinstance(answer, bytes):
                ex.reply(200, answer)
            else:
                await reply_in_pieces(ex, answer, self.cfg.limits.send_timeout_s)
        except NeutrinoError as err:
            self.orch.observe.refused(ex.protocol, route, err)
            ex.fail(err)

    def _start_push(self, req: GenerateRequest) -> StartPush:
        def start(stream: SSEStream, gens: list[Generation]) -> None:
            """Stream every choice in push mode: OpenAI's chunks."""
            encs = [ChunkEncoder(g, req.kind, req.include_usage, i) for i, g in enumerate(gens)]
            for gen, enc in zip(gens, encs, strict=True):
                first = enc.first()
                if first:
                    stream.write(first)
                if gen.echo:
                    stream.write(enc.text(gen.echo))
            field = self.cfg.http.reasoning_field
            for i, (gen, enc) in enumerate(zip(gens, encs, strict=True)):
                gen.push_to(ChoiceWriter(stream, enc, i, field))

        return start
