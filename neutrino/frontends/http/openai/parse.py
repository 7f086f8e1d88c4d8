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

from neutrino.config import LimitsConfig
from neutrino.errors import ErrorKind, bad_request, unsupported
from neutrino.frontends.common import new_id
from neutrino.pipeline import chat, sampling
from neutrino.pipeline.draft import Draft
from neutrino.pipeline.fields import Loc, boolean, integer, invalid, is_int, string
from neutrino.pipeline.images import decode_image_url
from neutrino.pipeline.request import GenerateRequest
from neutrino.pipeline.structured import (
    parse_response_format,
    parse_structured_outputs,
    vllm_constraint,
)

_NO_EXTRA: dict[str, object] = {}


# ---------------------------------------------------------------- field setters

# A setter checks one present, non-null field and stores it on the draft.
Setter = Callable[[Draft, object, LimitsConfig], None]


def _sample(key: str) -> Setter:
    """A SamplingParams field of the same name, checked by its validator."""
    at = (key,)
    check = sampling.SAMPLING[key]

    def put(d: Draft, v: object, limits: LimitsConfig) -> None:
        d.sampling[key] = check(v, at, limits)  # Draft.sample, one call less

    return put


def _model(d: Draft, v: object, limits: LimitsConfig) -> None:
    d.model = string(v, ("model",))


def _n(d: Draft, v: object, limits: LimitsConfig) -> None:
    d.n = sampling.choices(v, ("n",), limits)


def _best_of(d: Draft, v: object, limits: LimitsConfig) -> None:
    if integer(v, ("best_of",), 1) > 1:
        raise unsupported("best_of > 1 is not supported", "best_of")


def _stream(d: Draft, v: object, limits: LimitsConfig) -> None:
    d.stream = boolean(v, ("stream",))


def _stream_options(d: Draft, v: object, limits: LimitsConfig) -> None:
    # That it needs stream=true is checked once every field is in (see _fill).
    if not isinstance(v, dict):
        raise bad_request("stream_options must be an object", "stream_options")
    d.include_usage = boolean(v.get("include_usage", False), ("stream_options", "include_usage"))


def _stop(d: Draft, v: object, limits: LimitsConfig) -> None:
    d.stop = sampling.stops(v, ("stop",), limits)


def _include_stop(d: Draft, v: object, limits: LimitsConfig) -> None:
    d.include_stop = boolean(v, ("include_stop_str_in_output",))


def _user(d: Draft, v: object, limits: LimitsConfig) -> None:
    d.user = string(v, ("user",))


def _stop_token_ids(d: Draft, v: object, limits: LimitsConfig) -> None:
    d.stop_token_ids = sampling.token_ids(v, ("stop_token_ids",))


_CHECK_MAX_TOKENS = sampling.SAMPLING["max_tokens"]


def _max_tokens(d: Draft, v: object, limits: LimitsConfig) -> None:
    checked = _CHECK_MAX_TOKENS(v, ("max_tokens",), limits)
    d.sampling.setdefault("max_tokens", checked)  # max_completion_tokens, when also sent, wins


def _max_completion_tokens(d: Draft, v: object, limits: LimitsConfig) -> None:
    d.sample("max_tokens", v, ("max_completion_tokens",), limits)


def _structured_outputs(d: Draft, v: object, limits: LimitsConfig) -> None:
    guided = parse_structured_outputs(v, max_depth=limits.max_schema_depth)
    d.constrain(guided, None, "structured_outputs")


def _guided_field(kind: str) -> Setter:
    """vLLM's older ``guided_json``, ``guided_regex``, ``guided_choice``, ``guided_grammar``."""
    key = f"guided_{kind}"

    def put(d: Draft, v: object, limits: LimitsConfig) -> None:
        d.constrain(vllm_constraint(kind, v, key, limits.max_schema_depth), None, key)

    return put


def _guided_whitespace(d: Draft, v: object, limits: LimitsConfig) -> None:
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
    # Every SamplingParams field under its own name, but those with setters of their own
    # (max_tokens beside max_completion_tokens; chat's logprobs and top_logprobs).
    **{
        key: _sample(key)
        for key in sampling.SAMPLING
        if key not in ("max_tokens", "logprobs", "top_logprobs")
    },
    "model": _model,
    "n": _n,
    "best_of": _best_of,
    "stream": _stream,
    "stream_options": _stream_options,
    "stop": _stop,
    "user": _user,
    "include_stop_str_in_output": _include_stop,
    "stop_token_ids": _stop_token_ids,
    "max_tokens": _max_tokens,
}


# ---------------------------------------------------------------- chat fields


def _messages(d: Draft, v: object, limits: LimitsConfig) -> None:
    """Checked messages; image parts are decoded into ``d.images``, in order."""
    if not isinstance(v, list):
        raise bad_request("messages must be a non-empty array", "messages")
    if not 0 < len(v) <= limits.max_messages:
        chat.messages_count(len(v), ("messages",), limits)  # raises
    d.messages = tuple([_message(d, m, i) for i, m in enumerate(v)])


def _message(d: Draft, m: object, i: int) -> chat.Message:
    if not isinstance(m, dict):
        raise bad_request(f"messages[{i}] must be an object", f"messages[{i}]")
    raw = m.get("role")
    role = chat.ROLE_OF.get(raw) if raw.__class__ is str else None
    if role is None:
        role = chat.role(raw, ("messages", i, "role"))  # raises: not a role
    calls: tuple[chat.FunctionCall, ...] = ()
    if "tool_calls" in m:
        calls = _tool_calls(m["tool_calls"], ("messages", i, "tool_calls"))
    content = m.get("content")
    if len(m) == 2 and content.__class__ is str and role != "function":  # the common case
        return chat.Message(role, content)
    extra = {k: x for k, x in m.items() if k not in _MESSAGE_KEYS} or _NO_EXTRA
    if content.__class__ is str or content is None:
        return chat.message(role, content, calls, extra, ("messages", i))
    if isinstance(content, list):
        at = ("messages", i, "content")
        parts = tuple([_content_part(d, p, (*at, j)) for j, p in enumerate(content)])
        return chat.Message(role, parts, calls, extra)
    raise invalid(("messages", i, "content"), "{at} must be a string or an array")


_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls"})
_CALL_KEYS = frozenset({"id", "type", "function"})


def _tool_calls(calls: object, where: Loc) -> tuple[chat.FunctionCall, ...]:
    """An assistant turn's earlier tool calls: null, or OpenAI's shape (arguments may also
    be an object, as some clients send them)."""
    if calls is None:
        return ()
    if not isinstance(calls, list):
        raise invalid(where, "{at} must be an array")
    out: list[chat.FunctionCall] = []
    for k, call in enumerate(calls):
        at = (*where, k)
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise invalid(at, "{at} must be {'function': {'name': ..., 'arguments': ...}}")
        arguments = fn.get("arguments", "")
        if not isinstance(arguments, str | dict):
            raise invalid((*at, "function", "arguments"), "{at} must be a JSON string")
        call_id = call.get("id")
        if not isinstance(call.get("id", ""), str):
            raise invalid((*at, "id"), "{at} must be a string")
        if call.get("type", "function") != "function":
            raise invalid((*at, "type"), "{at} must be 'function'")
        extra = {key: x for key, x in call.items() if key not in _CALL_KEYS} or _NO_EXTRA
        out.append(chat.FunctionCall(fn["name"], arguments, call_id, extra))
    return tuple(out)


def _content_part(d: Draft, part: object, at: Loc) -> chat.Part:
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        raise invalid(at, "{at} must be an object with a type")
    kind = part["type"]
    if kind == "image_url":
        url = part.get("image_url")
        url = url.get("url") if isinstance(url, dict) else url
        if not isinstance(url, str):
            raise invalid((*at, "image_url", "url"), "{at} must be a string", param=at)
        chat.images_count(len(d.images), at)
        return chat.ImagePart(d.add_image(decode_image_url(url, at)))
    if kind != "text":
        raise invalid(
            at,
            f"content parts of type {kind!r} are not supported yet",
            kind=ErrorKind.UNSUPPORTED,
        )
    text = part.get("text")
    if not isinstance(text, str):
        raise invalid((*at, "text"), "{at} must be a string")
    return chat.TextPart(text)


def _chat_logprobs(d: Draft, v: object, limits: LimitsConfig) -> None:
    d.sample("logprobs", v, ("logprobs",), limits)


def _top_logprobs(d: Draft, v: object, limits: LimitsConfig) -> None:
    # That it needs logprobs=true is checked once every field is in (see parse_chat).
    d.sample("top_logprobs", v, ("top_logprobs",), limits)


def _response_format(d: Draft, v: object, limits: LimitsConfig) -> None:
    guided, validator = parse_response_format(v, limits.max_schema_depth)
    d.constrain(guided, validator, "response_format")


_FUNCTION_KEYS = frozenset({"name", "description", "parameters"})


def _tools(d: Draft, v: object, limits: LimitsConfig) -> None:
    if not isinstance(v, list):
        raise bad_request("tools must be an array", "tools")
    chat.tools_count(len(v), ("tools",), limits)
    d.tools = tuple([_tool(t, i) for i, t in enumerate(v)])


def _tool(t: object, i: int) -> chat.Tool:
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
    params = fn.get("parameters")
    if params is not None and not isinstance(params, dict):
        raise bad_request(
            f"tools[{i}].function.parameters must be an object",
            f"tools[{i}].function.parameters",
        )
    extra = {k: x for k, x in fn.items() if k not in _FUNCTION_KEYS} or _NO_EXTRA
    description = fn.get("description")
    return chat.Tool(
        fn["name"], description if isinstance(description, str) else None, params, extra
    )


def _reasoning_format(d: Draft, v: object, limits: LimitsConfig) -> None:
    if v not in ("parsed", "raw", "hidden"):
        raise bad_request(
            "reasoning_format must be 'parsed', 'raw' or 'hidden'", "reasoning_format"
        )
    d.reasoning_format = v


def _reasoning_effort(d: Draft, v: object, limits: LimitsConfig) -> None:
    # A template variable, unless chat_template_kwargs sets it.
    d.reasoning_effort = chat.reasoning_effort(v, ("reasoning_effort",))


def _template_kwargs(d: Draft, v: object, limits: LimitsConfig) -> None:
    d.template_kwargs = chat.template_kwargs(v, ("chat_template_kwargs",))


def _parallel_tool_calls(d: Draft, v: object, limits: LimitsConfig) -> None:
    d.parallel_tool_calls = boolean(v, ("parallel_tool_calls",))


def _add_generation_prompt(d: Draft, v: object, limits: LimitsConfig) -> None:
    d.add_generation_prompt = boolean(v, ("add_generation_prompt",))


_CHAT: dict[str, Setter] = {
    **_COMMON,
    "messages": _messages,
    "max_completion_tokens": _max_completion_tokens,
    "logprobs": _chat_logprobs,
    "top_logprobs": _top_logprobs,
    "response_format": _response_format,
    "tools": _tools,
    "tool_choice": lambda d, v, limits: None,  # needs tools: see _tool_choice
    "parallel_tool_calls": _parallel_tool_calls,
    "reasoning_format": _reasoning_format,
    "reasoning_effort": _reasoning_effort,
    "chat_template_kwargs": _template_kwargs,
    "add_generation_prompt": _add_generation_prompt,
}


# ---------------------------------------------------------------- completion fields


def _prompt(d: Draft, v: object, limits: LimitsConfig) -> None:
    if isinstance(v, list) and len(v) == 1 and isinstance(v[0], str | list):
        v = v[0]  # a batch of one
    if isinstance(v, str):
        d.prompt_text = v
    elif isinstance(v, list) and v and all(is_int(t) for t in v):
        d.prompt_ids = sampling.token_ids(v, ("prompt",))
    elif isinstance(v, list) and len(v) > 1:
        raise unsupported("batched prompts are not supported; send one prompt", "prompt")
    else:
        raise bad_request("prompt must be a string or an array of token ids", "prompt")


def _completion_logprobs(d: Draft, v: object, limits: LimitsConfig) -> None:
    # For completions, logprobs is the number of alternatives, 0..5.
    d.sampling["top_logprobs"] = integer(v, ("logprobs",), 0, 5)
    d.sampling["logprobs"] = True


def _echo(d: Draft, v: object, limits: LimitsConfig) -> None:
    d.echo = boolean(v, ("echo",))


def _suffix(d: Draft, v: object, limits: LimitsConfig) -> None:
    raise unsupported("suffix is not supported", "suffix")


_COMPLETION: dict[str, Setter] = {
    **_COMMON,
    "prompt": _prompt,
    "logprobs": _completion_logprobs,
    "echo": _echo,
    "suffix": _suffix,
}


# ---------------------------------------------------------------- entry points


def fill_chat_fields(
    d: Draft, body: dict[str, object], keys: tuple[str, ...], limits: LimitsConfig
) -> None:
    """The chat fields ``keys`` of ``body``, for an API of the same family that names them
    as chat does (the Responses API)."""
    for key in keys:
        v = body.get(key)
        if v is not None:
            _CHAT[key](d, v, limits)


def _fill(
    body: object, table: dict[str, Setter], d: Draft, limits: LimitsConfig
) -> dict[str, object]:
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    get = table.get
    for key, v in body.items():
        put = get(key)
        if put is not None and v is not None:
            put(d, v, limits)
    if not d.stream and body.get("stream_options") is not None:
        raise bad_request("stream_options is only allowed with stream=true", "stream_options")
    return body


def parse_chat(body: object, limits: LimitsConfig) -> GenerateRequest:
    d = Draft(new_id("chatcmpl"), "chat")
    fields = _fill(body, _CHAT, d, limits)
    choice = fields.get("tool_choice")
    if choice is not None:
        d.tool_choice = _tool_choice(choice)
    return d.freeze()


def _tool_choice(choice: object) -> chat.ToolChoice:
    """OpenAI's ``tool_choice`` (checked against ``tools`` by the draft)."""
    if isinstance(choice, dict):
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, dict) else None
        if choice.get("type") != "function" or not isinstance(name, str):
            raise bad_request(
                "tool_choice must be 'auto', 'none', 'required' or "
                "{'type': 'function', 'function': {'name': ...}}",
                "tool_choice",
            )
        return chat.ToolChoice("named", name)
    if choice in ("auto", "none", "required"):
        return chat.ToolChoice(choice)
    raise bad_request("tool_choice must be 'auto', 'none', 'required' or a function", "tool_choice")


def parse_completion(body: object, limits: LimitsConfig) -> GenerateRequest:
    d = Draft(new_id("cmpl"), "completion")
    _fill(body, _COMPLETION, d, limits)
    return d.freeze()
