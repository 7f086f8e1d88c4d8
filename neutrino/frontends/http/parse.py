"""OpenAI request JSON -> :class:`GenerateRequest`, with a 400 naming the bad param.

Unknown fields are ignored, as OpenAI-compatible servers do; known fields with a
wrong type or value are refused. The vLLM-style extras (``top_k``, ``min_p``,
``repetition_penalty``, ``ignore_eos``, ``min_tokens``, ``stop_token_ids``,
``chat_template_kwargs``, ``add_generation_prompt``) are accepted too.

Parsing is table-driven: each field a body carries is looked up in its endpoint's
table of setters, so a request pays for the fields it sends, not for every field
the API knows. Rules that join two fields run afterwards, only when one is present.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from neutrino.config import LimitsConfig
from neutrino.errors import bad_request, unsupported
from neutrino.frontends.common import new_id
from neutrino.pipeline.fields import is_int, is_num
from neutrino.pipeline.images import MAX_IMAGES, Image, decode_image_url
from neutrino.pipeline.request import GenerateRequest, ToolChoice, check_stops, tool_guided
from neutrino.pipeline.structured import (
    constrain,
    parse_response_format,
    parse_structured_outputs,
    vllm_constraint,
)

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_MAX_INT = (1 << 31) - 1
MAX_TOP_LOGPROBS = 20
_RESERVED_KWARGS = frozenset(
    {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"}
)


# Request ids: a random per-process prefix and a counter (unique, and cheap to make).
# ---------------------------------------------------------------- checked values


def _number(key: str, v: Any, lo: float, hi: float) -> float:
    if not is_num(v):
        raise bad_request(f"{key} must be a number", key)
    if not lo <= v <= hi:
        raise bad_request(f"{key} must be between {lo:g} and {hi:g}", key)
    return float(v)


def _integer(key: str, v: Any, lo: int, hi: int = _MAX_INT) -> int:
    """An integer field; a whole number written as a float (``100.0``, ``1e30``) is
    taken as its integer, as vLLM's validation does, so a huge one hears the limit."""
    if isinstance(v, float) and v.is_integer():
        if not lo <= v <= hi:
            raise bad_request(f"{key} must be an integer between {lo} and {hi}", key)
        v = int(v)
    if not is_int(v):
        raise bad_request(f"{key} must be an integer", key)
    if not lo <= v <= hi:
        raise bad_request(f"{key} must be between {lo} and {hi}", key)
    return int(v)


def _boolean(key: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise bad_request(f"{key} must be a boolean", key)
    return v


def _string(key: str, v: Any) -> str:
    if not isinstance(v, str):
        raise bad_request(f"{key} must be a string", key)
    return v


def _logit_bias(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    """Token id (a string of digits, as JSON keys are) -> bias from -100 to 100; at most
    ``max_logit_bias`` entries (the vocabulary is checked once the model's is known)."""
    if not isinstance(v, dict):
        raise bad_request("logit_bias must be an object of token ids to biases", "logit_bias")
    if len(v) > limits.max_logit_bias:
        raise bad_request(
            f"logit_bias has {len(v)} entries; at most {limits.max_logit_bias} are allowed",
            "logit_bias",
        )
    bias: dict[int, float] = {}
    for key, value in v.items():
        if not (key.isascii() and key.isdigit() and len(key) <= 10):
            raise bad_request(
                f"Invalid key in logit_bias: {key[:32]!r} is not a token id", "logit_bias"
            )
        if not is_num(value) or not -100 <= value <= 100:
            raise bad_request(
                f"logit_bias[{key}] must be a number between -100 and 100", "logit_bias"
            )
        bias[int(key)] = float(value)
    req.logit_bias = bias or None


def _token_ids(v: Any, key: str) -> list[int]:
    if not isinstance(v, list) or not all(is_int(t) and 0 <= t <= _MAX_INT for t in v):
        raise bad_request(f"{key} must be a list of non-negative integers", key)
    return list(v)


# ---------------------------------------------------------------- field setters

# A setter checks one present, non-null field and stores it on the request.
Setter = Callable[[GenerateRequest, Any, LimitsConfig], None]


def _number_field(key: str, lo: float, hi: float) -> Setter:
    def put(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
        setattr(req, key, _number(key, v, lo, hi))

    return put


def _bool_field(key: str) -> Setter:
    def put(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
        setattr(req, key, _boolean(key, v))

    return put


def _model(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    req.model = _string("model", v)


def _n(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    n = _integer("n", v, 1)
    if n > limits.max_n:
        raise bad_request(f"n must be at most {limits.max_n} on this server", "n")
    req.n = n


def _best_of(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    if _integer("best_of", v, 1) > 1:
        raise unsupported("best_of > 1 is not supported", "best_of")


def _stream_options(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    # That it needs stream=true is checked once every field is in (see _fill).
    if not isinstance(v, dict):
        raise bad_request("stream_options must be an object", "stream_options")
    iu = v.get("include_usage", False)
    if not isinstance(iu, bool):
        raise bad_request(
            "stream_options.include_usage must be a boolean", "stream_options.include_usage"
        )
    req.include_usage = iu


def _seed(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    if not is_int(v) or not -(1 << 63) <= v < (1 << 64):
        raise bad_request("seed must be an integer", "seed")
    req.seed = v % (1 << 64)


def _top_p(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    top_p = _number("top_p", v, 0.0, 1.0)
    if top_p == 0.0:
        raise bad_request("top_p must be greater than 0", "top_p")
    req.top_p = top_p


def _stop(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise bad_request("stop must be a string or a list of strings", "stop")
    check_stops(v, limits)
    req.stop = list(v)


def _user(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    req.user = _string("user", v)


def _top_k(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    top_k = _integer("top_k", v, -1)
    req.top_k = -1 if top_k == 0 else top_k


def _min_tokens(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    req.min_tokens = _integer("min_tokens", v, 0)


def _stop_token_ids(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    req.stop_token_ids = _token_ids(v, "stop_token_ids")


def _max_tokens(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    if req.max_tokens is None:  # max_completion_tokens, when also sent, wins
        req.max_tokens = _integer("max_tokens", v, 1)
    else:
        _integer("max_tokens", v, 1)


def _max_completion_tokens(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    req.max_tokens = _integer("max_completion_tokens", v, 1)


def _structured_outputs(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    guided = parse_structured_outputs(v, max_depth=limits.max_schema_depth)
    constrain(req, guided, None, "structured_outputs")


def _guided_field(kind: str) -> Setter:
    """vLLM's older ``guided_json``, ``guided_regex``, ``guided_choice``, ``guided_grammar``."""
    key = f"guided_{kind}"

    def put(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
        constrain(req, vllm_constraint(kind, v, key, limits.max_schema_depth), None, key)

    return put


def _guided_whitespace(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    raise unsupported("guided_whitespace_pattern is not supported", "guided_whitespace_pattern")


_GUIDED: dict[str, Setter] = {
    "structured_outputs": _structured_outputs,
    "guided_json": _guided_field("json"),
    "guided_regex": _guided_field("regex"),
    "guided_choice": _guided_field("choice"),
    "guided_grammar": _guided_field("grammar"),
    "guided_whitespace_pattern": _guided_whitespace,
    # guided_decoding_backend picks how, not what, to decode: the engine's business.
}

_COMMON: dict[str, Setter] = {
    **_GUIDED,
    "model": _model,
    "n": _n,
    "best_of": _best_of,
    "stream": _bool_field("stream"),
    "stream_options": _stream_options,
    "seed": _seed,
    "temperature": _number_field("temperature", 0.0, 2.0),
    "top_p": _top_p,
    "min_p": _number_field("min_p", 0.0, 1.0),
    "stop": _stop,
    "presence_penalty": _number_field("presence_penalty", -2.0, 2.0),
    "frequency_penalty": _number_field("frequency_penalty", -2.0, 2.0),
    "repetition_penalty": _number_field("repetition_penalty", 0.0, 2.0),
    "ignore_eos": _bool_field("ignore_eos"),
    "user": _user,
    "top_k": _top_k,
    "include_stop_str_in_output": _bool_field("include_stop_str_in_output"),
    "min_tokens": _min_tokens,
    "stop_token_ids": _stop_token_ids,
    "max_tokens": _max_tokens,
    "logit_bias": _logit_bias,
}


# ---------------------------------------------------------------- chat fields


def _messages(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    """Checked messages; image parts are decoded into ``req.images``, in order."""
    if not isinstance(v, list) or not v:
        raise bad_request("messages must be a non-empty array", "messages")
    if len(v) > limits.max_messages:
        raise bad_request(
            f"messages has {len(v)} entries; at most {limits.max_messages} are allowed",
            "messages",
        )
    images: list[Image] = req.images
    for i, m in enumerate(v):
        if not isinstance(m, dict):
            raise bad_request(f"messages[{i}] must be an object", f"messages[{i}]")
        role = m.get("role")
        if role.__class__ is not str or role not in _ROLES:
            where = f"messages[{i}]"
            raise bad_request(f"{where}.role must be one of {sorted(_ROLES)}", f"{where}.role")
        if "tool_calls" in m:
            _check_tool_calls(m["tool_calls"], f"messages[{i}].tool_calls")
        content = m.get("content")
        if content.__class__ is str:
            continue
        where = f"messages[{i}]"
        if content is None:
            if role != "assistant":
                raise bad_request(f"{where}.content is required", f"{where}.content")
        elif isinstance(content, list):
            for j, part in enumerate(content):
                _content_part(part, f"{where}.content[{j}]", images)
        elif not isinstance(content, str):
            raise bad_request(f"{where}.content must be a string or an array", f"{where}.content")
    req.messages = v


def _check_tool_calls(calls: Any, where: str) -> None:
    """An assistant turn's earlier tool calls: null, or OpenAI's shape (arguments may also
    be an object, as some clients send them)."""
    if calls is None:
        return
    if not isinstance(calls, list):
        raise bad_request(f"{where} must be an array", where)
    for k, call in enumerate(calls):
        at = f"{where}[{k}]"
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise bad_request(f"{at} must be {{'function': {{'name': ..., 'arguments': ...}}}}", at)
        if not isinstance(fn.get("arguments", ""), str | dict):
            raise bad_request(
                f"{at}.function.arguments must be a JSON string", f"{at}.function.arguments"
            )
        if not isinstance(call.get("id", ""), str):
            raise bad_request(f"{at}.id must be a string", f"{at}.id")
        if call.get("type", "function") != "function":
            raise bad_request(f"{at}.type must be 'function'", f"{at}.type")


def _content_part(part: Any, where: str, images: list[Image]) -> None:
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        raise bad_request(f"{where} must be an object with a type", where)
    kind = part["type"]
    if kind == "image_url":
        url = part.get("image_url")
        url = url.get("url") if isinstance(url, dict) else url
        if not isinstance(url, str):
            raise bad_request(f"{where}.image_url.url must be a string", where)
        if len(images) >= MAX_IMAGES:
            raise bad_request(f"at most {MAX_IMAGES} images per request", where)
        images.append(decode_image_url(url, where))
        return
    if kind != "text":
        raise unsupported(f"content parts of type {kind!r} are not supported yet", where)
    if not isinstance(part.get("text"), str):
        raise bad_request(f"{where}.text must be a string", f"{where}.text")


def _chat_logprobs(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    req.logprobs = _boolean("logprobs", v)


def _top_logprobs(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    # That it needs logprobs=true is checked once every field is in (see parse_chat).
    req.top_logprobs = _integer("top_logprobs", v, 0, MAX_TOP_LOGPROBS)


def _response_format(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    guided, validator = parse_response_format(v, limits.max_schema_depth)
    constrain(req, guided, validator, "response_format")


def _tools(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    if not isinstance(v, list):
        raise bad_request("tools must be an array", "tools")
    if len(v) > limits.max_tools:
        raise bad_request(
            f"tools has {len(v)} entries; at most {limits.max_tools} are allowed", "tools"
        )
    for i, t in enumerate(v):
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
    req.tools = v or None


def _reasoning_format(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    if v not in ("parsed", "raw", "hidden"):
        raise bad_request(
            "reasoning_format must be 'parsed', 'raw' or 'hidden'", "reasoning_format"
        )
    req.reasoning_format = v


def _reasoning_effort(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    # Stored as a template variable by parse_chat, unless chat_template_kwargs sets it.
    if v not in ("minimal", "low", "medium", "high"):
        raise bad_request(
            "reasoning_effort must be 'minimal', 'low', 'medium' or 'high'", "reasoning_effort"
        )


def _template_kwargs(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    if not isinstance(v, dict):
        raise bad_request("chat_template_kwargs must be an object", "chat_template_kwargs")
    bad = _RESERVED_KWARGS & v.keys()
    if bad:
        raise bad_request(
            f"chat_template_kwargs may not set {sorted(bad)[0]}", "chat_template_kwargs"
        )
    req.template_kwargs = dict(v)


_CHAT: dict[str, Setter] = {
    **_COMMON,
    "messages": _messages,
    "max_completion_tokens": _max_completion_tokens,
    "logprobs": _chat_logprobs,
    "top_logprobs": _top_logprobs,
    "response_format": _response_format,
    "tools": _tools,
    "tool_choice": lambda req, v, limits: None,  # needs tools: see _tool_choice
    "parallel_tool_calls": _bool_field("parallel_tool_calls"),
    "reasoning_format": _reasoning_format,
    "reasoning_effort": _reasoning_effort,
    "chat_template_kwargs": _template_kwargs,
    "add_generation_prompt": _bool_field("add_generation_prompt"),
}


# ---------------------------------------------------------------- completion fields


def _prompt(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    if isinstance(v, list) and len(v) == 1 and isinstance(v[0], str | list):
        v = v[0]  # a batch of one
    if isinstance(v, str):
        req.prompt = v
    elif isinstance(v, list) and v and all(is_int(t) for t in v):
        req.prompt = _token_ids(v, "prompt")
    elif isinstance(v, list) and len(v) > 1:
        raise unsupported("batched prompts are not supported; send one prompt", "prompt")
    else:
        raise bad_request("prompt must be a string or an array of token ids", "prompt")


def _completion_logprobs(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    # For completions, logprobs is the number of alternatives, 0..5.
    req.top_logprobs = _integer("logprobs", v, 0, 5)
    req.logprobs = True


def _suffix(req: GenerateRequest, v: Any, limits: LimitsConfig) -> None:
    raise unsupported("suffix is not supported", "suffix")


_COMPLETION: dict[str, Setter] = {
    **_COMMON,
    "prompt": _prompt,
    "logprobs": _completion_logprobs,
    "echo": _bool_field("echo"),
    "suffix": _suffix,
}


# ---------------------------------------------------------------- entry points


def _fill(body: Any, table: dict[str, Setter], req: GenerateRequest, limits: LimitsConfig) -> None:
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    get = table.get
    for key, v in body.items():
        put = get(key)
        if put is not None and v is not None:
            put(req, v, limits)
    if not req.model:
        raise bad_request("model is required", "model")
    if not req.stream and body.get("stream_options") is not None:
        raise bad_request("stream_options is only allowed with stream=true", "stream_options")


def parse_chat(body: Any, limits: LimitsConfig) -> GenerateRequest:
    req = GenerateRequest(request_id=new_id("chatcmpl"), model="", kind="chat")
    _fill(body, _CHAT, req, limits)
    if req.messages is None:
        raise bad_request("messages must be a non-empty array", "messages")
    if not req.logprobs and body.get("top_logprobs") is not None:
        raise bad_request("top_logprobs requires logprobs=true", "top_logprobs")
    if body.get("tool_choice") is not None:
        _tool_choice(req, body["tool_choice"])
    effort = body.get("reasoning_effort")
    if effort is not None:
        req.template_kwargs.setdefault("reasoning_effort", effort)
    return req


def _tool_choice(req: GenerateRequest, choice: Any) -> None:
    """``tool_choice``, checked against ``tools``."""
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
            raise bad_request(f"tool_choice names {name!r}, which is not in tools", "tool_choice")
        req.tool_choice = ToolChoice("named", name)
    elif choice in ("auto", "none", "required"):
        if choice == "required" and not names:
            raise bad_request("tool_choice 'required' needs tools", "tool_choice")
        req.tool_choice = ToolChoice(choice)
    else:
        raise bad_request(
            "tool_choice must be 'auto', 'none', 'required' or a function", "tool_choice"
        )
    tool_guided(req)  # a forced choice beside another constraint is refused here


def parse_completion(body: Any, limits: LimitsConfig) -> GenerateRequest:
    req = GenerateRequest(request_id=new_id("cmpl"), model="", kind="completion")
    _fill(body, _COMPLETION, req, limits)
    if req.prompt is None:
        raise bad_request("prompt must be a string or an array of token ids", "prompt")
    if req.echo and req.logprobs:
        raise unsupported(
            "echo with logprobs needs prompt logprobs, which engines do not report yet", "echo"
        )
    if req.max_tokens is None:
        req.max_tokens = 16  # OpenAI's default for completions
    return req
