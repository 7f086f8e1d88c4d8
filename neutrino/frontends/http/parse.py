"""OpenAI request JSON -> :class:`GenerateRequest`, with a 400 naming the bad param.

Unknown fields are ignored, as OpenAI-compatible servers do; known fields with a
wrong type or value are refused. The vLLM-style extras (``top_k``, ``min_p``,
``repetition_penalty``, ``ignore_eos``, ``min_tokens``, ``stop_token_ids``,
``chat_template_kwargs``, ``add_generation_prompt``) are accepted too.
"""

from __future__ import annotations

import itertools
import json
import secrets
from collections.abc import Mapping
from typing import Any

from neutrino.config import LimitsConfig
from neutrino.engine.messages import Guided, GuidedMode, Image
from neutrino.errors import ErrorKind, NeutrinoError, bad_request
from neutrino.pipeline.images import MAX_IMAGES, decode_image_url
from neutrino.pipeline.request import GenerateRequest
from neutrino.pipeline.structured import parse_response_format
from neutrino.text.parsers.forced import forced_schema

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_MAX_INT = (1 << 31) - 1
MAX_TOP_LOGPROBS = 20


# Request ids: a random per-process prefix and a counter (unique, and cheap to make).
_PROCESS_TAG = secrets.token_hex(8)
_COUNTER = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}-{_PROCESS_TAG}{next(_COUNTER):08x}"


def _unsupported(message: str, param: str) -> NeutrinoError:
    return NeutrinoError(ErrorKind.UNSUPPORTED, message, param=param)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


class _Reader:
    """Typed access to one JSON object, raising 400s that name the field."""

    __slots__ = ("body",)

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.body = body

    def number(self, key: str, default: float, lo: float, hi: float) -> float:
        v = self.body.get(key)
        if v is None:
            return default
        if not _is_num(v):
            raise bad_request(f"{key} must be a number", key)
        if not lo <= v <= hi:
            raise bad_request(f"{key} must be between {lo:g} and {hi:g}", key)
        return float(v)

    def integer(self, key: str, lo: int, hi: int = _MAX_INT) -> int | None:
        v = self.body.get(key)
        if v is None:
            return None
        if not _is_int(v):
            raise bad_request(f"{key} must be an integer", key)
        if not lo <= v <= hi:
            raise bad_request(f"{key} must be between {lo} and {hi}", key)
        return int(v)

    def boolean(self, key: str, default: bool) -> bool:
        v = self.body.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise bad_request(f"{key} must be a boolean", key)
        return v

    def string(self, key: str, *, required: bool = False) -> str | None:
        v = self.body.get(key)
        if v is None:
            if required:
                raise bad_request(f"{key} is required", key)
            return None
        if not isinstance(v, str):
            raise bad_request(f"{key} must be a string", key)
        return v


def _stop(body: Mapping[str, Any], limits: LimitsConfig) -> list[str]:
    v = body.get("stop")
    if v is None:
        return []
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise bad_request("stop must be a string or a list of strings", "stop")
    if len(v) > limits.max_stop_sequences:
        raise bad_request(f"stop accepts at most {limits.max_stop_sequences} sequences", "stop")
    if any(not s for s in v):
        raise bad_request("stop sequences must not be empty", "stop")
    return list(v)


def _token_ids(v: Any, key: str) -> list[int]:
    if not isinstance(v, list) or not all(_is_int(t) and 0 <= t <= _MAX_INT for t in v):
        raise bad_request(f"{key} must be a list of non-negative integers", key)
    return list(v)


def _messages(v: Any, images: list[Image]) -> list[dict[str, Any]]:
    """Checked messages; image parts are decoded into ``images``, in order."""
    if not isinstance(v, list) or not v:
        raise bad_request("messages must be a non-empty array", "messages")
    out: list[dict[str, Any]] = []
    for i, m in enumerate(v):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise bad_request(f"{where} must be an object", where)
        role = m.get("role")
        if not isinstance(role, str) or role not in _ROLES:
            raise bad_request(f"{where}.role must be one of {sorted(_ROLES)}", f"{where}.role")
        content = m.get("content")
        if content is None:
            if role != "assistant":
                raise bad_request(f"{where}.content is required", f"{where}.content")
        elif isinstance(content, list):
            for j, part in enumerate(content):
                pwhere = f"{where}.content[{j}]"
                if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                    raise bad_request(f"{pwhere} must be an object with a type", pwhere)
                if part["type"] == "image_url":
                    url = part.get("image_url")
                    url = url.get("url") if isinstance(url, dict) else url
                    if not isinstance(url, str):
                        raise bad_request(f"{pwhere}.image_url.url must be a string", pwhere)
                    if len(images) >= MAX_IMAGES:
                        raise bad_request(f"at most {MAX_IMAGES} images per request", pwhere)
                    images.append(decode_image_url(url, pwhere))
                    continue
                if part["type"] != "text":
                    raise _unsupported(
                        f"content parts of type {part['type']!r} are not supported yet", pwhere
                    )
                if not isinstance(part.get("text"), str):
                    raise bad_request(f"{pwhere}.text must be a string", f"{pwhere}.text")
        elif not isinstance(content, str):
            raise bad_request(f"{where}.content must be a string or an array", f"{where}.content")
        out.append(m)
    return out


def _common(
    body: Mapping[str, Any], kind: str, limits: LimitsConfig, prefix: str
) -> GenerateRequest:
    r = _Reader(body)
    model = r.string("model", required=True)
    assert model is not None
    n = r.integer("n", 1, _MAX_INT)
    if n is not None and n > limits.max_n:
        raise bad_request(f"n must be at most {limits.max_n} on this server", "n")
    best_of = r.integer("best_of", 1)
    if best_of is not None and best_of > 1:
        raise _unsupported("best_of > 1 is not supported", "best_of")
    stream = r.boolean("stream", False)
    include_usage = False
    opts = body.get("stream_options")
    if opts is not None:
        if not isinstance(opts, dict):
            raise bad_request("stream_options must be an object", "stream_options")
        if not stream:
            raise bad_request("stream_options is only allowed with stream=true", "stream_options")
        iu = opts.get("include_usage", False)
        if not isinstance(iu, bool):
            raise bad_request(
                "stream_options.include_usage must be a boolean", "stream_options.include_usage"
            )
        include_usage = iu
    seed = body.get("seed")
    if seed is not None and (not _is_int(seed) or not -(1 << 63) <= seed < (1 << 64)):
        raise bad_request("seed must be an integer", "seed")
    req = GenerateRequest(
        request_id=new_id(prefix),
        model=model,
        kind="chat" if kind == "chat" else "completion",
        temperature=r.number("temperature", 1.0, 0.0, 2.0),
        top_p=r.number("top_p", 1.0, 0.0, 1.0),
        min_p=r.number("min_p", 0.0, 0.0, 1.0),
        seed=None if seed is None else seed % (1 << 64),
        stop=_stop(body, limits),
        presence_penalty=r.number("presence_penalty", 0.0, -2.0, 2.0),
        frequency_penalty=r.number("frequency_penalty", 0.0, -2.0, 2.0),
        repetition_penalty=r.number("repetition_penalty", 1.0, 0.0, 2.0),
        ignore_eos=r.boolean("ignore_eos", False),
        stream=stream,
        include_usage=include_usage,
        user=r.string("user"),
        n=n or 1,
    )
    if kind == "chat":
        req.logprobs = r.boolean("logprobs", False)
        top = r.integer("top_logprobs", 0, MAX_TOP_LOGPROBS)
        if top is not None:
            if not req.logprobs:
                raise bad_request("top_logprobs requires logprobs=true", "top_logprobs")
            req.top_logprobs = top
    else:  # completions: logprobs is the number of alternatives, 0..5
        top = r.integer("logprobs", 0, 5)
        if top is not None:
            req.logprobs = True
            req.top_logprobs = top
    top_k = r.integer("top_k", -1)
    if top_k is not None:
        req.top_k = -1 if top_k == 0 else top_k
    req.include_stop_str_in_output = r.boolean("include_stop_str_in_output", False)
    min_tokens = r.integer("min_tokens", 0)
    if min_tokens is not None:
        req.min_tokens = min_tokens
    if body.get("stop_token_ids") is not None:
        req.stop_token_ids = _token_ids(body["stop_token_ids"], "stop_token_ids")
    if req.top_p == 0.0:
        raise bad_request("top_p must be greater than 0", "top_p")
    return req


def _max_tokens(body: Mapping[str, Any], *keys: str) -> int | None:
    r = _Reader(body)
    for key in keys:
        v = r.integer(key, 1)
        if v is not None:
            return v
    return None


def _tools(body: Mapping[str, Any], req: GenerateRequest) -> None:
    """``tools``, ``tool_choice`` and ``parallel_tool_calls``, checked."""
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise bad_request("tools must be an array", "tools")
        for i, t in enumerate(tools):
            fn = t.get("function") if isinstance(t, dict) else None
            if (
                not isinstance(t, dict)
                or t.get("type", "function") != "function"
                or not isinstance(fn, dict)
                or not isinstance(fn.get("name"), str)
                or not fn["name"]
            ):
                raise bad_request(
                    f"tools[{i}] must be {{'type': 'function', 'function': {{'name': ...}}}}",
                    f"tools[{i}]",
                )
            if fn.get("parameters") is not None and not isinstance(fn["parameters"], dict):
                raise bad_request(
                    f"tools[{i}].function.parameters must be an object",
                    f"tools[{i}].function.parameters",
                )
        req.tools = tools or None
    choice = body.get("tool_choice")
    if choice is not None:
        names = {t["function"]["name"] for t in req.tools or ()}
        if isinstance(choice, dict):
            fn = choice.get("function")
            name = fn.get("name") if isinstance(fn, dict) else None
            if choice.get("type") != "function" or not isinstance(name, str):
                raise bad_request(
                    "tool_choice must be 'auto', 'none', 'required' or "
                    "{'type': 'function', 'function': {'name': ...}}",
                    "tool_choice",
                )
            if name not in names:
                raise bad_request(
                    f"tool_choice names {name!r}, which is not in tools", "tool_choice"
                )
            req.tool_choice = f"function:{name}"
        elif choice in ("auto", "none", "required"):
            if choice == "required" and not names:
                raise bad_request("tool_choice 'required' needs tools", "tool_choice")
            req.tool_choice = choice
        else:
            raise bad_request(
                "tool_choice must be 'auto', 'none', 'required' or a function", "tool_choice"
            )
    req.parallel_tool_calls = _Reader(body).boolean("parallel_tool_calls", True)


def parse_chat(body: Any, limits: LimitsConfig) -> GenerateRequest:
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    req = _common(body, "chat", limits, "chatcmpl")
    req.messages = _messages(body.get("messages"), req.images)
    req.max_tokens = _max_tokens(body, "max_completion_tokens", "max_tokens")
    req.guided, req.validator = parse_response_format(body.get("response_format"))
    _tools(body, req)
    if req.tool_choice == "required" or req.tool_choice.startswith("function:"):
        if req.guided is not None:
            raise bad_request(
                "a forced tool_choice cannot be combined with response_format", "tool_choice"
            )
        assert req.tools is not None
        name = req.tool_choice.partition(":")[2] or None
        schema = forced_schema(req.tools, name)
        req.guided = Guided(GuidedMode.JSON_SCHEMA, json.dumps(schema, ensure_ascii=False))
    fmt_r = body.get("reasoning_format")
    if fmt_r is not None:
        if fmt_r not in ("parsed", "raw", "hidden"):
            raise bad_request(
                "reasoning_format must be 'parsed', 'raw' or 'hidden'", "reasoning_format"
            )
        req.reasoning_format = fmt_r
    effort = body.get("reasoning_effort")
    if effort is not None:
        if effort not in ("minimal", "low", "medium", "high"):
            raise bad_request(
                "reasoning_effort must be 'minimal', 'low', 'medium' or 'high'", "reasoning_effort"
            )
        req.template_kwargs.setdefault("reasoning_effort", effort)
    kwargs = body.get("chat_template_kwargs")
    if kwargs is not None:
        if not isinstance(kwargs, dict):
            raise bad_request("chat_template_kwargs must be an object", "chat_template_kwargs")
        reserved = {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"}
        bad = reserved & kwargs.keys()
        if bad:
            raise bad_request(
                f"chat_template_kwargs may not set {sorted(bad)[0]}", "chat_template_kwargs"
            )
        req.template_kwargs = dict(kwargs)
    req.add_generation_prompt = _Reader(body).boolean("add_generation_prompt", True)
    return req


def parse_completion(body: Any, limits: LimitsConfig) -> GenerateRequest:
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    req = _common(body, "completion", limits, "cmpl")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        req.prompt = prompt
    elif isinstance(prompt, list) and prompt and all(_is_int(t) for t in prompt):
        req.prompt = _token_ids(prompt, "prompt")
    elif isinstance(prompt, list) and len(prompt) > 1:
        raise _unsupported("batched prompts are not supported; send one prompt", "prompt")
    else:
        raise bad_request("prompt must be a string or an array of token ids", "prompt")
    req.echo = _Reader(body).boolean("echo", False)
    if req.echo and req.logprobs:
        raise _unsupported(
            "echo with logprobs needs prompt logprobs, which engines do not report yet", "echo"
        )
    if body.get("suffix") is not None:
        raise _unsupported("suffix is not supported", "suffix")
    req.max_tokens = _max_tokens(body, "max_tokens")
    if req.max_tokens is None:
        req.max_tokens = 16  # OpenAI's default for completions
    return req
