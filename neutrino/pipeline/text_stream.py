"""Sans-IO: engine results -> visible text (detokenized, stop strings applied).

``feed(result)`` / ``feed_tokens(ids)`` return the text an engine result makes
visible; ``finish_reason`` is set when the stream ends (the engine's end, or a stop
string). :class:`neutrino.pipeline.assembler.Assembler` drives one per choice.
"""

from __future__ import annotations

from neutrino.engine.messages import FinishReason, TextResult
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.text.detokenizer import Detokenizer
from neutrino.text.errors import InvalidTokenId
from neutrino.text.stop import StopMatcher
from neutrino.text.tokenizer import Tokenizer

_FINISH_NAMES = {
    FinishReason.STOP: "stop",
    FinishReason.LENGTH: "length",
    FinishReason.CANCELLED: "stop",
}


def _undecodable(exc: InvalidTokenId) -> NeutrinoError:
    return NeutrinoError(ErrorKind.ENGINE_ERROR, f"the engine's output cannot be decoded: {exc}")


class TextStream:
    """Sans-IO: engine results -> visible text, honouring stop strings."""

    __slots__ = (
        "_detok",
        "_include_stop",
        "_recent",
        "_reported_ids",
        "_stop",
        "_stop_ids",
        "_tok",
        "completion_tokens",
        "finish_reason",
        "hidden_before",
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
        reported_ids: frozenset[int] = frozenset(),
    ) -> None:
        """``stop_token_ids``: the model's end tokens; ``reported_ids``: the request's own
        stop token ids. Either ends the text unseen; as vLLM reports it, ``stop_reason``
        names a request's id, or the stop string that matched, and is None at the
        model's own end of sequence."""
        # Output parsers need the special-token markers (e.g. [TOOL_CALLS], <|channel|>).
        self._detok = Detokenizer(tokenizer, skip_special=skip_special)
        self._tok = tokenizer
        self._stop = StopMatcher(stops) if stops else None
        self._stop_ids = stop_token_ids
        self._reported_ids = reported_ids
        self._include_stop = include_stop
        self.completion_tokens = 0
        self.shown = 0  # tokens of the last result that are visible (not an end token)
        # Ids of the last frames read by feed (a partial character's bytes span at most
        # 3 tokens), and how many of them a length cut hid (their logprobs already taken).
        self._recent: list[int] = []
        self.hidden_before = 0
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

    def _cut_tail(self, tokens: list[int], dropped: int) -> int:
        """Cut by the token limit inside a multi-byte character: its bytes so far are not
        shown (no U+FFFD), and the last tokens that held only those bytes report no
        logprobs; they still count. Returns how many of ``tokens`` that is; those of
        earlier frames are ``hidden_before``."""
        hidden = 0
        for token_id in reversed(self._recent + tokens):
            size = len(self._tok.token_bytes(token_id))
            if size > dropped:
                break
            dropped -= size
            hidden += 1
        self.hidden_before = max(0, hidden - len(tokens))
        return hidden - self.hidden_before

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
            and (
                tokens[-1] == result.stop_token_id
                or tokens[-1] in self._stop_ids
                or tokens[-1] in self._reported_ids
            )
        ):
            if tokens[-1] in self._reported_ids:
                self.stop_reason = tokens[-1]
            tokens = tokens[:-1]  # the end token is counted but never shown
        self.shown = len(tokens)
        try:
            text = self._detok.feed(tokens) if tokens else ""
        except InvalidTokenId as exc:
            raise _undecodable(exc) from None
        if final and result.finish_reason is FinishReason.LENGTH and self._detok.pending_bytes:
            self.shown -= self._cut_tail(tokens, self._detok.drop())
        elif final:
            text += self._detok.finish()
        elif self._detok.pending_bytes:  # a character still open: keep its tokens' ids
            self._recent = (self._recent + tokens)[-3:]
        else:
            self._recent = []
        if self._stop is not None:
            text = self._stopped(text)
            if self.finish_reason is not None:
                return text
            if final:
                text += self._stop.finish()
        if final:
            self.finish_reason = _FINISH_NAMES.get(result.finish_reason, "stop")
        return text
