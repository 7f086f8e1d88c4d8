"""Drives a request from validation to an engine: template, tokens, admission, submit."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from neutrino.config import Config
from neutrino.engine.client import EngineClient, Submission
from neutrino.engine.messages import (
    Capability,
    ModalQuery,
    ModelInfo,
    Query,
    Sampling,
    TextQuery,
)
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.observability.counters import Counters
from neutrino.pipeline.admission import Admission
from neutrino.pipeline.auth import KeyRing, Principal
from neutrino.pipeline.call import ModalCall
from neutrino.pipeline.deadlines import DeadlineWheel
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.history import History, HistoryEntry
from neutrino.pipeline.logprobs import LogprobRecorder
from neutrino.pipeline.models import ModelText, ModelTexts
from neutrino.pipeline.observe import AttrValue, Observed, Observer
from neutrino.pipeline.output import OutputParser
from neutrino.pipeline.request import GenerateRequest, tool_guided
from neutrino.pipeline.state import Lifecycle, State
from neutrino.pipeline.text_stream import TextStream
from neutrino.text.bounded import tokens_at_least
from neutrino.text.chat_messages import images_for_template
from neutrino.text.parsers import CallIds
from neutrino.text.parsers.forced import ForcedToolParser
from neutrino.text.templates import TemplateError
from neutrino.text.tool_call_ids import alnum9_ids

log = logging.getLogger("neutrino.pipeline")


# A text longer than this many characters per token of the context is counted piece by
# piece first (tokens_at_least): it is almost surely over, and then is refused without
# its whole token list being built.
_COUNT_FIRST_CHARS_PER_TOKEN = 8


# Routes -> the GenAI semantic conventions' operation names.
_OPERATIONS = {"chat": "chat", "completion": "text_completion", "embed": "embeddings"}


def _request_attrs(req: GenerateRequest) -> dict[str, AttrValue]:
    """A generation's span attributes known when it starts (GenAI conventions)."""
    attrs: dict[str, AttrValue] = {
        "gen_ai.operation.name": _OPERATIONS[req.kind],
        "gen_ai.request.temperature": req.temperature,
        "gen_ai.request.top_p": req.top_p,
        "neutrino.request_id": req.request_id,
    }
    if req.max_tokens is not None:
        attrs["gen_ai.request.max_tokens"] = req.max_tokens
    if req.seed is not None:
        attrs["gen_ai.request.seed"] = req.seed
    return attrs


def _shutting_down() -> NeutrinoError:
    return NeutrinoError(ErrorKind.SHUTTING_DOWN, "the server is shutting down")


def _context_error(ctx: int, tokens: str, param: str) -> NeutrinoError:
    return NeutrinoError(
        ErrorKind.CONTEXT_LENGTH,
        f"this model's maximum context length is {ctx} tokens; the prompt has {tokens} tokens",
        param=param,
    )


def _encode_within(text: ModelText, s: str, ctx: int) -> list[int] | int:
    """The prompt's ids, or, for a text far over the context, a lower bound of its token
    count past the context, found without building its whole token list."""
    if ctx and len(s) > _COUNT_FIRST_CHARS_PER_TOKEN * ctx:
        over = tokens_at_least(text.tokenizer.encode, s, ctx - 1)
        if over is not None:
            return over
    return text.tokenizer.encode_prompt(s)


# Whose messages' text a template renders as it is (an assistant's may lose its reasoning).
_VERBATIM_ROLES = frozenset({"user", "system", "developer", "tool"})


async def _over_before_rendering(
    messages: list[dict[str, Any]], text: ModelText, ctx: int
) -> int | None:
    """For a chat whose texts are far over the context (as ``_encode_within`` judges a
    text): a lower bound of its prompt's tokens past the context, counted on a worker
    thread before the template renders it all (which holds the event loop: some 3 ms a
    MB). None: it may fit, render it."""
    if not ctx:
        return None
    texts = []
    for m in messages:
        if m.get("role") in _VERBATIM_ROLES:
            content = m.get("content")
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                texts += [p["text"] for p in content if isinstance(p.get("text"), str)]
    if sum(map(len, texts)) <= _COUNT_FIRST_CHARS_PER_TOKEN * ctx:
        return None
    # Joined, the texts may merge a token or so at each seam where the template puts a
    # role marker instead: a few tokens of slack each.
    limit = ctx - 1 + 4 * len(texts)
    encode = text.tokenizer.encode
    return await asyncio.to_thread(tokens_at_least, encode, "\n".join(texts), limit)


def _on_a_thread(work: Callable[[], str | None], done: Callable[[str | None], None]) -> None:
    """A Generation's Defer: ``work`` on a worker thread, ``done`` back on the loop."""

    def finished(fut: asyncio.Future[str | None]) -> None:
        if fut.cancelled():
            return
        exc = fut.exception()
        done(fut.result() if exc is None else f"the output could not be checked: {exc!r}"[:300])

    asyncio.get_running_loop().run_in_executor(None, work).add_done_callback(finished)


def _figures_per_token(req: GenerateRequest) -> int:
    """What each token adds to a non-streamed answer: n * (1 + top_logprobs)."""
    return req.n * (1 + (req.top_logprobs if req.logprobs else 0))


def _check_bias(bias: dict[int, float], vocab: int) -> None:
    """Every logit_bias id within the vocabulary, as vLLM and OpenAI require."""
    worst = max(bias)
    if worst >= vocab:
        raise NeutrinoError(
            ErrorKind.BAD_REQUEST,
            f"Invalid key in logit_bias: {worst}; token ids must be below the model's "
            f"vocabulary size {vocab}",
            param="logit_bias",
        )


def _opens_think(text: ModelText, prompt: list[int]) -> bool:
    """Whether the rendered chat prompt ends inside a ``<think>`` block, so that the model's
    output starts with reasoning. Templates decide it per request: DeepSeek-R1's ends its
    generation prompt with ``<think>\\n`` but not after a tool result, DeepSeek-V3.1's
    writes ``<think>`` only in thinking mode (``thinking`` true)."""
    tail = text.tokenizer.decode(prompt[-8:], skip_special=False)
    return tail.rstrip().endswith("<think>")


class ModalJob(Protocol):
    """A modality request: ``pipeline/modalities.py``'s Embed, Rerank, Transcribe ...
    (its class name, lowercased, is its route label in metrics)."""

    @property
    def model(self) -> str: ...

    @property
    def traceparent(self) -> str: ...

    @property
    def capability(self) -> Capability: ...

    def build(self, text: ModelText, info: ModelInfo) -> tuple[ModalQuery, int]: ...


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
        self.admission = Admission(cfg.limits.max_queue, self._limit)
        self.deadlines = DeadlineWheel()
        self.draining = False  # new requests are refused; those in flight go on
        self.closing = False  # the requests in flight are being ended (shutdown)
        # Requests at the engine (Generation, ModalCall), for a shutdown to end them.
        self._live: set[Generation | ModalCall] = set()
        self.started = 0
        self.finished: dict[str, int] = {}
        self.counters = Counters()  # events beside requests, shown in app_state
        self.keys = KeyRing(cfg.auth.keys, bool(cfg.admin.address), self.counters)

    def swap(self, cfg: Config, engines: EngineClient, texts: ModelTexts) -> None:
        """A reload: requests from now on use these; those in flight keep theirs."""
        self.cfg = cfg
        self.engines = engines
        self.texts = texts
        self.admission.max_queue = cfg.limits.max_queue
        self.admission.wake()

    def _limit(self) -> int:
        return self.cfg.limits.max_inflight or self.engines.capacity()

    @property
    def capacity(self) -> int:
        """Requests admitted at once before new ones queue."""
        return self._limit()

    @property
    def inflight(self) -> int:
        return self.admission.inflight

    # ------------------------------------------------------------------ public

    async def start(
        self,
        req: GenerateRequest,
        on_queued: Callable[[], Awaitable[None]] | None = None,
    ) -> Generation:
        """Validate, tokenize, queue and submit ``req``; returns its live generation.

        ``on_queued`` is awaited when the request has to wait for an engine slot
        (after every validation), so a streaming front end can open its stream.
        """
        lifecycle = Lifecycle()
        self.started += 1
        admitted = False
        counted = False  # its key counts it in flight
        route = req.route or req.kind
        obs = Observed(req.protocol, route, req.received_ns or lifecycle.times[State.START])
        traceparent = req.traceparent
        if self.observe.tracer is not None:
            traceparent = self.observe.begin(
                obs, req.model, _OPERATIONS[req.kind], traceparent, _request_attrs(req)
            )
        try:
            if self.draining:
                raise _shutting_down()
            self.keys.admit(req.principal, req.model, req.n)
            counted = True
            timeout = req.timeout_s or self.cfg.limits.request_timeout_s
            deadline = time.monotonic() + timeout
            if req.model not in self.engines.models():  # a managed engine may be restarting
                await self.engines.wait_for(req.model, timeout)
            info = self._model_info(req.model)
            text = await self._model_text(req, info)
            prompt = await self._prompt_ids(req, text, info.context_length, obs)
            sampling = self._sampling(req, text, info, len(prompt))
            query = TextQuery(
                model=req.model,
                prompt_tokens=prompt,
                sampling=sampling,
                deadline_ms=int(1000 * timeout),
                traceparent=traceparent,
                images=req.images,
                guided=tool_guided(req),
            )
            lifecycle.advance(State.QUEUED)
            await self._admit(max(0.001, deadline - time.monotonic()), on_queued)
            admitted = True
            if req.model not in self.engines.models():  # its engine died while it queued
                await self.engines.wait_for(req.model, max(0.001, deadline - time.monotonic()))
            lifecycle.advance(State.PROCESSING)
            parser = self._output_parser(req, text, prompt)
            gen = Generation(
                request_id=req.request_id,
                model=req.model,
                stream=TextStream(
                    text.tokenizer,
                    req.stop,
                    text.stop_token_ids,
                    req.include_stop_str_in_output,
                    skip_special=parser is None,
                    reported_ids=frozenset(req.stop_token_ids),
                ),
                prompt_tokens=len(prompt),
                lifecycle=lifecycle,
                on_done=self._done,
                logprobs=LogprobRecorder(text.tokenizer, req.top_logprobs)
                if req.logprobs
                else None,
                keep_logprobs=not req.stream,
                validator=req.validator,
                parser=parser,
                defer=_on_a_thread,
            )
            gen.obs = obs
            if req.echo:
                gen.echo = (
                    req.prompt if isinstance(req.prompt, str) else text.tokenizer.decode(prompt)
                )
            submission = self._submit(query, gen, req.principal)
            gen.attach(submission, max(0.001, deadline - time.monotonic()), self.deadlines)
            return gen
        except BaseException as exc:  # (no local may hold the error: see _abort)
            raise self._abort(
                req.request_id, req.model, lifecycle, admitted, exc, req.principal, counted, obs
            ) from None

    async def count_prompt(self, req: GenerateRequest) -> int:
        """The number of tokens of ``req``'s prompt, templated and tokenized as
        :meth:`start` does it (no engine is asked; the key must allow the model)."""
        if self.draining:
            raise _shutting_down()
        principal = req.principal
        if principal is not None and not principal.allows(req.model):
            raise NeutrinoError(
                ErrorKind.PERMISSION_DENIED,
                f"this API key may not use the model {req.model[:128]!r}",
                param="model",
                code="model_not_allowed",
            )
        info = self._model_info(req.model)
        text = await self._model_text(req, info)
        obs = Observed(req.protocol, req.route or req.kind, 0)
        return len(await self._prompt_ids(req, text, info.context_length, obs))

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
        model, capability, build = job.model, job.capability, job.build
        lifecycle = Lifecycle()
        self.started += 1
        admitted = False
        counted = False
        timeout = timeout_s or self.cfg.limits.request_timeout_s
        route = type(job).__name__.lower()
        obs = Observed(protocol, route, received_ns or lifecycle.times[State.START])
        traceparent = job.traceparent
        if self.observe.tracer is not None:
            traceparent = self.observe.begin(
                obs,
                model,
                _OPERATIONS.get(route, route),
                traceparent,
                {"neutrino.request_id": request_id},
            )
        try:
            if self.draining:
                raise _shutting_down()
            self.keys.admit(principal, model)
            counted = True
            info = self._capable(model, capability)
            text = self.texts.cached(model)
            if text is None:
                text = await asyncio.to_thread(self.texts.get, model, info.can(Capability.GENERATE))
            query, prompt_tokens = build(text, info)
            if traceparent != query.traceparent:  # the request's own span id, for the engine
                query = dataclasses.replace(query, traceparent=traceparent)
            lifecycle.advance(State.QUEUED)
            deadline = time.monotonic() + timeout
            await self._admit(timeout, on_queued)
            admitted = True
            lifecycle.advance(State.PROCESSING)
            call = ModalCall(
                request_id=request_id,
                model=model,
                prompt_tokens=prompt_tokens,
                lifecycle=lifecycle,
                on_done=self._done,
            )
            call.obs = obs
            call.attach(
                self._submit(query, call, principal),
                max(0.001, deadline - time.monotonic()),
                self.deadlines,
            )
            return call
        except BaseException as exc:
            raise self._abort(
                request_id, model, lifecycle, admitted, exc, principal, counted, obs
            ) from None

    def _submit(
        self, query: Query, sink: Generation | ModalCall, principal: Principal | None
    ) -> Submission:
        """Send ``query``; ``sink`` is live (a shutdown ends it) and, once it ends,
        releases its key's count (``_done``)."""
        sink.principal = principal
        self._live.add(sink)
        try:
            return self.engines.submit(query, sink)
        except BaseException:
            self._live.discard(sink)
            raise

    def _output_parser(
        self, req: GenerateRequest, text: ModelText, prompt: list[int]
    ) -> OutputParser | None:
        """Reasoning/tool-call splitting for a chat response, if the family has parsers."""
        if req.kind != "chat":
            return None
        family = text.family
        choice = req.tool_choice
        tools = family.tool_parser if req.tools and choice.mode != "none" else None
        forced: ForcedToolParser | None = None
        id_prefix: CallIds = f"call_{req.request_id.rpartition('-')[2]}_"
        if family.tool_call_ids == "alnum9":  # the template accepts only such ids
            id_prefix = alnum9_ids(req.request_id)
        if choice.forced:
            forced = ForcedToolParser(tools=req.tools, id_prefix=id_prefix, name=choice.name)
        if family.reasoning_parser is None and tools is None and forced is None:
            return None
        tokenizer = text.tokenizer
        return OutputParser(
            reasoning=family.reasoning_parser,
            tools=tools,
            offered_tools=req.tools,
            reasoning_format=req.reasoning_format,
            starts_in_reasoning=family.reasoning_parser is not None and _opens_think(text, prompt),
            id_prefix=id_prefix,
            token_count=lambda s: len(tokenizer.encode(s)),
            parallel_tool_calls=req.parallel_tool_calls,
            forced=forced,
        )

    async def _admit(self, timeout: float, on_queued: Callable[[], Awaitable[None]] | None) -> None:
        """Take an engine slot, waiting in the bounded FIFO queue if needed."""
        if self.closing:
            raise _shutting_down()
        if self.admission.try_acquire():
            return
        if self.admission.full:
            raise NeutrinoError(ErrorKind.QUEUE_FULL, "the server is at capacity; retry later")
        if on_queued is not None:
            await on_queued()
        try:
            async with asyncio.timeout(timeout):
                await self.admission.acquire()
        except TimeoutError:
            raise NeutrinoError(
                ErrorKind.TIMEOUT, "the request timed out waiting in the queue"
            ) from None
        if self.closing:  # handed a slot just before the shutdown ended the queue
            self.admission.release()
            raise _shutting_down()

    def _abort(
        self,
        request_id: str,
        model: str,
        lifecycle: Lifecycle,
        admitted: bool,
        exc: BaseException,
        caller: Principal | None = None,
        counted: bool = False,
        obs: Observed | None = None,
    ) -> BaseException:
        """End a request that failed before reaching the engine; the exception to raise.

        The caller raises it straight from its ``except`` clause: bound to a local, the
        error would hold the caller's frame (its traceback does), and the frame the
        request, in a cycle only the garbage collector's full pass would free."""
        if admitted and not lifecycle.terminal:
            self.admission.release()
        if counted and caller is not None and not lifecycle.terminal:
            caller.release()
        key = caller.name if caller is not None else None
        if isinstance(exc, NeutrinoError):
            self._fail_early(request_id, model, lifecycle, State.FAILED, exc, key, obs)
            return exc
        if isinstance(exc, asyncio.CancelledError | ConnectionError):
            # The client went away (its handler was cancelled, or opening its stream failed).
            self._fail_early(request_id, model, lifecycle, State.CANCELLED, None, key, obs)
            return exc
        if not isinstance(exc, Exception):
            return exc  # KeyboardInterrupt and the like pass through untouched
        log.error("request %s failed before reaching the engine", request_id, exc_info=exc)
        err = NeutrinoError(ErrorKind.INTERNAL, "internal error")
        self._fail_early(request_id, model, lifecycle, State.FAILED, err, key, obs)
        return err

    def shutdown(self) -> int:
        """End every request still queued or at an engine (the shutdown's grace ran out):
        each gets SHUTTING_DOWN, as its front end renders a failure (an SSE error event
        and [DONE], a 503, gRPC UNAVAILABLE), and the engine one cancel, reason
        "shutdown". Returns how many were ended."""
        self.draining = self.closing = True
        ended = self.admission.fail_waiters(_shutting_down())
        for live in list(self._live):
            live.abort(_shutting_down(), "shutdown")
            ended += 1
        return ended

    # ------------------------------------------------------------------ steps

    def _capable(self, model: str, capability: Capability) -> ModelInfo:
        """The model's engine info, if it is served and can do ``capability``."""
        info = self.engines.models().get(model)
        if info is None:
            return self._model_info(model)  # raises: no engine, or no such model
        if not info.can(capability):
            raise NeutrinoError(
                ErrorKind.BAD_REQUEST,
                f"the model {model!r} does not support {capability.name.lower()}",
                param="model",
            )
        return info

    def _model_info(self, model: str) -> ModelInfo:
        info = self.engines.models().get(model)
        if info is not None:
            if not info.can(Capability.GENERATE):
                raise NeutrinoError(
                    ErrorKind.BAD_REQUEST,
                    f"the model {model!r} does not generate text",
                    param="model",
                )
            return info
        if not self.engines.has_engine():
            raise NeutrinoError(ErrorKind.NO_ENGINE, "no inference engine is connected")
        raise NeutrinoError(
            ErrorKind.MODEL_NOT_FOUND, f"the model {model!r} does not exist", param="model"
        )

    async def _model_text(self, req: GenerateRequest, info: ModelInfo) -> ModelText:
        """The served model's text layer (its template and tokenizer) for ``req``."""
        if req.images and not info.can(Capability.VISION):
            raise NeutrinoError(
                ErrorKind.BAD_REQUEST,
                f"the model {req.model!r} does not accept images",
                param="messages",
            )
        text = self.texts.cached(req.model)
        if text is None:
            text = await asyncio.to_thread(self.texts.get, req.model)
        return text

    async def _prompt_ids(
        self, req: GenerateRequest, text: ModelText, ctx: int, obs: Observed
    ) -> list[int]:
        tok = text.tokenizer
        obs.mark("parsed")
        if req.kind == "chat":
            assert req.messages is not None
            messages = req.messages
            over = await _over_before_rendering(messages, text, ctx)
            if over is not None:
                raise _context_error(ctx, f"at least {over}", "messages")
            if req.images:
                messages = images_for_template(messages, text.family)
            try:
                rendered = text.template.render(
                    messages,
                    add_generation_prompt=req.add_generation_prompt,
                    tools=req.tools,
                    **req.template_kwargs,
                )
            except TemplateError as exc:
                param = exc.param or "messages"
                raise NeutrinoError(ErrorKind.BAD_REQUEST, str(exc), param=param) from None
            obs.mark("templated")
            ids = await self._encode(rendered, text, ctx, "messages")
            obs.mark("tokenized")
            return ids
        prompt = req.prompt
        if isinstance(prompt, list):
            vocab = tok.vocab_size
            if any(t >= vocab for t in prompt):
                raise NeutrinoError(
                    ErrorKind.BAD_REQUEST,
                    f"prompt token ids must be below the vocabulary size {vocab}",
                    param="prompt",
                )
            return list(prompt)
        assert prompt is not None
        obs.mark("templated")
        ids = await self._encode(prompt, text, ctx, "prompt")
        obs.mark("tokenized")
        if text.bos_token_id is not None and (not ids or ids[0] != text.bos_token_id):
            ids.insert(0, text.bos_token_id)
        return ids

    async def _encode(self, s: str, text: ModelText, ctx: int, param: str) -> list[int]:
        if len(s) > self.cfg.tokenizer.offload_chars:
            # The thread returns the refusal rather than raising it: an exception that
            # crosses a future is held in a reference cycle (future, traceback, frames)
            # with every local of those frames, the rendered prompt among them, until the
            # garbage collector's next full pass.
            ids = await asyncio.to_thread(_encode_within, text, s, ctx)
        else:
            ids = _encode_within(text, s, ctx)
        if isinstance(ids, int):
            raise _context_error(ctx, f"at least {ids}", param)
        return ids

    def _sampling(
        self, req: GenerateRequest, text: ModelText, info: ModelInfo, n_prompt: int
    ) -> Sampling:
        ctx = info.context_length
        param = "messages" if req.kind == "chat" else "prompt"
        if n_prompt == 0:
            raise NeutrinoError(ErrorKind.BAD_REQUEST, "the prompt is empty", param=param)
        if ctx and n_prompt >= ctx:
            raise _context_error(ctx, str(n_prompt), param)
        room = ctx - n_prompt if ctx else 1 << 31
        if info.max_output_tokens:
            room = min(room, info.max_output_tokens)
        if req.logit_bias:
            _check_bias(req.logit_bias, text.tokenizer.vocab_size)
        max_tokens = req.max_tokens
        if max_tokens is None:
            max_tokens = room
            if not req.stream:  # within the answer's budget (_check_budget)
                budget = self.cfg.limits.max_unstreamed_tokens
                max_tokens = max(1, min(room, budget // _figures_per_token(req)))
        elif not req.stream:
            self._check_budget(req, max_tokens)
        if max_tokens > room:
            raise NeutrinoError(
                ErrorKind.CONTEXT_LENGTH,
                f"this model's maximum context length is {ctx} tokens; the prompt has "
                f"{n_prompt} tokens and {max_tokens} were requested for the completion",
                param="max_tokens",
            )
        stop_ids = [] if req.ignore_eos else sorted(text.stop_token_ids)
        stop_ids += [t for t in req.stop_token_ids if t not in text.stop_token_ids]
        return Sampling(
            max_tokens=max_tokens,
            temperature=req.temperature,
            top_p=req.top_p,
            top_k=req.top_k,
            min_p=req.min_p,
            seed=req.seed,
            stop_token_ids=stop_ids,
            presence_penalty=req.presence_penalty,
            frequency_penalty=req.frequency_penalty,
            repetition_penalty=req.repetition_penalty,
            ignore_eos=req.ignore_eos,
            min_tokens=req.min_tokens,
            logprobs=req.logprobs,
            top_logprobs=req.top_logprobs,
        )

    def _check_budget(self, req: GenerateRequest, max_tokens: int) -> None:
        """A non-streamed answer is built whole: n * max_tokens * (1 + top_logprobs)
        tokens and alternatives at most (a stream is paced by its client)."""
        per_token = _figures_per_token(req)
        cost, budget = max_tokens * per_token, self.cfg.limits.max_unstreamed_tokens
        if cost > budget:
            k = per_token // req.n
            raise NeutrinoError(
                ErrorKind.BAD_REQUEST,
                f"a non-streamed answer of n * max_tokens * (1 + top_logprobs) = {req.n} * "
                f"{max_tokens} * {k} = {cost:,} exceeds this server's {budget:,}; "
                "stream it, or ask for fewer tokens",
                param="max_tokens",
            )

    # ------------------------------------------------------------------ endings

    def _count(self, state: State) -> None:
        self.finished[state.value] = self.finished.get(state.value, 0) + 1

    def _done(self, gen: Generation | ModalCall) -> None:
        self._live.discard(gen)
        if gen.principal is not None:
            gen.principal.release()
        self.admission.release()
        self._count(gen.lifecycle.state)
        if gen.obs is not None:
            self.observe.end(gen.obs, gen.model, gen.lifecycle, gen.error, gen.usage(), gen)
        entry = gen.history_entry()
        if gen.principal is not None:
            entry.key = gen.principal.name
        self.history.add(entry)

    def _fail_early(
        self,
        request_id: str,
        model: str,
        lifecycle: Lifecycle,
        state: State,
        err: NeutrinoError | None,
        key: str | None = None,
        obs: Observed | None = None,
    ) -> None:
        if lifecycle.terminal:
            return
        lifecycle.advance(state)
        self._count(state)
        if err is not None:
            err.counted = True
        if obs is not None:
            self.observe.end(obs, model, lifecycle, err)
        entry = HistoryEntry.of(request_id, model, lifecycle, error=err)
        entry.key = key
        self.history.add(entry)
