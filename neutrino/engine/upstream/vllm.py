"""vLLM's OpenAI server as a token engine (sans-IO): a query becomes a streamed
``POST /v1/completions`` whose prompt is the token ids, with ``return_token_ids`` (each
chunk carries its delta's ids) and the usage at the end; the chunks become results.

vLLM takes the whole query as it is: stop ids, minimum tokens, seed, penalties, logprobs
(their tokens named by id: ``return_tokens_as_token_ids``) and every guided mode as its
structured outputs. The finish reason arrives before the usage chunk, so the last result
is held until the usage (or the stream's end) completes it.
"""

from __future__ import annotations

from typing import Any

import orjson

from neutrino.engine.messages import (
    EngineError,
    ErrorCode,
    FinishReason,
    GuidedMode,
    TextQuery,
    TextResult,
)
from neutrino.engine.upstream.errors import upstream_error

PATH = "/completions"  # under the base URL (".../v1")
DIALECT = "vLLM"

_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "abort": FinishReason.CANCELLED,
}


def body(query: TextQuery, upstream_model: str) -> bytes | EngineError:
    """The request body for ``query``, or the error a socket engine would answer with."""
    if query.images:
        return EngineError(ErrorCode.UNSUPPORTED, "images are not supported by this upstream")
    s = query.sampling
    doc: dict[str, object] = {
        "model": upstream_model,
        "prompt": query.prompt_tokens,
        "max_tokens": s.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "return_token_ids": True,
        "temperature": s.temperature,
        "top_p": s.top_p,
        "top_k": max(0, s.top_k),
        "min_p": s.min_p,
        "stop_token_ids": s.stop_token_ids,
        "ignore_eos": s.ignore_eos,
        "min_tokens": s.min_tokens,
        "presence_penalty": s.presence_penalty,
        "frequency_penalty": s.frequency_penalty,
        "repetition_penalty": s.repetition_penalty,
        "skip_special_tokens": False,
    }
    if s.seed is not None:
        doc["seed"] = s.seed
    if s.logprobs:
        doc["logprobs"] = s.top_logprobs
        doc["return_tokens_as_token_ids"] = True
    g = query.guided
    if g is not None and g.mode is not GuidedMode.NONE:
        doc["structured_outputs"] = _structured(g.mode, g.json_schema, g.choices, g.pattern)
    return orjson.dumps(doc)


def _structured(
    mode: GuidedMode, schema: str, choices: list[str], pattern: str
) -> dict[str, object]:
    if mode is GuidedMode.JSON_OBJECT:
        return {"json_object": True}
    if mode is GuidedMode.JSON_SCHEMA:
        return {"json": schema}
    if mode is GuidedMode.CHOICE:
        return {"choice": choices}
    if mode is GuidedMode.REGEX:
        return {"regex": pattern}
    return {"grammar": pattern}


class Answer:
    """One streamed answer: feed each event's data; each gives a result, an error or
    nothing. ``done`` once the last result was given (or it failed)."""

    __slots__ = ("_final", "_logprobs", "_top", "done", "sent")

    cut = False  # never ended here: the server applies the stop ids itself

    def __init__(self, query: TextQuery) -> None:
        self._logprobs = query.sampling.logprobs
        self._top = query.sampling.top_logprobs
        self._final: TextResult | None = None  # finished, waiting for the usage
        self.done = False
        self.sent = 0

    def event(self, data: str | bytes) -> TextResult | EngineError | None:
        if data == "[DONE]" or data == b"[DONE]":
            return self._end()
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            doc = None
        if not isinstance(doc, dict):
            self.done = True
            return EngineError(ErrorCode.PROTOCOL, "the upstream sent an event that is not JSON")
        if "error" in doc or doc.get("object") == "error":
            self.done = True
            return upstream_error(0, doc)
        usage = doc.get("usage")
        choices = doc.get("choices") or ()
        result = self._choice(choices[0]) if choices and isinstance(choices[0], dict) else None
        if isinstance(usage, dict) and self._final is not None:
            _add_usage(self._final, usage)
            return self._end()
        return result

    def _choice(self, choice: dict[str, Any]) -> TextResult | EngineError | None:
        ids = choice.get("token_ids") or []
        if not isinstance(ids, list) or not all(type(t) is int for t in ids):
            self.done = True
            return EngineError(ErrorCode.PROTOCOL, "the upstream's chunk carries no token ids")
        result = TextResult(ids)
        if self._logprobs:
            _add_logprobs(result, choice.get("logprobs"), self._top)
        self.sent += len(ids)
        reason = choice.get("finish_reason")
        if reason is None:
            return result if ids else None
        result.finish_reason = _FINISH.get(reason, FinishReason.STOP)
        stop = choice.get("stop_reason")
        if type(stop) is int:
            result.stop_token_id = stop
        result.completion_tokens = self.sent
        self._final = result  # given once the usage (or the end) arrives
        return None

    def _end(self) -> TextResult | EngineError | None:
        if self.done:
            return None
        self.done = True
        final, self._final = self._final, None
        return final if final is not None else self.ended_early()

    def ended_early(self) -> EngineError:
        return EngineError(ErrorCode.INTERNAL, "the upstream's answer ended before it was done")


def _add_usage(result: TextResult, usage: dict[str, Any]) -> None:
    prompt = usage.get("prompt_tokens")
    result.prompt_tokens = prompt if type(prompt) is int else 0
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    result.cached_tokens = cached if type(cached) is int else 0


def _token_id(name: Any) -> int:
    """``token_id:123`` (``return_tokens_as_token_ids``) -> 123."""
    if isinstance(name, str) and name.startswith("token_id:"):
        try:
            return int(name[9:])
        except ValueError:
            pass
    return 0


def _add_logprobs(result: TextResult, lp: Any, top: int) -> None:
    """The completions API's logprobs (``token_logprobs``; ``top_logprobs`` maps each
    alternative's ``token_id:N`` to its log-probability)."""
    if not isinstance(lp, dict):
        return
    own = lp.get("token_logprobs") or []
    if len(own) != len(result.tokens):
        return
    result.logprobs = [float(x) if isinstance(x, int | float) else float("-inf") for x in own]
    if not top:
        return
    ids: list[int] = []
    lps: list[float] = []
    for alts in lp.get("top_logprobs") or [{}] * len(own):
        ranked = sorted(alts.items(), key=lambda kv: -kv[1])[:top] if isinstance(alts, dict) else []
        ids += [_token_id(name) for name, _ in ranked]
        lps += [float(v) for _, v in ranked]
        ids += [0] * (top - len(ranked))
        lps += [float("-inf")] * (top - len(ranked))
    result.top_logprobs = top
    result.top_token_ids = ids
    result.top_token_logprobs = lps


def version_of(doc: Any) -> str | None:
    """vLLM's version from ``GET /version`` (None: not vLLM)."""
    version = doc.get("version") if isinstance(doc, dict) else None
    return version if isinstance(version, str) else None
