"""Sans-IO mapping between ``neutrino.v1`` messages and the pipeline's types.

Validation mirrors the HTTP front end's ranges; a bad field raises a BAD_REQUEST
:class:`NeutrinoError` naming it (INVALID_ARGUMENT on the wire).
"""

from __future__ import annotations

from typing import Any, Literal

from neutrino.config import LimitsConfig
from neutrino.errors import bad_request
from neutrino.frontends.common import new_id
from neutrino.frontends.grpc.stubs import common_pb2, inference_pb2
from neutrino.pipeline.generation import Outcome
from neutrino.pipeline.modalities import ModelInfo
from neutrino.pipeline.request import GenerateRequest, check_stops

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_MAX_INT = (1 << 31) - 1
_COMPLETION_MAX_TOKENS = 16  # OpenAI's default for completions, as over HTTP


def _number(
    msg: inference_pb2.GenerateRequest, key: str, default: float, lo: float, hi: float
) -> float:
    if not msg.HasField(key):
        return default
    v = float(getattr(msg, key))
    if not lo <= v <= hi:  # NaN fails too
        raise bad_request(f"{key} must be between {lo:g} and {hi:g}", key)
    return v


def _integer(msg: inference_pb2.GenerateRequest, key: str, lo: int) -> int | None:
    if not msg.HasField(key):
        return None
    v = int(getattr(msg, key))
    if v < lo:
        raise bad_request(f"{key} must be between {lo} and {_MAX_INT}", key)
    return v


def _messages(chat: inference_pb2.Chat) -> list[dict[str, Any]]:
    if not chat.messages:
        raise bad_request("chat.messages must not be empty", "chat.messages")
    out: list[dict[str, Any]] = []
    for i, m in enumerate(chat.messages):
        if m.role not in ROLES:
            where = f"chat.messages[{i}].role"
            raise bad_request(f"{where} must be one of {sorted(ROLES)}", where)
        out.append({"role": m.role, "content": m.content})
    return out


def to_request(
    msg: inference_pb2.GenerateRequest, limits: LimitsConfig, *, stream: bool
) -> GenerateRequest:
    """Validate ``msg`` and build the pipeline's request (raises BAD_REQUEST)."""
    if not msg.model:
        raise bad_request("model is required", "model")
    which = msg.WhichOneof("input")
    if which is None:
        raise bad_request("set either chat or completion", "input")
    kind: Literal["chat", "completion"] = "chat" if which == "chat" else "completion"
    stop = list(msg.stop)
    check_stops(stop, limits)
    if any(t > _MAX_INT for t in msg.stop_token_ids):
        raise bad_request(f"stop_token_ids must be at most {_MAX_INT}", "stop_token_ids")
    top_p = _number(msg, "top_p", 1.0, 0.0, 1.0)
    if top_p == 0.0:
        raise bad_request("top_p must be greater than 0", "top_p")
    top_k = _integer(msg, "top_k", -1)
    req = GenerateRequest(
        request_id=new_id("chatcmpl" if kind == "chat" else "cmpl"),
        model=msg.model,
        kind=kind,
        max_tokens=_integer(msg, "max_tokens", 1),
        temperature=_number(msg, "temperature", 1.0, 0.0, 2.0),
        top_p=top_p,
        top_k=-1 if top_k is None or top_k == 0 else top_k,
        min_p=_number(msg, "min_p", 0.0, 0.0, 1.0),
        seed=msg.seed if msg.HasField("seed") else None,
        stop=stop,
        stop_token_ids=list(msg.stop_token_ids),
        presence_penalty=_number(msg, "presence_penalty", 0.0, -2.0, 2.0),
        frequency_penalty=_number(msg, "frequency_penalty", 0.0, -2.0, 2.0),
        repetition_penalty=_number(msg, "repetition_penalty", 1.0, 0.0, 2.0),
        ignore_eos=msg.ignore_eos,
        min_tokens=_integer(msg, "min_tokens", 0) or 0,
        stream=stream,
        include_usage=stream,
        user=msg.user or None,
    )
    if kind == "chat":
        req.messages = _messages(msg.chat)
        if msg.chat.HasField("add_generation_prompt"):
            req.add_generation_prompt = msg.chat.add_generation_prompt
    else:
        req.prompt = msg.completion.prompt
        if req.max_tokens is None:
            req.max_tokens = _COMPLETION_MAX_TOKENS
    return req


_FINISH = {
    "stop": inference_pb2.FINISH_REASON_STOP,
    "length": inference_pb2.FINISH_REASON_LENGTH,
}


def finish_reason(outcome: Outcome) -> inference_pb2.FinishReason:
    return _FINISH.get(outcome.finish_reason, inference_pb2.FINISH_REASON_UNSPECIFIED)


def stop_reason(outcome: Outcome) -> inference_pb2.StopReason | None:
    r = outcome.stop_reason
    if isinstance(r, str):
        return inference_pb2.StopReason(stop_string=r)
    if isinstance(r, int):
        return inference_pb2.StopReason(stop_token_id=r)
    return None


def usage(outcome: Outcome) -> common_pb2.Usage:
    t = outcome.timings
    return common_pb2.Usage(
        prompt_tokens=outcome.prompt_tokens,
        completion_tokens=outcome.completion_tokens,
        total_tokens=outcome.prompt_tokens + outcome.completion_tokens,
        cached_tokens=outcome.cached_tokens,
        queue_time=t.get("queue_time", 0.0),
        prompt_time=t.get("prompt_time", 0.0),
        completion_time=t.get("completion_time", 0.0),
        total_time=t.get("total_time", 0.0),
    )


def model_card(info: ModelInfo, created: int) -> common_pb2.Model:
    return common_pb2.Model(
        id=info.name, context_length=info.context_length, created=created, owned_by="neutrino"
    )
