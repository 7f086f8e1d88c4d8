"""Limits and sampling: what a generation request may ask of its model, as the engine gets it.

Checked once the prompt's length and the model are known: the context and the model's
own output limit, the non-streamed answer's budget (``[limits] max_unstreamed_tokens``),
``logit_bias`` ids within the vocabulary. The result is the engine's :class:`Sampling`.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from neutrino.config import LimitsConfig
from neutrino.engine.messages import ModelInfo, Sampling
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.pipeline.models import ModelText
from neutrino.pipeline.prompt import context_error
from neutrino.pipeline.request import GenerateRequest
from neutrino.pipeline.sampling import SamplingParams


def figures_per_token(req: GenerateRequest) -> int:
    """What each token adds to a non-streamed answer: n * (1 + top_logprobs)."""
    s = req.sampling
    return req.n * (1 + (s.top_logprobs if s.logprobs else 0))


def _check_bias(bias: Mapping[int, float], vocab: int) -> None:
    """Every logit_bias id within the vocabulary, as vLLM and OpenAI require."""
    worst = max(bias)
    if worst >= vocab:
        raise NeutrinoError(
            ErrorKind.BAD_REQUEST,
            f"Invalid key in logit_bias: {worst}; token ids must be below the model's "
            f"vocabulary size {vocab}",
            param="logit_bias",
        )


def _check_budget(req: GenerateRequest, max_tokens: int, limits: LimitsConfig) -> None:
    """A non-streamed answer is built whole: n * max_tokens * (1 + top_logprobs)
    tokens and alternatives at most (a stream is paced by its client)."""
    per_token = figures_per_token(req)
    cost, budget = max_tokens * per_token, limits.max_unstreamed_tokens
    if cost > budget:
        k = per_token // req.n
        raise NeutrinoError(
            ErrorKind.BAD_REQUEST,
            f"a non-streamed answer of n * max_tokens * (1 + top_logprobs) = {req.n} * "
            f"{max_tokens} * {k} = {cost:,} exceeds this server's {budget:,}; "
            "stream it, or ask for fewer tokens",
            param="max_tokens",
        )


def _max_tokens(req: GenerateRequest, room: int, limits: LimitsConfig) -> int:
    """The request's max_tokens, or for one without it all the room left (a non-streamed
    answer's within its budget)."""
    max_tokens = req.sampling.max_tokens
    if max_tokens is None:
        if req.stream:
            return room
        return max(1, min(room, limits.max_unstreamed_tokens // figures_per_token(req)))
    if not req.stream:
        _check_budget(req, max_tokens, limits)
    return max_tokens


def model_defaults(s: SamplingParams, defaults: Mapping[str, float]) -> SamplingParams:
    """``s`` with the model's own sampling defaults where its client gave none."""
    given = s.given
    if given is None:
        return s
    fill = {k: v for k, v in defaults.items() if k not in given}
    return msgspec.structs.replace(s, **fill) if fill else s


def sampling(
    req: GenerateRequest, text: ModelText, info: ModelInfo, n_prompt: int, limits: LimitsConfig
) -> Sampling:
    """The engine's sampling parameters for ``req``, whose prompt has ``n_prompt`` tokens."""
    ctx = info.context_length
    param = "messages" if req.prompt.kind == "chat" else "prompt"
    if n_prompt == 0:
        raise NeutrinoError(ErrorKind.BAD_REQUEST, "the prompt is empty", param=param)
    if ctx and n_prompt >= ctx:
        raise context_error(ctx, str(n_prompt), param)
    room = ctx - n_prompt if ctx else 1 << 31
    if info.max_output_tokens:
        room = min(room, info.max_output_tokens)
    s = req.sampling
    if text.defaults:
        s = model_defaults(s, text.defaults)
    if s.logit_bias:
        _check_bias(s.logit_bias, text.tokenizer.vocab_size)
    max_tokens = _max_tokens(req, room, limits)
    if max_tokens > room:
        raise NeutrinoError(
            ErrorKind.CONTEXT_LENGTH,
            f"this model's maximum context length is {ctx} tokens; the prompt has "
            f"{n_prompt} tokens and {max_tokens} were requested for the completion",
            param="max_tokens",
        )
    stop_ids = [] if s.ignore_eos else sorted(text.stop_token_ids)
    stop_ids += [t for t in req.stops.token_ids if t not in text.stop_token_ids]
    return Sampling(
        max_tokens=max_tokens,
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=s.top_k,
        min_p=s.min_p,
        seed=s.seed,
        stop_token_ids=stop_ids,
        presence_penalty=s.presence_penalty,
        frequency_penalty=s.frequency_penalty,
        repetition_penalty=s.repetition_penalty,
        ignore_eos=s.ignore_eos,
        min_tokens=s.min_tokens,
        logprobs=s.logprobs,
        top_logprobs=s.top_logprobs,
    )
