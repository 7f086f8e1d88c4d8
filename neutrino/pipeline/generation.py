"""One request in flight: engine results in, text deltas out.

:class:`TextStream` is the sans-IO core: ``feed(result)`` turns an engine result
into new text (detokenized, stop strings applied) and ``finish()`` flushes it.
:class:`Generation` wraps it as the engine sink of one request: it owns the
lifecycle, the timeout, the single cancel to the engine, and a small pending
buffer that the front end drains. Results are processed synchronously in the
connection's ``data_received``; the consumer wakes once per batch, so text that
arrives in a burst leaves in one write.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from neutrino.engine.client import Submission, sink_failure
from neutrino.engine.messages import FinishReason, ModalResult, TextResult
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.pipeline.auth import Principal
from neutrino.pipeline.deadlines import Deadline, DeadlineWheel
from neutrino.pipeline.history import HistoryEntry
from neutrino.pipeline.logprobs import LogprobRecorder, TokenLogprob
from neutrino.pipeline.output import OutputParser
from neutrino.pipeline.state import Lifecycle, State
from neutrino.text.detokenizer import Detokenizer
from neutrino.text.errors import InvalidTokenId
from neutrino.text.parsers import Delta, ToolCall, ToolCallDelta
from neutrino.text.stop import StopMatcher
from neutrino.text.tokenizer import Tokenizer

_FINISH_NAMES = {
    FinishReason.STOP: "stop",
    FinishReason.LENGTH: "length",
    FinishReason.CANCELLED: "stop",
}


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
    logprobs: list[TokenLogprob] | None = None
    reasoning: str | None = None  # the split-off reasoning, when the response was parsed
    reasoning_tokens: int | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)


class PushTarget(Protocol):
    """Where a push-mode generation delivers its output (called synchronously)."""

    def on_text(self, text: str, tokens: int, logprobs: list[TokenLogprob] | None) -> None:
        """New text (may be empty when only logprobs are new)."""
        ...

    def on_parts(self, reasoning: str, tool_calls: list[ToolCallDelta]) -> None:
        """New reasoning text and/or tool-call deltas (parsed responses only)."""
        ...

    def on_end(self, gen: Generation) -> None:
        """The generation ended: read ``gen.outcome`` or ``gen.error``."""
        ...


class TextStream:
    """Sans-IO: engine results -> visible text, honouring stop strings."""

    __slots__ = (
        "_detok",
        "_include_stop",
        "_stop",
        "_stop_ids",
        "completion_tokens",
        "finish_reason",
        "shown",
        "stop_reason",
    )

    def __init__(
        self,
        tokenizer: Tokenizer,
        stops: list[str],
        stop_token_ids: frozenset[int],
        include_stop: bool = False,
        skip_special: bool = True,
    ) -> None:
        # Output parsers need the special-token markers (e.g. [TOOL_CALLS], <|channel|>).
        self._detok = Detokenizer(tokenizer, skip_special=skip_special)
        self._stop = StopMatcher(stops) if stops else None
        self._stop_ids = stop_token_ids
        self._include_stop = include_stop
        self.completion_tokens = 0
        self.shown = 0  # tokens of the last result that are visible (not an end token)
        self.finish_reason: str | None = None
        self.stop_reason: str | int | None = None

    def feed_tokens(self, tokens: list[int]) -> str:
        """Text made visible by mid-stream ``tokens`` (one frame's, or several frames')."""
        try:
            if self._stop is None:
                self.completion_tokens += len(tokens)
                return self._detok.feed(tokens)
            if len(tokens) == 1:
                self.completion_tokens += 1
                return self._stopped(self._detok.feed(tokens))
            # One id at a time, so the count ends at the id that completed a stop string,
            # as it does when each id comes in a frame of its own.
            out = []
            for token_id in tokens:
                self.completion_tokens += 1
                out.append(self._stopped(self._detok.feed((token_id,))))
                if self.finish_reason is not None:
                    break
            return "".join(out)
        except InvalidTokenId as exc:
            raise _undecodable(exc) from None

    def _stopped(self, text: str) -> str:
        """Apply stop strings to ``text``; on a match, end the stream with "stop"."""
        assert self._stop is not None
        already = self._stop.stopped
        text = self._stop.feed(text)
        if self._stop.stopped and not already:
            self.finish_reason = "stop"
            self.stop_reason = self._stop.matched
            if self._include_stop and self._stop.matched:
                text += self._stop.matched
        return text

    def feed(self, result: TextResult) -> str:
        """Text made visible by ``result``; sets ``finish_reason`` when the stream ends."""
        tokens = result.tokens
        final = result.finish_reason is not FinishReason.NONE
        if not final and self._stop is not None and len(tokens) > 1:
            # As feed_tokens: the count (and the ids shown) end at the id that completed
            # a stop string, whether or not the frame carried logprobs.
            before = self.completion_tokens
            text = self.feed_tokens(tokens)
            self.shown = self.completion_tokens - before
            return text
        self.completion_tokens += len(tokens)
        if (
            final
            and result.finish_reason is FinishReason.STOP
            and tokens
            and (tokens[-1] == result.stop_token_id or tokens[-1] in self._stop_ids)
        ):
            self.stop_reason = tokens[-1]
            tokens = tokens[:-1]  # the end token is counted but never shown
        self.shown = len(tokens)
        try:
            text = self._detok.feed(tokens) if tokens else ""
        except InvalidTokenId as exc:
            raise _undecodable(exc) from None
        if final:
            text += self._detok.finish()
        if self._stop is not None:
            text = self._stopped(text)
            if self.finish_reason is not None:
                return text
            if final:
                text += self._stop.finish()
        if final:
            self.finish_reason = _FINISH_NAMES.get(result.finish_reason, "stop")
        return text


log = logging.getLogger("neutrino.pipeline")


def _undecodable(exc: InvalidTokenId) -> NeutrinoError:
    return NeutrinoError(ErrorKind.ENGINE_ERROR, f"the engine's output cannot be decoded: {exc}")


class Generation:
    """The engine sink and consumer handle of one request."""

    __slots__ = (
        "_all_lp",
        "_cached",
        "_error",
        "_keep_lp",
        "_keepalive",
        "_keepalive_s",
        "_on_done",
        "_outcome",
        "_parser",
        "_pending",
        "_pending_calls",
        "_pending_lp",
        "_pending_reasoning",
        "_pending_tokens",
        "_push",
        "_quiet",
        "_recorder",
        "_stream",
        "_submission",
        "_text",
        "_timer",
        "_validator",
        "_waiter",
        "created",
        "echo",
        "engine_cancels",
        "keepalive_due",
        "lifecycle",
        "model",
        "principal",
        "prompt_tokens",
        "request_id",
        "wake_on_text",
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
    ) -> None:
        self.request_id = request_id
        self._parser = parser
        self._pending_reasoning: list[str] = []
        self._pending_calls: list[ToolCallDelta] = []
        self.echo = ""  # text that precedes the completion in the answer (``echo``)
        # Checks the whole text at the end (strict response formats); keeps a copy for it.
        self._validator = validator
        self._text: list[str] = []
        self._recorder = logprobs
        # Every token's entry, for a response rendered whole at the end (a stream sends
        # them as they come: keeping them all would grow with every token it streams).
        self._keep_lp = keep_logprobs
        self._pending_lp: list[TokenLogprob] = []
        self._all_lp: list[TokenLogprob] = []
        self.model = model
        self.created = int(lifecycle.created_wall)
        self.lifecycle = lifecycle
        self.prompt_tokens = prompt_tokens
        self._stream = stream
        self._on_done = on_done
        self._pending: list[str] = []
        self._pending_tokens = 0
        self._outcome: Outcome | None = None
        self._error: NeutrinoError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._submission: Submission | None = None
        self._timer: Deadline | None = None
        self._cached = 0
        self.engine_cancels = 0
        # Non-streaming consumers only need waking at the end.
        self.wake_on_text = True
        self._keepalive: asyncio.TimerHandle | None = None
        self._keepalive_s = 0.0
        self._quiet = False
        self.keepalive_due = False
        self._push: PushTarget | None = None
        self.principal: Principal | None = None  # the API key it counts against

    # ---------------------------------------------------------------- setup

    def attach(
        self, submission: Submission, timeout_s: float | None, deadlines: DeadlineWheel
    ) -> None:
        self._submission = submission
        if timeout_s and not self.lifecycle.terminal:
            self._timer = deadlines.call_later(timeout_s, self._on_timeout)

    # ---------------------------------------------------------------- engine side

    def on_tokens(self, tokens: list[int]) -> bool:
        """Take a mid-stream result of only token ids; same contract as ``on_result``."""
        lc = self.lifecycle
        if lc.state is not State.GENERATING:
            if lc.state is not State.PROCESSING or not tokens:
                return self.on_result(TextResult(tokens))
            lc.advance(State.GENERATING)
        s = self._stream
        text = s.feed_tokens(tokens)
        self._pending_tokens += len(tokens)
        added = False
        if text:
            if self._parser is not None:
                added = self._parse(text)
            else:
                self._pending.append(text)
                self._quiet = False
                added = True
                if self._validator is not None:
                    self._text.append(text)
        if s.finish_reason is not None:  # a stop string matched: end it like a result
            return self.on_result(TextResult([]))
        if added:
            if self._push is not None:
                return True
            if self.wake_on_text:
                self._wake()
        return False

    def on_result(self, result: TextResult) -> bool:
        """Take one engine result; True if ``flush`` should run after this batch of frames."""
        if self.lifecycle.terminal:
            return False
        if self.lifecycle.state is State.PROCESSING and result.tokens:
            self.lifecycle.advance(State.GENERATING)
        s = self._stream
        text = s.feed(result)
        if text:
            if self._parser is not None:
                self._parse(text)
            else:
                self._pending.append(text)
                self._quiet = False
                if self._validator is not None:
                    self._text.append(text)
        self._pending_tokens += len(result.tokens)
        if self._recorder is not None and result.logprobs:
            entries = self._recorder.entries(result, s.shown)
            self._pending_lp += entries
            if self._keep_lp:
                self._all_lp += entries
        if result.finish_reason is not FinishReason.NONE:
            self._cached = result.cached_tokens
            if result.prompt_tokens:
                self.prompt_tokens = result.prompt_tokens
        if s.finish_reason is not None:
            if result.finish_reason is FinishReason.NONE:
                # A stop string ended the text early: the engine is still going.
                self._cancel_engine("stop string")
            completion = s.completion_tokens
            if result.completion_tokens and result.finish_reason is not FinishReason.NONE:
                completion = max(completion, result.completion_tokens)
            finish = s.finish_reason
            parser = self._parser
            if parser is not None:
                self._take_delta(parser.finish())
                if parser.calls and finish == "stop":
                    finish = "tool_calls"
            # Only an answer the model finished can break the format: one cut by
            # max_tokens is a 200 with finish_reason "length" (SDKs raise their own
            # length error for it; a 5xx would make them retry in vain).
            check = self._validator if finish == "stop" else None
            problem = check("".join(self._text)) if check is not None else None
            if problem is not None:
                self.on_error(
                    NeutrinoError(
                        ErrorKind.ENGINE_ERROR,
                        f"the engine broke the requested response format: {problem}",
                        code="response_format_violated",
                    )
                )
                return self._push is not None
            self.lifecycle.advance(State.COMPLETE)
            self._outcome = Outcome(
                finish_reason=finish,
                prompt_tokens=self.prompt_tokens,
                completion_tokens=completion,
                cached_tokens=self._cached,
                timings=self.lifecycle.timings(),
                engine_timings={
                    "queue": result.queue_ns / 1e9,
                    "prefill": result.prefill_ns / 1e9,
                    "decode": result.decode_ns / 1e9,
                },
                stop_reason=s.stop_reason,
                logprobs=self._all_lp if self._recorder is not None and self._keep_lp else None,
                reasoning=parser.reasoning() if parser is not None else None,
                reasoning_tokens=parser.reasoning_tokens() if parser is not None else None,
                tool_calls=parser.calls if parser is not None else [],
            )
            self._ended()
            if self._push is not None:
                return True
            self._wake()
        elif self._push is not None:
            return bool(
                self._pending or self._pending_lp or self._pending_reasoning or self._pending_calls
            )
        elif self.wake_on_text:
            self._wake()
        return False

    def on_modal(self, result: ModalResult) -> None:
        raise NeutrinoError(ErrorKind.ENGINE_ERROR, "the engine answered a text query wrongly")

    def on_error(self, error: NeutrinoError) -> None:
        if self.lifecycle.terminal:
            return
        self._error = error
        self._finish(State.FAILED)
        self._wake()

    # ---------------------------------------------------------------- push mode

    def push_to(self, target: PushTarget) -> None:
        """Deliver text straight to ``target`` from the engine callbacks (no task wake-ups).

        The engine connection calls :meth:`flush` once per batch of frames, so text
        that arrives together leaves in one write. Pull mode (``wait``/``take``)
        stays available for front ends whose writes must be awaited.
        """
        self._push = target
        self.flush()

    def flush(self) -> None:
        target = self._push
        if target is None:
            return
        try:
            if self._pending_reasoning or self._pending_calls:
                reasoning, calls = self.take_parts()
                target.on_parts(reasoning, calls)
            if self._pending or self._pending_lp:
                text, n = self.take()
                target.on_text(text, n, None if self._recorder is None else self.take_logprobs())
        except Exception as exc:
            self._undeliverable(exc)
        if self._error is not None or self._outcome is not None:
            self._push = None
            try:
                target.on_end(self)
            except Exception:
                log.exception("request %s: ending its answer failed", self.request_id)

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

    # ---------------------------------------------------------------- consumer side

    def start_keepalive(self, interval: float) -> None:
        """Set ``keepalive_due`` (and wake the consumer) after each quiet ``interval``.

        One timer per interval per stream, instead of a timeout around every wait.
        """
        if interval > 0 and not self.lifecycle.terminal:
            self._keepalive_s = interval
            self._quiet = True
            self._keepalive = asyncio.get_running_loop().call_later(interval, self._tick)

    def _tick(self) -> None:
        self._keepalive = None
        if self.lifecycle.terminal:
            return
        if self._quiet:  # pull mode only: a push target's stream keeps itself alive
            self.keepalive_due = True
            self._wake()
        self._quiet = True
        self._keepalive = asyncio.get_running_loop().call_later(self._keepalive_s, self._tick)

    async def wait(self) -> None:
        """Wait until there is text, an outcome, an error or a keepalive due."""
        if self._pending or self._outcome is not None or self._error is not None:
            return
        if self.keepalive_due:
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiter = fut
        try:
            await fut
        finally:
            self._waiter = None

    def take(self) -> tuple[str, int]:
        """Drain pending text and the number of tokens it came from."""
        pending = self._pending
        if not pending:
            n, self._pending_tokens = self._pending_tokens, 0
            return "", n
        text = pending[0] if len(pending) == 1 else "".join(pending)
        pending.clear()
        n, self._pending_tokens = self._pending_tokens, 0
        return text, n

    def take_parts(self) -> tuple[str, list[ToolCallDelta]]:
        """Drain pending reasoning text and tool-call deltas (parsed responses only)."""
        reasoning = "".join(self._pending_reasoning)
        self._pending_reasoning.clear()
        calls, self._pending_calls = self._pending_calls, []
        return reasoning, calls

    def _parse(self, text: str) -> bool:
        """Feed visible text to the output parser; True if anything became pending."""
        assert self._parser is not None
        return self._take_delta(self._parser.feed(text))

    def _take_delta(self, delta: Delta) -> bool:
        added = False
        if delta.content:
            self._pending.append(delta.content)
            if self._validator is not None:
                self._text.append(delta.content)
            added = True
        if delta.reasoning:
            self._pending_reasoning.append(delta.reasoning)
            added = True
        if delta.tool_calls:
            self._pending_calls += delta.tool_calls
            added = True
        if added:
            self._quiet = False
        return added

    def take_logprobs(self) -> list[TokenLogprob] | None:
        """Drain the logprob entries of the tokens taken so far (None when not asked for)."""
        if self._recorder is None:
            return None
        out, self._pending_lp = self._pending_lp, []
        return out

    @property
    def outcome(self) -> Outcome | None:
        return self._outcome

    @property
    def error(self) -> NeutrinoError | None:
        return self._error

    async def collect(self) -> tuple[str, Outcome]:
        """Run to the end (non-streaming); raises the request's error."""
        self.wake_on_text = False
        parts: list[str] = []
        while True:
            if self._outcome is None and self._error is None and not self._pending:
                await self.wait()
            text, _ = self.take()
            if text:
                parts.append(text)
            if self._error is not None:
                raise self._error.fresh()
            if self._outcome is not None:
                return "".join(parts), self._outcome

    def close(self, reason: str = "client disconnected") -> None:
        """End the request from the client side: one cancel to the engine if still running."""
        if self.lifecycle.terminal:
            return
        self._cancel_engine(reason)
        self._error = NeutrinoError(ErrorKind.CANCELLED, "the request was cancelled")
        self._finish(State.CANCELLED)
        self._wake()

    # ---------------------------------------------------------------- internals

    def _cancel_engine(self, reason: str) -> None:
        sub = self._submission
        if sub is not None and sub.cancel(reason):
            self.engine_cancels += 1

    def abort(self, error: NeutrinoError, reason: str) -> None:
        """End the request from the server's side (its deadline, a shutdown): one cancel
        to the engine with ``reason`` if it is still generating; the client gets ``error``
        as any failed request's (a stream's error event, a status)."""
        if self.lifecycle.terminal:
            return
        self._cancel_engine(reason)
        self._error = error
        self._finish(State.FAILED)
        self._wake()

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
        if self._keepalive is not None:
            self._keepalive.cancel()
            self._keepalive = None
        if self._submission is not None:
            self._submission.forget()
        self._on_done(self)

    def _wake(self) -> None:
        if self._push is not None:
            self.flush()
            return
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def history_entry(self) -> HistoryEntry:
        """This request's history entry (call once terminal)."""
        out = self._outcome
        return HistoryEntry.of(
            self.request_id,
            self.model,
            self.lifecycle,
            self.prompt_tokens,
            out.completion_tokens if out else self._stream.completion_tokens,
            out.finish_reason if out else None,
            self._error,
        )
