"""Manifest routes (``[[routes]]``): a model name that is an alias. A request for it first
asks the route's router model for the request's intent (a short answer constrained to
the intents' names), maps the intent to a specialist model (the fallback for any other
answer, or when the router fails), then is answered by the specialist as if the client
had asked for it: streamed, in the client's protocol, one client request.

The router sees the route's instruction as its system prompt and the client's last user
turn. Its request is a request of its own (``<id>-route`` in the history, with its own
metrics and span); the specialist's keeps the client's id, and carries the hop
(``Hop``): in its history entry, its span and the ``X-Neutrino-Route`` response header.
When a route's router runs, the specialists that load on demand are loaded meanwhile
(``warm``), without the request waiting for them.

Routes are read at each request: a reload that replaces them sends new requests by the
new ones while requests in flight finish as they were routed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import msgspec

from neutrino.config import RouteConfig
from neutrino.engine.messages import Guided, GuidedMode
from neutrino.pipeline.chat import Message
from neutrino.pipeline.request import NO_TOOLS, ChatPrompt, GenerateRequest, OutputRules
from neutrino.pipeline.sampling import SamplingParams, StopRules

log = logging.getLogger("neutrino.pipeline")

WARM_TIMEOUT_S = 600.0


class Hop(msgspec.Struct, frozen=True, gc=False):
    """How a request was routed: the alias, the intent the router named, the model."""

    route: str
    intent: str  # "" when the router failed or named none of the intents
    model: str

    def header(self) -> str:
        return f"{self.route}; intent={self.intent or '-'}; model={self.model}"


class Routes:
    """The manifest routes in force, by alias."""

    def __init__(self, routes: tuple[RouteConfig, ...]) -> None:
        self.by_name: Mapping[str, RouteConfig] = {r.name: r for r in routes}
        self._warming: dict[str, asyncio.Task[None]] = {}

    def router_request(self, route: RouteConfig, req: GenerateRequest) -> GenerateRequest:
        """The request that asks ``route.router`` for ``req``'s intent."""
        last = _last_user_text(req)
        messages = (Message("system", route.prompt), Message("user", last))
        return GenerateRequest(
            request_id=req.request_id + "-route",
            model=route.router,
            prompt=ChatPrompt(messages),
            sampling=SamplingParams(max_tokens=route.max_tokens, temperature=0.0),
            stops=StopRules(),
            output=OutputRules(guided=Guided(GuidedMode.CHOICE, choices=list(route.intents))),
            tools=NO_TOOLS,
            origin=req.origin,
        )

    @staticmethod
    def hop(route: RouteConfig, answer: str | None) -> Hop:
        """The hop for the router's ``answer`` (None: it failed)."""
        intent = (answer or "").strip().strip(".\"'").strip()
        model = route.intents.get(intent)
        if model is None:
            lowered = {k.lower(): v for k, v in route.intents.items()}
            model = lowered.get(intent.lower())
        if model is None:
            return Hop(route.name, "", route.fallback)
        return Hop(route.name, intent, model)

    def warm(
        self, route: RouteConfig, load: Callable[[str, float], Coroutine[Any, Any, None]]
    ) -> None:
        """Load ``route``'s specialists where they load on demand, in the background (one
        load per model at a time)."""
        if not route.warm:
            return
        for model in route.models:
            task = self._warming.get(model)
            if task is not None and not task.done():
                continue
            task = asyncio.get_running_loop().create_task(self._warm_one(load, model))
            self._warming[model] = task

    async def _warm_one(
        self, load: Callable[[str, float], Coroutine[Any, Any, None]], model: str
    ) -> None:
        try:
            await load(model, WARM_TIMEOUT_S)
        except Exception as exc:  # a warm-up is a hint: the request's own load will say
            log.info("warming %s for a route failed: %s", model, exc)
        finally:
            self._warming.pop(model, None)


def _last_user_text(req: GenerateRequest) -> str:
    """The text of the client's last user turn (its text parts joined)."""
    for m in reversed(req.chat.messages):
        if m.role != "user":
            continue
        content = m.content
        if isinstance(content, str):
            return content
        return "\n".join(getattr(p, "text", "") for p in content or () if hasattr(p, "text"))
    return ""
