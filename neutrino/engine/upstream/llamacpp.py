"""llama.cpp's server as a token engine (sans-IO): a query becomes the body of a
streamed ``POST /completion`` with the prompt as token ids and ``return_tokens``; each
event of its answer becomes a :class:`TextResult` of the ids it carries.

The server's native endpoint is the one that takes and returns ids. What it lacks is
done here: the query's stop ids end the answer when one arrives (the server stops by
itself only at the model's end-of-generation tokens), and a guided choice or regular
expression is sent as the grammar it stands for. Minimum tokens and images are refused.
"""

from __future__ import annotations

from typing import Any

import orjson

from neutrino.engine.messages import (
    EngineError,
    ErrorCode,
    FinishReason,
    Guided,
    GuidedMode,
    TextQuery,
    TextResult,
)
from neutrino.engine.upstream.errors import upstream_error
from neutrino.text.regex_gbnf import RegexUnsupported, literal, regex_grammar

PATH = "/completion"
DIALECT = "llama.cpp"


def root_of(url: str) -> str:
    """The server's root from a configured base URL (``http://h:p/v1`` -> ``http://h:p``)."""
    url = url.rstrip("/")
    return url.removesuffix("/v1")


def body(query: TextQuery, upstream_model: str) -> bytes | EngineError:
    """The request body for ``query``, or the error a socket engine would answer with."""
    if query.images:
        return EngineError(ErrorCode.UNSUPPORTED, "images are not supported by this upstream")
    s = query.sampling
    if s.min_tokens:
        return EngineError(ErrorCode.UNSUPPORTED, "min_tokens is not supported by llama.cpp")
    doc: dict[str, object] = {
        "model": upstream_model,
        "prompt": query.prompt_tokens,
        "n_predict": s.max_tokens,
        "stream": True,
        "return_tokens": True,
        "cache_prompt": True,
        "temperature": s.temperature,
        "top_p": s.top_p,
        "top_k": max(0, s.top_k),  # llama.cpp: 0 is "off" (ours: -1)
        "min_p": s.min_p,
        "presence_penalty": s.presence_penalty,
        "frequency_penalty": s.frequency_penalty,
        "repeat_penalty": s.repetition_penalty,
        "ignore_eos": s.ignore_eos,
    }
    if s.seed is not None:
        doc["seed"] = s.seed & 0xFFFFFFFF
    if s.logprobs:
        doc["n_probs"] = max(1, s.top_logprobs)
    if query.guided is not None and query.guided.mode is not GuidedMode.NONE:
        constraint = _guided(query.guided)
        if isinstance(constraint, EngineError):
            return constraint
        doc.update(constraint)
    return orjson.dumps(doc)


def _guided(guided: Guided) -> dict[str, object] | EngineError:
    mode = guided.mode
    if mode is GuidedMode.JSON_OBJECT:
        return {"json_schema": {"type": "object"}}
    if mode is GuidedMode.JSON_SCHEMA:
        try:
            return {"json_schema": orjson.loads(guided.json_schema)}
        except orjson.JSONDecodeError:
            return EngineError(ErrorCode.INVALID_REQUEST, "the JSON schema is not valid JSON")
    if mode is GuidedMode.CHOICE:
        return {"grammar": "root ::= " + " | ".join(literal(c) for c in guided.choices) + "\n"}
    if mode is GuidedMode.REGEX:
        try:
            return {"grammar": regex_grammar(guided.pattern)}
        except RegexUnsupported as exc:
            return EngineError(ErrorCode.UNSUPPORTED, str(exc))
    return {"grammar": guided.pattern}


class Answer:
    """One streamed answer: feed each event's JSON; each gives a result or an error.

    ``done`` once the answer ended: the server said so, a stop id arrived, or it failed.
    """

    __slots__ = ("_logprobs", "_stops", "_top", "cut", "done", "sent")

    def __init__(self, query: TextQuery) -> None:
        s = query.sampling
        self._stops = frozenset(s.stop_token_ids)
        self._logprobs = s.logprobs
        self._top = s.top_logprobs
        self.done = False
        self.cut = False  # ended here, at a stop id, while the server generates on
        self.sent = 0  # tokens passed on

    def event(self, data: str | bytes) -> TextResult | EngineError | None:
        """The result an event's data stands for (None: nothing to pass on)."""
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            self.done = True
            return EngineError(ErrorCode.PROTOCOL, "the upstream sent an event that is not JSON")
        if not isinstance(doc, dict):
            self.done = True
            return EngineError(ErrorCode.PROTOCOL, "the upstream sent an event that is not JSON")
        if "error" in doc:
            self.done = True
            return upstream_error(0, doc)
        tokens = doc.get("tokens")
        if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
            self.done = True
            return EngineError(ErrorCode.PROTOCOL, "the upstream's event carries no token ids")
        result = TextResult(tokens)
        stops = self._stops
        if stops and not stops.isdisjoint(tokens):
            at = next(i for i, t in enumerate(tokens) if t in stops)
            del tokens[at + 1 :]
            result.finish_reason = FinishReason.STOP
            result.stop_token_id = tokens[at]
            self.cut = True
        if self._logprobs:
            _add_logprobs(result, doc.get("completion_probabilities"), self._top, len(tokens))
        self.sent += len(tokens)
        if doc.get("stop") is True and result.finish_reason is FinishReason.NONE:
            result.finish_reason = _finish(doc)
        if result.finish_reason is not FinishReason.NONE:
            self.done = True
            _add_usage(result, doc, self.sent)
        elif not tokens:
            return None
        return result

    def ended_early(self) -> EngineError:
        """The error for a stream that closed before its last event."""
        return EngineError(ErrorCode.INTERNAL, "the upstream's answer ended before it was done")


def _finish(doc: dict[str, Any]) -> FinishReason:
    kind = doc.get("stop_type")
    if kind == "limit" or doc.get("truncated") is True:
        return FinishReason.LENGTH
    return FinishReason.STOP


def _add_usage(result: TextResult, doc: dict[str, Any], sent: int) -> None:
    """The final event's counts and times (as a socket engine's final result has them)."""
    prompt = doc.get("tokens_evaluated")
    result.prompt_tokens = prompt if type(prompt) is int else 0
    result.completion_tokens = sent
    timings = doc.get("timings")
    if isinstance(timings, dict):
        cached = timings.get("cache_n")
        result.cached_tokens = cached if type(cached) is int else 0
        result.prefill_ns = _ns(timings.get("prompt_ms"))
        result.decode_ns = _ns(timings.get("predicted_ms"))


def _ns(ms: Any) -> int:
    return int(ms * 1e6) if isinstance(ms, int | float) and ms >= 0 else 0


def _add_logprobs(result: TextResult, probs: Any, top: int, count: int) -> None:
    """Per-token log-probabilities, and the ``top`` alternatives of each, from the
    event's ``completion_probabilities`` (one entry per token)."""
    if not isinstance(probs, list):
        return
    probs = probs[:count]
    lps: list[float] = []
    ids: list[int] = []
    tops: list[float] = []
    for entry in probs:
        lp = entry.get("logprob") if isinstance(entry, dict) else None
        lps.append(float(lp) if isinstance(lp, int | float) else float("-inf"))
        if not top:
            continue
        alts = entry.get("top_logprobs") if isinstance(entry, dict) else None
        alts = alts[:top] if isinstance(alts, list) else []
        for alt in alts:
            ids.append(int(alt.get("id", 0)))
            tops.append(float(alt.get("logprob", float("-inf"))))
        for _ in range(top - len(alts)):  # fewer than asked: padded, as engines do
            ids.append(0)
            tops.append(float("-inf"))
    if len(lps) == count:
        result.logprobs = lps
        if top:
            result.top_logprobs = top
            result.top_token_ids = ids
            result.top_token_logprobs = tops


def props_of(doc: Any) -> tuple[int, int] | None:
    """``(context per slot, slots)`` from the server's ``GET /props`` (None: not llama.cpp)."""
    if not isinstance(doc, dict) or type(doc.get("total_slots")) is not int:
        return None
    settings = doc.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    return (n_ctx if type(n_ctx) is int and n_ctx > 0 else 0), doc["total_slots"]
