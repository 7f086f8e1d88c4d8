"""Sans-IO: a query as vLLM's sampling parameters, and vLLM's outputs as results.

Nothing here imports vLLM: the parameters are plain keyword dictionaries (the handler
builds ``SamplingParams`` and ``StructuredOutputsParams`` from them), and an output is
read through the attributes vLLM's ``RequestOutput`` has, so the rules are tested
without the engine.

A moved answer's tokens so far (``forced_tokens``) follow the prompt, as if vLLM had
generated them: they count in ``max_tokens``, ``min_tokens`` and the completion tokens,
not in the prompt's. vLLM cannot advance a structured output's grammar over them (the
engine's hello says so: guided answers are not moved to it), and its presence and
frequency penalties count only what it generates after the move.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from neutrino.engine.messages import FinishReason, GuidedMode, TextQuery, TextResult


def prompt_ids(query: TextQuery) -> list[int]:
    """What vLLM prefills: the prompt, then a moved answer's tokens so far."""
    return [*query.prompt_tokens, *query.forced_tokens]


def sampling_kwargs(query: TextQuery) -> dict[str, Any]:
    """``SamplingParams`` keywords for ``query``: token ids out, no detokenizing."""
    s = query.sampling
    forced = len(query.forced_tokens)
    kw: dict[str, Any] = {
        "n": 1,
        "max_tokens": s.max_tokens - forced,
        "temperature": s.temperature,
        "top_p": s.top_p,
        "top_k": max(0, s.top_k),  # 0: every token (ours: -1)
        "min_p": s.min_p,
        "seed": s.seed,
        "stop_token_ids": list(s.stop_token_ids),
        "ignore_eos": s.ignore_eos,
        "min_tokens": max(0, s.min_tokens - forced),
        "presence_penalty": s.presence_penalty,
        "frequency_penalty": s.frequency_penalty,
        "repetition_penalty": s.repetition_penalty,
        "detokenize": False,
        "skip_special_tokens": False,
    }
    if s.logprobs:
        kw["logprobs"] = s.top_logprobs  # vLLM adds the sampled token's own
    return kw


def structured_kwargs(query: TextQuery) -> dict[str, Any] | None:
    """``StructuredOutputsParams`` keywords for the query's guided mode (None: none)."""
    g = query.guided
    if g is None or g.mode is GuidedMode.NONE:
        return None
    if g.mode is GuidedMode.JSON_OBJECT:
        return {"json_object": True}
    if g.mode is GuidedMode.JSON_SCHEMA:
        return {"json": g.json_schema}
    if g.mode is GuidedMode.CHOICE:
        return {"choice": list(g.choices)}
    if g.mode is GuidedMode.REGEX:
        return {"regex": g.pattern}
    return {"grammar": g.pattern}


class Logprob(Protocol):
    @property
    def logprob(self) -> float: ...

    @property
    def rank(self) -> int | None: ...


class Completion(Protocol):
    @property
    def token_ids(self) -> Sequence[int]: ...

    @property
    def logprobs(self) -> Sequence[Mapping[int, Logprob]] | None: ...

    @property
    def finish_reason(self) -> str | None: ...

    @property
    def stop_reason(self) -> int | str | None: ...


class Output(Protocol):
    """What is read of vLLM's ``RequestOutput``."""

    @property
    def outputs(self) -> Sequence[Completion]: ...

    @property
    def finished(self) -> bool: ...

    @property
    def prompt_token_ids(self) -> Sequence[int] | None: ...

    @property
    def num_cached_tokens(self) -> int | None: ...


_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "abort": FinishReason.CANCELLED,
}


def result_of(out: Output, top: int, generated: int, forced: int = 0) -> TextResult:
    """The result for one delta output (``generated``: tokens sent before it, ``forced``:
    a moved answer's tokens before those); the last carries the finish reason and the
    counts."""
    c = out.outputs[0]
    result = TextResult(list(c.token_ids))
    if c.logprobs is not None:
        _add_logprobs(result, c.logprobs, result.tokens, top)
    if out.finished:
        result.finish_reason = _FINISH.get(c.finish_reason or "", FinishReason.STOP)
        if type(c.stop_reason) is int:
            result.stop_token_id = c.stop_reason
        result.prompt_tokens = len(out.prompt_token_ids or ()) - forced
        result.cached_tokens = min(out.num_cached_tokens or 0, result.prompt_tokens)
        result.completion_tokens = forced + generated + len(result.tokens)
    return result


def _add_logprobs(
    result: TextResult, per_token: Sequence[Mapping[int, Logprob]], tokens: list[int], top: int
) -> None:
    """Each token's own log-probability, and its ``top`` alternatives by rank."""
    lps: list[float] = []
    ids: list[int] = []
    tops: list[float] = []
    for token, entry in zip(tokens, per_token, strict=False):
        own = entry.get(token)
        lps.append(own.logprob if own is not None else float("-inf"))
        if not top:
            continue
        ranked = sorted(
            ((lp.rank or 1 << 30, t, lp.logprob) for t, lp in entry.items()), key=lambda x: x[0]
        )[:top]
        for _, t, lp in ranked:
            ids.append(t)
            tops.append(lp)
        for _ in range(top - len(ranked)):
            ids.append(0)
            tops.append(float("-inf"))
    result.logprobs = lps
    if top:
        result.top_logprobs = top
        result.top_token_ids = ids
        result.top_token_logprobs = tops
