"""Admission and submission: a request from validation to an engine, and its end.

The steps are each in their own module: the prompt (``prompt``: template and tokens),
the limits and sampling (``limits``), the answer's making (``answering``), the end of
every request, counted once (``endings``). Here they run in order, the request waits
for an engine slot in the bounded queue (``admission``) and is submitted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from neutrino.config import Config, RouteConfig
from neutrino.engine.client import EngineClient, Submission
from neutrino.engine.messages import Capability, ModalQuery, Query, TextQuery
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.observability.counters import Counters
from neutrino.pipeline import limits
from neutrino.pipeline.admission import OPEN, Admission, Ticket
from neutrino.pipeline.answering import generation
from neutrino.pipeline.auth import KeyRing, Principal
from neutrino.pipeline.call import ModalCall
from neutrino.pipeline.chat import ToolViews, template_tools
from neutrino.pipeline.deadlines import DeadlineWheel
from neutrino.pipeline.endings import Endings
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.history import History
from neutrino.pipeline.modalities import ModalJob, Transcribe
from neutrino.pipeline.models import ModelText, ModelTexts
from neutrino.pipeline.observe import AttrValue, Observed, Observer
from neutrino.pipeline.prompt import PromptBuilder, model_text
from neutrino.pipeline.pull import collect
from neutrino.pipeline.quota import Quotas
from neutrino.pipeline.quota_store import store_for
from neutrino.pipeline.relay import RelayCall
from neutrino.pipeline.request import GenerateRequest, Origin, choices, tool_guided
from neutrino.pipeline.routes import Routes
from neutrino.pipeline.served import capable, model_info
from neutrino.pipeline.state import Lifecycle, State

log = logging.getLogger("neutrino.pipeline")

# Routes -> the GenAI semantic conventions' operation names.
_OPERATIONS = {"chat": "chat", "completion": "text_completion", "embed": "embeddings"}


def _request_attrs(req: GenerateRequest) -> dict[str, AttrValue]:
    """A generation's span attributes known when it starts (GenAI conventions)."""
    attrs: dict[str, AttrValue] = {
        "gen_ai.operation.name": _OPERATIONS[req.kind],
        "gen_ai.request.temperature": req.sampling.temperature,
        "gen_ai.request.top_p": req.sampling.top_p,
        "neutrino.request_id": req.request_id,
    }
    if req.sampling.max_tokens is not None:
        attrs["gen_ai.request.max_tokens"] = req.sampling.max_tokens
    if req.sampling.seed is not None:
        attrs["gen_ai.request.seed"] = req.sampling.seed
    return attrs


def _check_allowed(principal: Principal | None, model: str) -> None:
    """403 for a model the caller's key may not use (nothing is counted)."""
    if principal is not None and not principal.allows(model):
        raise NeutrinoError(
            ErrorKind.PERMISSION_DENIED,
            f"this API key may not use the model {model[:128]!r}",
            param="model",
            code="model_not_allowed",
        )


def _shutting_down() -> NeutrinoError:
    return NeutrinoError(ErrorKind.SHUTTING_DOWN, "the server is shutting down")


class Orchestrator:
    def __init__(
        self,
        cfg: Config,
        engines: EngineClient,
        texts: ModelTexts,
        history: History,
        observer: Observer | None = None,
    ) -> None:
        self.cfg = cfg
        self.observe = observer if observer is not None else Observer(None, None)
        self.engines = engines
        self.texts = texts
        self.history = history
        lim = cfg.limits
        self.admission = Admission(
            lim.max_queue, self._limit, lim.priority_age_s, lim.share_decay_s, lim.reserved_slots
        )
        self.quotas = Quotas(store_for(lim.redis), lim.rate_window_s)
        self.endings = Endings(self.admission, self.observe, history, self.quotas)
        self.prompts = PromptBuilder(cfg.tokenizer.offload_chars)
        self.deadlines = DeadlineWheel()
        self.draining = False  # new requests are refused; those in flight go on
        self.started = 0
        self.counters = Counters()  # events beside requests, shown in app_state
        self.keys = KeyRing(cfg.auth.keys, bool(cfg.admin.address), self.counters)
        self.routes = Routes(cfg.routes)
        self.cfg_redis = lim.redis  # where the quotas count (a reload may move them)

    def swap(self, cfg: Config, engines: EngineClient, texts: ModelTexts) -> None:
        """A reload: requests from now on use these; those in flight keep theirs."""
        self.cfg = cfg
        self.engines = engines
        self.texts = texts
        if cfg.routes != tuple(self.routes.by_name.values()):
            self.routes = Routes(cfg.routes)
        self.prompts = PromptBuilder(cfg.tokenizer.offload_chars)
        lim = cfg.limits
        self.admission.tune(
            lim.max_queue, lim.priority_age_s, lim.share_decay_s, lim.reserved_slots
        )
        self.quotas.window_s = lim.rate_window_s
        if lim.redis != self.cfg_redis:
            self.quotas.store, self.cfg_redis = store_for(lim.redis), lim.redis

    def _limit(self) -> int:
        return self.cfg.limits.max_inflight or self.engines.capacity()

    @property
    def capacity(self) -> int:
        """Requests admitted at once before new ones queue."""
        return self._limit()

    @property
    def inflight(self) -> int:
        return self.admission.inflight

    @property
    def finished(self) -> dict[str, int]:
        """Requests ended, by terminal state."""
        return self.endings.finished

    # ------------------------------------------------------------------ public

    async def start_all(
        self,
        req: GenerateRequest,
        into: list[Generation],
        on_queued: Callable[[], Awaitable[None]] | None = None,
    ) -> list[Generation]:
        """Every choice of ``req`` started (``n``, for every protocol alike), each appended
        to ``into`` as it starts, so that the caller, which closes them all whatever
        happens, holds every one; a refusal is raised with the earlier ones in ``into``."""
        for choice in choices(req):
            into.append(await self.start(choice, on_queued))
        return into

    async def start(
        self,
        req: GenerateRequest,
        on_queued: Callable[[], Awaitable[None]] | None = None,
    ) -> Generation:
        """Validate, tokenize, queue and submit ``req``; returns its live generation.

        ``on_queued`` is awaited when the request has to wait for an engine slot
        (after every validation), so a streaming front end can open its stream.
        """
        routes = self.routes.by_name
        if routes and req.model in routes:  # a manifest route: its router, then its pick
            return await self._start_routed(routes[req.model], req, on_queued)
        lifecycle = Lifecycle()
        admitted: Ticket | None = None  # the ticket it holds an engine slot with
        counted = False  # its key counts it in flight
        ticket = OPEN
        origin = req.origin
        kind = req.prompt.kind
        obs, traceparent = self._begin(
            lifecycle, origin.protocol, origin.route or kind, origin.received_ns, req.model,
            _OPERATIONS[kind],
            origin.traceparent,
            lambda: _request_attrs(req),
        )  # fmt: skip
        try:
            if self.draining:
                raise _shutting_down()
            self.keys.admit(origin.principal, req.model, req.n)
            counted = True
            timeout = origin.timeout_s or self.cfg.limits.request_timeout_s
            deadline = time.monotonic() + timeout
            tools = template_tools(req.tools.tools)  # one view, for template and parser
            text, prompt, query = await self._prepare(req, timeout, traceparent, obs, tools)
            lifecycle.advance(State.QUEUED)
            ticket = self._ticket(origin, len(prompt) + self._answer_estimate(req, query))
            await self._rate(origin, ticket)
            admission = self.admission
            if admission.closed or not admission.try_acquire(ticket):  # else a slot was free
                await admission.enter(max(0.001, deadline - time.monotonic()), on_queued, ticket)
            admitted = ticket
            if not self.engines.ready(req.model):  # its engine died, or it is not loaded
                await self._ready(req.model, max(0.001, deadline - time.monotonic()))
            lifecycle.advance(State.PROCESSING)
            gen = generation(req, text, prompt, lifecycle, self.endings.done, tools)
            gen.obs, gen.ticket = obs, ticket
            submission = self._submit(query, gen, origin.principal)
            gen.attach(submission, max(0.001, deadline - time.monotonic()), self.deadlines)
            return gen
        except BaseException as exc:  # (no local may hold the error: see Endings.abort)
            self.endings.settle(ticket, 0)  # admitted, it used no tokens
            raise self.endings.abort(
                req.request_id, req.model, lifecycle, admitted, exc, origin.principal, counted, obs
            ) from None

    async def relay(
        self,
        doc: dict[str, Any],
        raw: bytes,
        path: str,
        route: str,
        origin: Origin,
        request_id: str,
    ) -> RelayCall:
        """Relay an OpenAI request (``raw``, the client's body, decoded: ``doc``) for a model
        of a passthrough upstream to its ``path``, admitted, queued and ended as every
        request is."""
        model: str = doc["model"]
        lifecycle = Lifecycle()
        admitted: Ticket | None = None
        counted = False
        ticket = OPEN
        obs, traceparent = self._begin(
            lifecycle, origin.protocol, route, origin.received_ns, model,
            _OPERATIONS.get(route, "chat"), origin.traceparent,
            lambda: {"neutrino.request_id": request_id},
        )  # fmt: skip
        try:
            if self.draining:
                raise _shutting_down()
            self.keys.admit(origin.principal, model)
            counted = True
            deadline = time.monotonic() + (origin.timeout_s or self.cfg.limits.request_timeout_s)
            lifecycle.advance(State.QUEUED)
            ticket = self._ticket(origin, self._relay_estimate(doc, raw))
            await self._rate(origin, ticket)
            admission = self.admission
            if admission.closed or not admission.try_acquire(ticket):
                await admission.enter(max(0.001, deadline - time.monotonic()), None, ticket)
            admitted = ticket
            if not self.engines.ready(model):  # it is not loaded (an upstream that loads)
                await self._ready(model, max(0.001, deadline - time.monotonic()))
            lifecycle.advance(State.PROCESSING)
            relayed = await self.engines.relay(model, path, doc, raw, traceparent)
            call = RelayCall(
                request_id=request_id, model=model, lifecycle=lifecycle, relayed=relayed,
                streamed=doc.get("stream") is True, on_done=self.endings.done,
            )  # fmt: skip
            call.principal, call.obs, call.ticket = origin.principal, obs, ticket
            self.endings.live.add(call)
            call.attach(max(0.001, deadline - time.monotonic()), self.deadlines)
            return call
        except BaseException as exc:
            self.endings.settle(ticket, 0)
            raise self.endings.abort(
                request_id, model, lifecycle, admitted, exc, origin.principal, counted, obs
            ) from None

    async def _start_routed(
        self,
        route: RouteConfig,
        req: GenerateRequest,
        on_queued: Callable[[], Awaitable[None]] | None,
    ) -> Generation:
        """``req`` for a manifest route: its router names the intent, the intent's model
        answers (pipeline/routes.py)."""
        if req.prompt.kind != "chat":
            raise NeutrinoError(
                ErrorKind.BAD_REQUEST,
                f"the model {req.model!r} is a route: it answers chats only",
                param="model",
            )
        _check_allowed(req.origin.principal, req.model)
        self.routes.warm(route, self.engines.ensure_loaded)
        answer: str | None = None
        try:
            answer, _ = await collect(await self.start(self.routes.router_request(route, req)))
        except NeutrinoError as exc:
            log.warning("route %s: its router %s failed (%s): %s", route.name, route.router,
                        exc.kind.name, exc.message)  # fmt: skip
        hop = self.routes.hop(route, answer)
        gen = await self.start(req.replace(model=hop.model), on_queued)
        gen.route = hop.header()
        return gen

    def _ticket(self, origin: Origin, tokens: int) -> Ticket:
        """A request's place in the queue: its key, its priority (asked, capped by the
        key's ceiling; else the key's own) and the tokens it is charged."""
        principal = origin.principal
        if principal is None:
            tenant, own, ceiling = "", 0, self.cfg.limits.unkeyed_max_priority
        else:
            key = principal.key
            tenant, own, ceiling = key.name, key.priority, key.ceiling
        asked = origin.priority
        return Ticket(tenant, own if asked < 0 else min(asked, ceiling), tokens)

    async def _rate(self, origin: Origin, ticket: Ticket) -> None:
        """Count the request against its key's rate limits, or refuse it (429)."""
        principal = origin.principal
        if principal is not None and principal.key.rated:
            await self.quotas.admit(principal.key, ticket.tokens, origin.rates)
            ticket.rated, ticket.rated_tokens = principal.key, ticket.tokens

    def _answer_estimate(self, req: GenerateRequest, query: TextQuery) -> int:
        """The answer's tokens charged at admission: what the client allows it, or the
        configured estimate, within what the engine may give (corrected at the end).
        Each choice of ``n`` is its own request, charged its own."""
        asked = req.sampling.max_tokens or self.cfg.limits.answer_estimate_tokens
        return min(asked, query.sampling.max_tokens or asked)

    def _relay_estimate(self, doc: dict[str, Any], raw: bytes) -> int:
        """A relayed request's tokens at admission (its prompt is not tokenized here):
        about a token per four bytes of its body, and its answer's allowance."""
        asked = doc.get("max_completion_tokens") or doc.get("max_tokens")
        answer = asked if isinstance(asked, int) and asked > 0 else None
        return len(raw) // 4 + (answer or self.cfg.limits.answer_estimate_tokens)

    async def _ready(self, model: str, timeout: float) -> None:
        """Wait for ``model``'s engine (it died while the request queued) and for the
        model to be loaded (an engine that loads on demand); nothing may await between
        this and the request's submission, or the model could be unloaded again."""
        if model not in self.engines.models():
            await self.engines.wait_for(model, timeout)
        await self.engines.ensure_loaded(model, timeout)

    def _begin(
        self,
        lifecycle: Lifecycle,
        protocol: str,
        route: str,
        received_ns: int,
        model: str,
        operation: str,
        traceparent: str,
        attrs: Callable[[], dict[str, AttrValue]],
    ) -> tuple[Observed, str]:
        """A request's observation (metrics) and, when tracing, its span: the traceparent
        its engine gets."""
        self.started += 1
        obs = Observed(protocol, route, received_ns or lifecycle.times[State.START])
        if self.observe.tracer is not None:
            traceparent = self.observe.begin(obs, model, operation, traceparent, attrs())
        return obs, traceparent

    async def _prepare(
        self,
        req: GenerateRequest,
        timeout: float,
        traceparent: str,
        obs: Observed,
        tools: ToolViews,
    ) -> tuple[ModelText, list[int], TextQuery]:
        """The model's text layer, the prompt's ids and the engine's query for ``req``
        (``tools``: its offered tools as the template reads them)."""
        if req.model not in self.engines.models():  # a managed engine may be restarting
            await self.engines.wait_for(req.model, timeout)
        info = model_info(self.engines, req.model)
        text = await model_text(self.texts, req, info)
        prompt = await self.prompts.ids(req, text, info.context_length, obs, tools)
        query = TextQuery(
            model=req.model,
            prompt_tokens=prompt,
            sampling=limits.sampling(req, text, info, len(prompt), self.cfg.limits),
            deadline_ms=int(1000 * timeout),
            traceparent=traceparent,
            images=list(req.images),
            guided=tool_guided(req),
        )
        return text, prompt, query

    async def count_prompt(self, req: GenerateRequest) -> int:
        """The number of tokens of ``req``'s prompt, templated and tokenized as
        :meth:`start` does it (no engine is asked; the key must allow the model)."""
        if self.draining:
            raise _shutting_down()
        _check_allowed(req.origin.principal, req.model)
        info = model_info(self.engines, req.model)
        text = await model_text(self.texts, req, info)
        obs = Observed(req.origin.protocol, req.origin.route or req.kind, 0)
        tools = template_tools(req.tools.tools)
        return len(await self.prompts.ids(req, text, info.context_length, obs, tools))

    async def call(
        self,
        job: ModalJob,
        *,
        request_id: str,
        timeout_s: float | None = None,
        on_queued: Callable[[], Awaitable[None]] | None = None,
        principal: Principal | None = None,
        protocol: str = "http",
        received_ns: int = 0,
    ) -> ModalCall:
        """Validate and submit a modality request (``pipeline/modalities.py``); returns
        its live call. The job's ``build`` turns the model's text assets and engine info
        into the query and its prompt token count; it raises NeutrinoError for bad input.
        """
        model = job.model
        lifecycle = Lifecycle()
        admitted: Ticket | None = None
        counted = False
        ticket = OPEN
        timeout = timeout_s or self.cfg.limits.request_timeout_s
        route = type(job).__name__.lower()
        obs, traceparent = self._begin(
            lifecycle, protocol, route, received_ns, model, _OPERATIONS.get(route, route),
            job.traceparent,
            lambda: {"neutrino.request_id": request_id},
        )  # fmt: skip
        try:
            if self.draining:
                raise _shutting_down()
            self.keys.admit(principal, model)
            counted = True
            query, prompt_tokens = await self._modal_query(job, traceparent)
            lifecycle.advance(State.QUEUED)
            deadline = time.monotonic() + timeout
            ticket = self._ticket(Origin(principal), prompt_tokens)
            await self._rate(Origin(principal), ticket)
            await self.admission.enter(timeout, on_queued, ticket)
            admitted = ticket
            lifecycle.advance(State.PROCESSING)
            call = ModalCall(
                request_id=request_id,
                model=model,
                prompt_tokens=prompt_tokens,
                lifecycle=lifecycle,
                on_done=self.endings.done,
            )
            call.obs, call.ticket = obs, ticket
            call.attach(
                self._submit(query, call, principal),
                max(0.001, deadline - time.monotonic()),
                self.deadlines,
            )
            return call
        except BaseException as exc:
            self.endings.settle(ticket, 0)
            raise self.endings.abort(
                request_id, model, lifecycle, admitted, exc, principal, counted, obs
            ) from None

    def audio_rate(self, model: str) -> int:
        """The sample rate a transcribe model's audio must have, as its engine declares it
        (0: any rate, or a model not served): what a front end decodes an upload to."""
        info = self.engines.models().get(model)
        return info.audio_sample_rate if info is not None else 0

    async def _modal_query(self, job: ModalJob, traceparent: str) -> tuple[ModalQuery, int]:
        info = capable(self.engines, job.model, job.capability)
        rate = info.audio_sample_rate
        if isinstance(job, Transcribe) and rate and job.sample_rate != rate:
            job = await asyncio.to_thread(job.at_rate, rate)  # decoded before the engine said
        text = self.texts.cached(job.model)
        if text is None:
            generates = info.can(Capability.GENERATE)
            text = await asyncio.to_thread(self.texts.get, job.model, generates)
        query, prompt_tokens = job.build(text, info)
        if traceparent != query.traceparent:  # the request's own span id, for the engine
            query = dataclasses.replace(query, traceparent=traceparent)
        return query, prompt_tokens

    def _submit(
        self, query: Query, sink: Generation | ModalCall, principal: Principal | None
    ) -> Submission:
        """Send ``query``; ``sink`` is live (a shutdown ends it) and, once it ends,
        releases its key's count (``Endings.done``)."""
        sink.principal = principal
        live = self.endings.live
        live.add(sink)
        try:
            return self.engines.submit(query, sink)
        except BaseException:
            live.discard(sink)
            raise

    def shutdown(self) -> int:
        """End every request still queued or at an engine (the shutdown's grace ran out):
        each gets SHUTTING_DOWN, as its front end renders a failure (an SSE error event
        and [DONE], a 503, gRPC UNAVAILABLE), and the engine one cancel, reason
        "shutdown". Returns how many were ended."""
        self.draining = self.admission.closed = True
        ended = self.admission.fail_waiters(_shutting_down())
        for live in list(self.endings.live):
            live.abort(_shutting_down(), "shutdown")
            ended += 1
        return ended
