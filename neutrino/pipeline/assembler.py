"""Sans-IO: one choice's answer assembled from its engine's results.

The :class:`Assembler` takes engine results (``tokens`` on the per-token path, ``result``
for a whole :class:`TextResult`), turns them into text through its
:class:`~neutrino.pipeline.text_stream.TextStream` (detokenizer and stops) and, for a
parsed answer, its :class:`~neutrino.pipeline.output.OutputParser` (reasoning and tool
calls); it records logprobs and keeps the text a strict response format checks. What a
batch produced is taken as typed deltas (``take_parts``, ``take_text``); once the text is
complete, ``finish`` gives the finish reason and the text to check, and ``outcome`` the
one typed :class:`Outcome`. It has no I/O, no clock and no lifecycle: the in-flight handle
(:class:`~neutrino.pipeline.generation.Generation`) owns those and drives it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from neutrino.engine.messages import FinishReason, TextResult
from neutrino.pipeline.logprobs import LogprobColumns, LogprobRecorder, TokenLogprob
from neutrino.pipeline.output import OutputParser
from neutrino.pipeline.text_stream import TextStream
from neutrino.text.parsers import Delta, ToolCall, ToolCallDelta

# A strict response format's check of a whole answer: None, or what is wrong with it.
Validator = Callable[[str], "str | None"]

# What taking a result left (``tokens``, ``result``): nothing to take, something to take,
# or a complete text (the engine's end, or a stop string matched).
NOTHING, PENDING, COMPLETE = 0, 1, 2


@dataclass(slots=True)
class Outcome:
    """How a finished choice ended, and what it cost (``logprobs``: every reported
    token's entry, when they were asked for and the answer is rendered whole)."""

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


@dataclass(slots=True)
class Check:
    """A complete answer a strict format still has to pass: ``validator(text)``."""

    validator: Validator
    text: str

    def run(self) -> str | None:
        return self.validator(self.text)


class Assembler:
    """Engine results in, typed deltas and one :class:`Outcome` out (no I/O, no clock)."""

    __slots__ = (
        "_all_lp",
        "_cached",
        "_parser",
        "_pending_calls",
        "_pending_reasoning",
        "_pending_tokens",
        "_plain",
        "_recorder",
        "_stream",
        "_text",
        "_validator",
        "parts_pending",
        "pending_lp",
        "pending_text",
        "prompt_tokens",
    )

    def __init__(
        self,
        stream: TextStream,
        prompt_tokens: int,
        *,
        logprobs: LogprobRecorder | None = None,
        keep_logprobs: bool = True,
        validator: Validator | None = None,
        parser: OutputParser | None = None,
    ) -> None:
        self.prompt_tokens = prompt_tokens
        self._stream = stream
        self._parser = parser
        # Checks the whole text at the end (strict response formats); keeps a copy for it.
        self._validator = validator
        self._plain = parser is None and validator is None  # text goes straight out
        self._text: list[str] = []
        self._recorder = logprobs
        # Every token's entry, for a response rendered whole at the end (a stream sends
        # them as they come: keeping them all would grow with every token it streams).
        self._all_lp = LogprobColumns(logprobs) if logprobs is not None and keep_logprobs else None
        # What the current batch of engine frames produced, until it is taken.
        self.pending_text: list[str] = []
        self._pending_tokens = 0
        self.pending_lp: list[TokenLogprob] = []
        self._pending_reasoning: list[str] = []
        self._pending_calls: list[ToolCallDelta] = []
        self.parts_pending = False  # reasoning or tool-call deltas not yet taken
        self._cached = 0

    # ---------------------------------------------------------------- results in

    def tokens(self, tokens: list[int]) -> int:
        """Take a mid-stream result of only token ids (the per-token path): NOTHING,
        PENDING (something to take) or COMPLETE (a stop string matched)."""
        s = self._stream
        text = s.feed_tokens(tokens)
        self._pending_tokens += len(tokens)
        if text:
            if self._plain:  # _add_text, inline on the per-token path
                self.pending_text.append(text)
            else:
                self._add_text(text)
        if s.finish_reason is not None:
            return COMPLETE
        return PENDING if self.pending_text or self.parts_pending else NOTHING

    def result(self, result: TextResult) -> int:
        """Take one engine result: NOTHING, PENDING or COMPLETE."""
        s = self._stream
        text = s.feed(result)
        if text:
            self._add_text(text)
        self._pending_tokens += len(result.tokens)
        kept = self._all_lp
        if self._recorder is not None and result.logprobs:
            if kept is not None:  # an answer rendered whole at the end: kept compactly
                kept.add(result, s.shown)
            else:  # a stream: entries for the next take
                self.pending_lp += self._recorder.entries(result, s.shown)
        if s.finish_reason is not None:
            if s.hidden_before and kept is not None:
                # Cut inside a character begun in earlier frames: their tokens' entries
                # go too (a stream has sent them already).
                kept.drop(s.hidden_before)
            return COMPLETE
        return PENDING if self.pending_text or self.pending_lp or self.parts_pending else NOTHING

    @property
    def complete(self) -> bool:
        """Whether the text is complete (the engine's end, or a stop string matched)."""
        return self._stream.finish_reason is not None

    @property
    def completion_tokens(self) -> int:
        return self._stream.completion_tokens

    def _add_text(self, text: str) -> None:
        if self._parser is not None:
            self._take_delta(self._parser.feed(text))
            return
        self.pending_text.append(text)
        if self._validator is not None:
            self._text.append(text)

    def _take_delta(self, delta: Delta) -> None:
        if delta.content:
            self.pending_text.append(delta.content)
            if self._validator is not None:
                self._text.append(delta.content)
        if delta.reasoning:
            self._pending_reasoning.append(delta.reasoning)
            self.parts_pending = True
        if delta.tool_calls:
            self._pending_calls += delta.tool_calls
            self.parts_pending = True

    # ---------------------------------------------------------------- the end

    def finish(self, result: TextResult | None) -> tuple[str, Check | None]:
        """The text is complete (the engine's final ``result``, or a stop string: None or
        a mid-stream result): its finish reason, and the check it still has to pass."""
        if result is not None and result.finish_reason is not FinishReason.NONE:
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
        validator = self._validator if finish == "stop" else None
        if validator is None:
            return finish, None
        return finish, Check(validator, "".join(self._text))

    def outcome(self, result: TextResult | None, finish: str, timings: dict[str, float]) -> Outcome:
        """The finished choice's :class:`Outcome` (``timings``: its lifecycle's)."""
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
            timings=timings,
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

    # ---------------------------------------------------------------- deltas out

    def take_parts(self) -> tuple[str, list[ToolCallDelta]] | None:
        """New reasoning text and tool-call deltas since the last take (None: none)."""
        if not self.parts_pending:
            return None
        self.parts_pending = False
        reasoning = "".join(self._pending_reasoning)
        self._pending_reasoning.clear()
        calls, self._pending_calls = self._pending_calls, []
        return reasoning, calls

    def take_text(self) -> tuple[str, int, list[TokenLogprob] | None] | None:
        """New text, the tokens it came from and their logprobs (None: nothing new)."""
        pending = self.pending_text
        if not pending and not self.pending_lp:
            return None
        text = pending[0] if len(pending) == 1 else "".join(pending)
        pending.clear()
        n, self._pending_tokens = self._pending_tokens, 0
        lps: list[TokenLogprob] | None = None
        if self._recorder is not None:
            lps, self.pending_lp = self.pending_lp, []
        return text, n, lps

    def drop(self) -> None:
        """Forget what was not taken (output the client cannot be given)."""
        self.pending_text.clear()
        self.pending_lp.clear()
        self._pending_reasoning.clear()
        self._pending_calls.clear()
        self.parts_pending = False
