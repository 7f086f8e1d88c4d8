"""One request in flight: engine results in, text deltas pushed out.

:class:`Generation` is the engine sink of one request: it owns the lifecycle, the
timeout and the single cancel to the engine, turns results into text through its
:class:`~neutrino.pipeline.text_stream.TextStream` (and output parser), and pushes
what a batch of engine frames produced to its :class:`PushTarget` in one call per
batch, synchronously from the engine connection's read. Push is the only delivery
API; ``pipeline/pull.py`` adapts it for consumers whose writes must be awaited.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from time import monotonic_ns
from typing import Protocol

from neutrino.engine.client import Submission, sink_failure
from neutrino.engine.messages import FinishReason, ModalResult, TextResult
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.observability.metrics import Gaps
from neutrino.pipeline.admission import OPEN, Ticket
from neutrino.pipeline.auth import Principal
from neutrino.pipeline.deadlines import Deadline, DeadlineWheel
from neutrino.pipeline.history import HistoryEntry
from neutrino.pipeline.logprobs import LogprobColumns, LogprobRecorder, TokenLogprob
from neutrino.pipeline.observe import AttrValue, Observed
from neutrino.pipeline.output import OutputParser
from neutrino.pipeline.state import Lifecycle, State
from neutrino.pipeline.text_stream import TextStream
from neutrino.text.parsers import Delta, ToolCall, ToolCallDelta

log = logging.getLogger("neutrino.pipeline")

# Runs a piece of work elsewhere (a worker thread) and hands its result to the callback,
# later, on the event loop; a generation stays sans-IO and is only given one.
Defer = Callable[[Callable[[], "str | None"], Callable[["str | None"], None]], None]
# A strict format's check of an answer this long or shorter runs at once; a longer
# answer's is deferred.
INLINE_CHECK_CHARS = 4096


@dataclass(slots=True)
class Outcome:
    """How a finished generation ended, and what it cost (``logprobs``: every reported
    token's entry, when they were asked for)."""

    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    engine_timings: dict[str, float] = field(default_factory=dict)
    stop_reason: str | int | None = None
    logprobs: LogprobColumns | None = None
    reasoning: str | None = None  # the split-off reasoning, when the response was parsed
    reasoning_tokens: int | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)


class PushTarget(Protocol):
    """Where a generation delivers its output (called synchronously)."""

    def on_text(self, text: str, tokens: int, logprobs: list[TokenLogprob] | None) -> None:
        """New text (may be empty when only logprobs are new)."""
        ...

    def on_parts(self, reasoning: str, tool_calls: list[ToolCallDelta]) -> None:
        """New reasoning text and/or tool-call deltas (parsed responses only)."""
        ...

    def on_end(self, gen: Generation) -> None:
        """The generation ended: read ``gen.outcome`` or ``gen.error``."""
        ...


class Generation:
    """The engine sink of one request, pushing its output to one target."""

    __slots__ = (
        "_all_lp",
        "_cached",
        "_defer",
        "_error",
        "_gaps",
        "_on_done",
        "_outcome",
        "_parser",
        "_pending",
        "_pending_calls",
        "_pending_lp",
        "_pending_reasoning",
        "_pending_tokens",
        "_push",
        "_recorder",
        "_stream",
        "_submission",
        "_text",
        "_timer",
        "_validator",
        "created",
        "echo",
        "engine_cancels",
        "hops",
        "lifecycle",
        "model",
        "obs",
        "principal",
        "prompt_tokens",
        "request_id",
        "route",
        "ticket",
    )

    def __init__(
        self,
        *,
        request_id: str,
        model: str,
        stream: TextStream,
        prompt_tokens: int,
        lifecycle: Lifecycle,
        on_done: Callable[[Generation], None],
        logprobs: LogprobRecorder | None = None,
        keep_logprobs: bool = True,
        validator: Callable[[str], str | None] | None = None,
        parser: OutputParser | None = None,
        defer: Defer | None = None,
    ) -> None:
        self.request_id = request_id
        self.model = model
        self.created = int(lifecycle.created_wall)
        self.lifecycle = lifecycle
        self.prompt_tokens = prompt_tokens
        self.echo = ""  # text that precedes the completion in the answer (``echo``)
        self.engine_cancels = 0
        # Where its answer went on after its engine was lost, failed or drained, and why
        # (at most [routing] migration_limit).
        self.hops: list[tuple[str, str]] | None = None
        self.principal: Principal | None = None  # the API key it counts against
        self.ticket: Ticket = OPEN  # its place in the fair shares and its key's limits
        self.obs: Observed | None = None  # its labels and span, for metrics and tracing
        self.route = ""  # how a manifest route sent it here (pipeline/routes.py Hop)
        self._stream = stream
        self._on_done = on_done
        self._parser = parser
        # Checks the whole text at the end (strict response formats); keeps a copy for it.
        self._validator = validator
        self._defer = defer
        self._text: list[str] = []
        self._recorder = logprobs
        # Every token's entry, for a response rendered whole at the end (a stream sends
        # them as they come: keeping them all would grow with every token it streams).
        self._all_lp = LogprobColumns(logprobs) if logprobs is not None and keep_logprobs else None
        # What the current batch of engine frames produced, until the next flush.
        self._pending: list[str] = []
        self._gaps: Gaps | None = None  # from its first delivery of tokens on
        self._pending_tokens = 0
        self._pending_lp: list[TokenLogprob] = []
        self._pending_reasoning: list[str] = []
        self._pending_calls: list[ToolCallDelta] = []
        self._outcome: Outcome | None = None
        self._error: NeutrinoError | None = None
        self._submission: Submission | None = None
        self._timer: Deadline | None = None
        self._cached = 0
        self._push: PushTarget | None = None

    # ---------------------------------------------------------------- setup

    def attach(
        self, submission: Submission, timeout_s: float | None, deadlines: DeadlineWheel
    ) -> None:
        self._submission = submission
        if timeout_s and not self.lifecycle.terminal:
            self._timer = deadlines.call_later(timeout_s, self._on_timeout)

    def push_to(self, target: PushTarget) -> None:
        """Deliver to ``target`` from now on (what came before is delivered at once)."""
        self._push = target
        self.flush()

    # ---------------------------------------------------------------- engine side

    def on_tokens(self, tokens: list[int]) -> bool:
        """Take a mid-stream result of only token ids (the per-token path); True asks
        for ``flush`` once the current batch of frames is handled."""
        lc = self.lifecycle
        if lc.state is not State.GENERATING:
            if lc.state is not State.PROCESSING or not tokens:
                return False
            lc.advance(State.GENERATING)
        gaps = self._gaps
        if gaps is None:
            self._gaps = Gaps(monotonic_ns())
        elif tokens:
            gaps.add(monotonic_ns())
        s = self._stream
        text = s.feed_tokens(tokens)
        self._pending_tokens += len(tokens)
        if text:
            self._add_text(text)
        if s.finish_reason is not None:  # a stop string matched: the text is complete
            return self._complete(None)
        return bool(self._pending or self._pending_reasoning or self._pending_calls)

    def on_result(self, result: TextResult) -> bool:
        """Take one engine result; True asks for ``flush`` after this batch of frames."""
        if self.lifecycle.terminal:
            return False
        if self.lifecycle.state is State.PROCESSING and result.tokens:
            self.lifecycle.advance(State.GENERATING)
        if result.tokens:
            gaps = self._gaps
            if gaps is None:
                self._gaps = Gaps(monotonic_ns())
            else:
                gaps.add(monotonic_ns())
        s = self._stream
        text = s.feed(result)
        if text:
            self._add_text(text)
        self._pending_tokens += len(result.tokens)
        kept = self._all_lp
        if self._recorder is not None and result.logprobs:
            if kept is not None:  # an answer rendered whole at the end: kept compactly
                kept.add(result, s.shown)
            else:  # a stream: entries for the next push
                self._pending_lp += self._recorder.entries(result, s.shown)
        if s.finish_reason is not None:
            if s.hidden_before and kept is not None:
                # Cut inside a character begun in earlier frames: their tokens' entries
                # go too (a stream has sent them already).
                kept.drop(s.hidden_before)
            return self._complete(result)
        return bool(
            self._pending or self._pending_lp or self._pending_reasoning or self._pending_calls
        )

    def on_modal(self, result: ModalResult) -> None:
        raise NeutrinoError(ErrorKind.ENGINE_ERROR, "the engine answered a text query wrongly")

    def on_moved(self, engine: str, reason: str) -> None:
        """Its answer goes on on ``engine``: nothing changes for the client."""
        hops = self.hops
        if hops is None:
            hops = self.hops = []
        hops.append((engine, reason))

    def on_error(self, error: NeutrinoError) -> None:
        if self.lifecycle.terminal:
            return
        self._error = error
        self._finish(State.FAILED)
        self.flush()

    def _add_text(self, text: str) -> None:
        if self._parser is not None:
            self._take_delta(self._parser.feed(text))
            return
        self._pending.append(text)
        if self._validator is not None:
            self._text.append(text)

    def _complete(self, result: TextResult | None) -> bool:
        """The text is complete: the engine's final ``result``, or a stop string (None,
        or a mid-stream result), after which the engine is told to stop."""
        if result is None or result.finish_reason is FinishReason.NONE:
            self._cancel_engine("stop string")
        else:
            self._cached = result.cached_tokens
            if result.prompt_tokens:
                self.prompt_tokens = result.prompt_tokens
        finish = self._stream.finish_reason or "stop"
        parser = self._parser
        if parser is not None:
            self._take_delta(parser.finish())
            if parser.calls and finish == "stop":
                finish = "tool_calls"
        # Only an answer the model finished can break the format: one cut by max_tokens
        # is a 200 with finish_reason "length" (SDKs raise their own length error for
        # it; a 5xx would make them retry in vain).
        check = self._validator if finish == "stop" else None
        if check is None:
            return self._completed(result, finish, None)
        text = "".join(self._text)
        defer = self._defer
        if defer is None or len(text) <= INLINE_CHECK_CHARS:
            return self._completed(result, finish, check(text))
        # A long answer is checked elsewhere (jsonschema is pure Python): the request ends
        # when the check comes back, unless something ended it meanwhile.
        defer(lambda: check(text), lambda problem: self._checked(result, finish, problem))
        return False

    def _checked(self, result: TextResult | None, finish: str, problem: str | None) -> None:
        if not self.lifecycle.terminal:
            self._completed(result, finish, problem)
            self.flush()

    def _completed(self, result: TextResult | None, finish: str, problem: str | None) -> bool:
        if problem is not None:
            self.on_error(
                NeutrinoError(
                    ErrorKind.ENGINE_ERROR,
                    f"the engine broke the requested response format: {problem}",
                    code="response_format_violated",
                )
            )
            return False
        self.lifecycle.advance(State.COMPLETE)
        self._outcome = self._outcome_of(result, finish)
        self._ended()
        return True

    def _outcome_of(self, result: TextResult | None, finish: str) -> Outcome:
        s = self._stream
        parser = self._parser
        completion = s.completion_tokens
        final = result is not None and result.finish_reason is not FinishReason.NONE
        if final and result is not None and result.completion_tokens:
            completion = max(completion, result.completion_tokens)
        return Outcome(
            finish_reason=finish,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=completion,
            cached_tokens=self._cached,
            timings=self.lifecycle.timings(),
            engine_timings={
                "queue": result.queue_ns / 1e9 if result else 0.0,
                "prefill": result.prefill_ns / 1e9 if result else 0.0,
                "decode": result.decode_ns / 1e9 if result else 0.0,
            },
            stop_reason=s.stop_reason,
            logprobs=self._all_lp,
            reasoning=parser.reasoning() if parser is not None else None,
            reasoning_tokens=parser.reasoning_tokens() if parser is not None else None,
            tool_calls=parser.calls if parser is not None else [],
        )

    def _take_delta(self, delta: Delta) -> None:
        if delta.content:
            self._pending.append(delta.content)
            if self._validator is not None:
                self._text.append(delta.content)
        if delta.reasoning:
            self._pending_reasoning.append(delta.reasoning)
        if delta.tool_calls:
            self._pending_calls += delta.tool_calls

    # ---------------------------------------------------------------- delivery

    def flush(self) -> None:
        """Push what the batch produced to the target; its end, once there is one."""
        target = self._push
        if target is None:
            return
        try:
            if self._pending_reasoning or self._pending_calls:
                reasoning = "".join(self._pending_reasoning)
                self._pending_reasoning.clear()
                calls, self._pending_calls = self._pending_calls, []
                target.on_parts(reasoning, calls)
            if self._pending or self._pending_lp:
                target.on_text(*self._take())
        except Exception as exc:
            self._undeliverable(exc)
        if self._error is not None or self._outcome is not None:
            self._push = None
            try:
                target.on_end(self)
            except Exception:
                log.exception("request %s: ending its answer failed", self.request_id)

    def _take(self) -> tuple[str, int, list[TokenLogprob] | None]:
        pending = self._pending
        text = pending[0] if len(pending) == 1 else "".join(pending)
        pending.clear()
        n, self._pending_tokens = self._pending_tokens, 0
        lps: list[TokenLogprob] | None = None
        if self._recorder is not None:
            lps, self._pending_lp = self._pending_lp, []
        return text, n, lps

    def _undeliverable(self, exc: Exception) -> None:
        """Output the client cannot be given (a rendering bug): the answer ends with the
        error, and the engine, if still generating, is told to stop."""
        self._pending.clear()
        self._pending_lp.clear()
        self._pending_reasoning.clear()
        self._pending_calls.clear()
        error = sink_failure(exc)
        if not self.lifecycle.terminal:
            self._cancel_engine("output rejected")
            self._error = error
            self._finish(State.FAILED)
        else:  # complete in history, but the client gets the error, not a partial answer
            self._error = error

    @property
    def outcome(self) -> Outcome | None:
        return self._outcome

    @property
    def error(self) -> NeutrinoError | None:
        return self._error

    # ---------------------------------------------------------------- endings

    def close(self, reason: str = "client disconnected") -> None:
        """End the request from the client side: one cancel to the engine if still running."""
        if self.lifecycle.terminal:
            return
        self._cancel_engine(reason)
        self._error = NeutrinoError(ErrorKind.CANCELLED, "the request was cancelled")
        self._finish(State.CANCELLED)
        self.flush()

    def abort(self, error: NeutrinoError, reason: str) -> None:
        """End the request from the server's side (its deadline, a shutdown): one cancel
        to the engine with ``reason`` if it is still generating; the client gets ``error``
        as any failed request's (a stream's error event, a status)."""
        if self.lifecycle.terminal:
            return
        self._cancel_engine(reason)
        self._error = error
        self._finish(State.FAILED)
        self.flush()

    def _cancel_engine(self, reason: str) -> None:
        sub = self._submission
        if sub is not None and sub.cancel(reason):
            self.engine_cancels += 1

    def _on_timeout(self) -> None:
        self._timer = None
        self.abort(NeutrinoError(ErrorKind.TIMEOUT, "the request timed out"), "timeout")

    def _finish(self, state: State) -> None:
        self.lifecycle.advance(state)
        self._ended()

    def _ended(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._submission is not None:
            self._submission.forget()
        self._on_done(self)

    def gaps(self) -> Gaps | None:
        """The gaps between its deliveries of tokens (None: it had fewer than two)."""
        gaps = self._gaps
        return gaps if gaps is not None and any(gaps.counts) else None

    def usage(self) -> tuple[int, int, int, int]:
        """Its prompt, generated, cached and reasoning tokens (read once it has ended)."""
        out = self._outcome
        if out is None:
            return (self.prompt_tokens, self._stream.completion_tokens, 0, 0)
        return (out.prompt_tokens, out.completion_tokens, out.cached_tokens,
                out.reasoning_tokens or 0)  # fmt: skip

    def span_attributes(self) -> dict[str, AttrValue]:
        """Its span's response attributes (only a traced request is asked)."""
        attrs: dict[str, AttrValue] = {
            "gen_ai.response.id": self.request_id,
            "gen_ai.response.model": self.model,
        }
        if self._outcome is not None:
            attrs["gen_ai.response.finish_reasons"] = [self._outcome.finish_reason]
        if self.route:
            attrs["neutrino.route"] = self.route
        if self.hops:
            attrs["neutrino.migrations"] = len(self.hops)
            attrs["neutrino.migrated_to"] = [f"{e} ({why})" for e, why in self.hops]
        return attrs

    def history_entry(self) -> HistoryEntry:
        """This request's history entry (call once terminal)."""
        out = self._outcome
        entry = HistoryEntry.of(
            self.request_id,
            self.model,
            self.lifecycle,
            self.prompt_tokens,
            out.completion_tokens if out else self._stream.completion_tokens,
            out.finish_reason if out else None,
            self._error,
        )
        if self.route:
            entry.route = self.route
        if self.hops:
            entry.hops = [f"{e} ({why})" for e, why in self.hops]
        return entry
