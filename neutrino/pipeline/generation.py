"""One choice in flight: the thin handle between its engine and its answer.

:class:`Generation` is the engine sink of one choice: it owns the lifecycle, the
deadline, the single cancel to the engine and the gaps between deliveries (the clock),
hands the engine's results to its sans-IO :class:`~neutrino.pipeline.assembler.Assembler`
and pushes what a batch of engine frames produced to its :class:`PushTarget` in one call
per batch, synchronously from the engine connection's read. Push is the only delivery
API; ``pipeline/pull.py`` adapts it for consumers whose writes must be awaited.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Callable
from time import monotonic_ns
from typing import Protocol

from neutrino.engine.client import Submission, sink_failure
from neutrino.engine.messages import FinishReason, ModalResult, TextResult
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.observability.metrics import ITL_NS, Gaps
from neutrino.pipeline.admission import OPEN, Ticket
from neutrino.pipeline.assembler import COMPLETE, PENDING, Assembler, Outcome
from neutrino.pipeline.auth import Principal
from neutrino.pipeline.deadlines import Deadline, DeadlineWheel
from neutrino.pipeline.history import Spent
from neutrino.pipeline.logprobs import TokenLogprob
from neutrino.pipeline.observe import Observed
from neutrino.pipeline.state import Lifecycle, State
from neutrino.text.parsers import ToolCallDelta

log = logging.getLogger("neutrino.pipeline")

# Runs a piece of work elsewhere (a worker thread) and hands its result to the callback,
# later, on the event loop; a generation stays sans-IO and is only given one.
Defer = Callable[[Callable[[], "str | None"], Callable[["str | None"], None]], None]
# A strict format's check of an answer this long or shorter runs at once; a longer
# answer's is deferred.
INLINE_CHECK_CHARS = 4096


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
    """The in-flight handle of one choice: its engine sink, lifecycle, deadline, cancel
    and delivery; its answer is made by its :class:`Assembler`."""

    __slots__ = (
        "_asm",
        "_defer",
        "_gaps",
        "_on_done",
        "_push",
        "_submission",
        "_timer",
        "created",
        "echo",
        "engine_cancels",
        "error",
        "hops",
        "lifecycle",
        "model",
        "obs",
        "outcome",
        "principal",
        "request_id",
        "route",
        "ticket",
    )

    def __init__(
        self,
        *,
        request_id: str,
        model: str,
        assembler: Assembler,
        lifecycle: Lifecycle,
        on_done: Callable[[Generation], None],
        defer: Defer | None = None,
    ) -> None:
        self.request_id = request_id
        self.model = model
        self.created = int(lifecycle.created_wall)
        self.lifecycle = lifecycle
        self.echo = ""  # text that precedes the completion in the answer (``echo``)
        self.engine_cancels = 0
        # Where its answer went on after its engine was lost, failed or drained, and why
        # (at most [routing] migration_limit).
        self.hops: list[tuple[str, str]] | None = None
        self.principal: Principal | None = None  # the API key it counts against
        self.ticket: Ticket = OPEN  # its place in the fair shares and its key's limits
        self.obs: Observed | None = None  # its labels and span, for metrics and tracing
        self.route = ""  # how a manifest route sent it here (pipeline/routes.py Hop)
        self._asm = assembler
        self._on_done = on_done
        self._defer = defer
        self._gaps: Gaps | None = None  # from its first delivery of tokens on
        # Its end, once it has one (read them; only the generation sets them).
        self.outcome: Outcome | None = None
        self.error: NeutrinoError | None = None
        self._submission: Submission | None = None
        self._timer: Deadline | None = None
        self._push: PushTarget | None = None

    @property
    def prompt_tokens(self) -> int:
        return self._asm.prompt_tokens

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
        elif tokens:  # Gaps.add, inline on the per-token path
            now = monotonic_ns()
            gap = now - gaps.last
            gaps.last = now
            gaps.counts[bisect_left(ITL_NS, gap)] += 1
            gaps.total += gap
        step = self._asm.tokens(tokens)
        if step == COMPLETE:  # a stop string matched: the text is complete
            return self._complete(None)
        return step == PENDING

    def on_result(self, result: TextResult) -> bool:
        """Take one engine result; True asks for ``flush`` after this batch of frames."""
        if self.lifecycle.terminal:
            return False
        if result.tokens:
            if self.lifecycle.state is State.PROCESSING:
                self.lifecycle.advance(State.GENERATING)
            gaps = self._gaps
            if gaps is None:
                self._gaps = Gaps(monotonic_ns())
            else:
                gaps.add(monotonic_ns())
        step = self._asm.result(result)
        if step == COMPLETE:
            return self._complete(result)
        return step == PENDING

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
        self.error = error
        self._finish(State.FAILED)
        self.flush()

    def _complete(self, result: TextResult | None) -> bool:
        """The text is complete: the engine's final ``result``, or a stop string (None,
        or a mid-stream result), after which the engine is told to stop."""
        if result is None or result.finish_reason is FinishReason.NONE:
            self._cancel_engine("stop string")
        asm = self._asm
        finish, check = asm.finish(result)
        if check is None:  # _completed, inline for the usual answer
            self.lifecycle.advance(State.COMPLETE)
            self.outcome = asm.outcome(result, finish, self.lifecycle.timings())
            self._ended()
            return True
        defer = self._defer
        if defer is None or len(check.text) <= INLINE_CHECK_CHARS:
            return self._completed(result, finish, check.run())
        # A long answer is checked elsewhere (jsonschema is pure Python): the request ends
        # when the check comes back, unless something ended it meanwhile.
        defer(check.run, lambda problem: self._checked(result, finish, problem))
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
        self.outcome = self._asm.outcome(result, finish, self.lifecycle.timings())
        self._ended()
        return True

    # ---------------------------------------------------------------- delivery

    def flush(self) -> None:
        """Push what the batch produced to the target; its end, once there is one."""
        target = self._push
        if target is None:
            return
        asm = self._asm
        try:
            parts = asm.take_parts() if asm.parts_pending else None
            if parts is not None:
                target.on_parts(*parts)
            text = asm.take_text() if asm.pending_text or asm.pending_lp else None
            if text is not None:
                target.on_text(*text)
        except Exception as exc:
            self._undeliverable(exc)
        if self.error is not None or self.outcome is not None:
            self._push = None
            try:
                target.on_end(self)
            except Exception:
                log.exception("request %s: ending its answer failed", self.request_id)

    def _undeliverable(self, exc: Exception) -> None:
        """Output the client cannot be given (a rendering bug): the answer ends with the
        error, and the engine, if still generating, is told to stop."""
        self._asm.drop()
        error = sink_failure(exc)
        if not self.lifecycle.terminal:
            self._cancel_engine("output rejected")
            self.error = error
            self._finish(State.FAILED)
        else:  # complete in history, but the client gets the error, not a partial answer
            self.error = error

    # ---------------------------------------------------------------- endings

    def close(self, reason: str = "client disconnected") -> None:
        """End the request from the client side: one cancel to the engine if still running."""
        if self.lifecycle.terminal:
            return
        self._cancel_engine(reason)
        self.error = NeutrinoError(ErrorKind.CANCELLED, "the request was cancelled")
        self._finish(State.CANCELLED)
        self.flush()

    def abort(self, error: NeutrinoError, reason: str) -> None:
        """End the request from the server's side (its deadline, a shutdown): one cancel
        to the engine with ``reason`` if it is still generating; the client gets ``error``
        as any failed request's (a stream's error event, a status)."""
        if self.lifecycle.terminal:
            return
        self._cancel_engine(reason)
        self.error = error
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

    def spent(self) -> Spent:
        """What it used and how it ended (read once it has ended)."""
        out = self.outcome
        if out is None:
            return Spent(self.prompt_tokens, self._asm.completion_tokens)
        return Spent(
            out.prompt_tokens,
            out.completion_tokens,
            out.cached_tokens,
            out.reasoning_tokens or 0,
            out.finish_reason,
        )
