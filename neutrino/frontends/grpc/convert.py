"""Sans-IO: a ``neutrino.v1`` GenerateRequest as the pipeline's :class:`GenerateRequest`.

The message's fields are translated into a :class:`~neutrino.pipeline.draft.Draft`, each
through the pipeline's validator of its type (the rules, limits and defaults the HTTP
API's requests get), with its location in the proto message: an error names the field
as a gRPC client knows it (``chat.messages[0].parts[1]``, ``chat.tools[2].parameters_json``)
and is INVALID_ARGUMENT on the wire. Only fields the client set are read, so an unset
optional field takes the pipeline's default. Images travel as bytes (no data URI).
"""

from __future__ import annotations

import orjson

from neutrino.config import LimitsConfig
from neutrino.errors import bad_request
from neutrino.frontends.common import new_id
from neutrino.frontends.grpc.stubs import inference_pb2
from neutrino.pipeline import chat, sampling
from neutrino.pipeline.draft import Draft, Names
from neutrino.pipeline.fields import Loc, invalid, path
from neutrino.pipeline.images import check_image, decode_image_url
from neutrino.pipeline.request import GenerateRequest
from neutrino.pipeline.structured import json_object, json_schema, vllm_constraint

_MAX_COMPLETION_TOP = 5  # OpenAI's integer `logprobs` of completions

# Where the proto keeps the fields whose rules join two fields.
NAMES = Names(
    messages=("chat", "messages"),
    tools=("chat", "tools"),
    tool_choice=("chat", "tool_choice"),
    top_logprobs=("top_logprobs",),
    prompt=("completion", "prompt"),
    echo=("completion", "echo"),
    constraints="chat.response_format or structured_outputs",
)
# Sampling fields of the same name in the proto, each checked by its SamplingParams
# validator (a proto3 scalar without presence, ignore_eos, counts as set when it is not its
# default); logprobs and top_logprobs are a chat's only, set with it.
_SAMPLED = frozenset(sampling.SAMPLING).intersection(
    f.name for f in inference_pb2.GenerateRequest.DESCRIPTOR.fields
) - {"logprobs", "top_logprobs"}
_MODES = {
    inference_pb2.TOOL_CHOICE_MODE_AUTO: "auto",
    inference_pb2.TOOL_CHOICE_MODE_NONE: "none",
    inference_pb2.TOOL_CHOICE_MODE_REQUIRED: "required",
}
_EFFORTS = {
    inference_pb2.REASONING_EFFORT_MINIMAL: "minimal",
    inference_pb2.REASONING_EFFORT_LOW: "low",
    inference_pb2.REASONING_EFFORT_MEDIUM: "medium",
    inference_pb2.REASONING_EFFORT_HIGH: "high",
    inference_pb2.REASONING_EFFORT_NONE: "none",
    inference_pb2.REASONING_EFFORT_XHIGH: "xhigh",
    inference_pb2.REASONING_EFFORT_MAX: "max",
}
_REASONING_FORMATS = {
    inference_pb2.REASONING_FORMAT_PARSED: "parsed",
    inference_pb2.REASONING_FORMAT_RAW: "raw",
    inference_pb2.REASONING_FORMAT_HIDDEN: "hidden",
}


def to_request(
    msg: inference_pb2.GenerateRequest, limits: LimitsConfig, *, stream: bool
) -> GenerateRequest:
    """Validate ``msg`` and build the pipeline's request (raises BAD_REQUEST)."""
    if not msg.model:
        raise bad_request("model is required", "model")
    which = msg.WhichOneof("input")
    if which is None:
        raise bad_request("set either chat or completion", "input")
    if which == "chat":
        d = Draft(new_id("chatcmpl"), "chat")
        _chat(msg.chat, d, limits)
        if msg.HasField("logprobs"):
            d.sample("logprobs", msg.logprobs, ("logprobs",), limits)
        if msg.HasField("top_logprobs"):
            d.sample("top_logprobs", msg.top_logprobs, ("top_logprobs",), limits)
    else:
        d = Draft(new_id("cmpl"), "completion")
        _completion(msg, d)
    d.model = msg.model
    d.stream = d.include_usage = stream  # a stream's last message always carries the usage
    _fields(msg, d, limits)
    return d.freeze(NAMES)


def _fields(msg: inference_pb2.GenerateRequest, d: Draft, limits: LimitsConfig) -> None:
    """The fields beside chat and completion: sampling, stops, choices, constraints."""
    for fd, value in msg.ListFields():  # the set fields only, in one call
        key = fd.name
        if key in _SAMPLED:
            d.sample(key, value, (key,), limits)
        elif key == "stop":
            d.stop = sampling.stops(list(value), ("stop",), limits)
        elif key == "stop_token_ids":
            d.stop_token_ids = sampling.token_ids(list(value), ("stop_token_ids",))
        elif key == "n":
            d.n = sampling.choices(value, ("n",), limits)
        elif key == "include_stop_str_in_output":
            d.include_stop = value
        elif key == "user":
            d.user = value
        elif key == "structured_outputs":
            _structured(value, d, limits)


def _structured(so: inference_pb2.StructuredOutputs, d: Draft, limits: LimitsConfig) -> None:
    kind = so.WhichOneof("constraint")
    if kind is None:
        raise bad_request(
            "structured_outputs needs exactly one of json, regex, choice, grammar, json_object",
            "structured_outputs",
        )
    value: object = list(so.choice.choices) if kind == "choice" else getattr(so, kind)
    where = f"structured_outputs.{kind}"
    d.constrain(vllm_constraint(kind, value, where, limits.max_schema_depth), None, where)


# ---------------------------------------------------------------- chat


def _chat(c: inference_pb2.Chat, d: Draft, limits: LimitsConfig) -> None:
    chat.messages_count(len(c.messages), NAMES.messages, limits)
    d.messages = tuple([_message(m, i, d) for i, m in enumerate(c.messages)])
    if c.HasField("add_generation_prompt"):
        d.add_generation_prompt = c.add_generation_prompt
    if c.tools:
        chat.tools_count(len(c.tools), NAMES.tools, limits)
        d.tools = tuple([_tool(t, i) for i, t in enumerate(c.tools)])
    choice = c.tool_choice.WhichOneof("choice") if c.HasField("tool_choice") else None
    if choice == "function":
        d.tool_choice = chat.ToolChoice("named", c.tool_choice.function)
    elif choice == "mode" and c.tool_choice.mode in _MODES:
        d.tool_choice = chat.ToolChoice(_MODES[c.tool_choice.mode])  # type: ignore[arg-type]
    if c.HasField("parallel_tool_calls"):
        d.parallel_tool_calls = c.parallel_tool_calls
    if c.HasField("response_format"):
        _response_format(c.response_format, d, limits)
    if c.chat_template_kwargs_json:
        at = ("chat", "chat_template_kwargs_json")
        d.template_kwargs = chat.template_kwargs(_json(c.chat_template_kwargs_json, at), at)
    if c.reasoning_effort in _EFFORTS:
        d.reasoning_effort = _EFFORTS[c.reasoning_effort]
    if c.reasoning_format in _REASONING_FORMATS:
        d.reasoning_format = _REASONING_FORMATS[c.reasoning_format]  # type: ignore[assignment]


def _message(m: inference_pb2.ChatMessage, i: int, d: Draft) -> chat.Message:
    """One turn; an assistant's that only calls tools and sets no content has none."""
    at: Loc = (*NAMES.messages, i)
    who = chat.role(m.role, (*at, "role"))
    content: str | tuple[chat.Part, ...] | None
    if m.parts:
        if m.content:
            raise invalid((*at, "parts"), f"{path(at)}: set content or parts, not both")
        content = tuple([_part(p, (*at, "parts", j), d) for j, p in enumerate(m.parts)])
    elif m.content or not (who == "assistant" and m.tool_calls):
        content = m.content
    else:
        content = None
    extra: dict[str, object] = {}
    for key in ("name", "tool_call_id", "reasoning_content"):
        if m.HasField(key):
            extra[key] = getattr(m, key)
    calls = tuple([_call(c, (*at, "tool_calls", k)) for k, c in enumerate(m.tool_calls)])
    return chat.message(who, content, calls, extra, at)


def _part(p: inference_pb2.ContentPart, at: Loc, d: Draft) -> chat.Part:
    kind = p.WhichOneof("part")
    if kind == "text":
        return chat.TextPart(p.text)
    if kind == "image_url":
        chat.images_count(len(d.images), at)
        return chat.ImagePart(d.add_image(decode_image_url(p.image_url, at)))
    if kind == "image":
        chat.images_count(len(d.images), at)
        return chat.ImagePart(d.add_image(check_image(p.image, at)))
    raise invalid(at, "{at} must set text, image_url or image")


def _call(c: inference_pb2.ToolCall, at: Loc) -> chat.FunctionCall:
    if not c.name:
        raise invalid((*at, "name"), "{at} is required")
    return chat.FunctionCall(c.name, c.arguments, c.id or None)


def _tool(t: inference_pb2.Tool, i: int) -> chat.Tool:
    """A function tool: name, description, parameters (a JSON schema object), strict."""
    at: Loc = (*NAMES.tools, i)
    if not t.name:
        raise invalid((*at, "name"), "{at} is required")
    parameters: dict[str, object] | None = None
    if t.parameters_json:
        where = (*at, "parameters_json")
        value = _json(t.parameters_json, where)
        if not isinstance(value, dict):
            raise invalid(where, "{at} must be a JSON object")
        parameters = value
    extra: dict[str, object] = {"strict": t.strict} if t.HasField("strict") else {}
    return chat.Tool(t.name, t.description or None, parameters, extra)


def _response_format(rf: inference_pb2.ResponseFormat, d: Draft, limits: LimitsConfig) -> None:
    at: Loc = ("chat", "response_format")
    if rf.type == inference_pb2.RESPONSE_FORMAT_TYPE_TEXT:
        return
    if rf.type == inference_pb2.RESPONSE_FORMAT_TYPE_JSON_OBJECT:
        d.constrain(*json_object(), path(at))
        return
    if rf.type != inference_pb2.RESPONSE_FORMAT_TYPE_JSON_SCHEMA:
        raise invalid((*at, "type"), "{at} must be TEXT, JSON_OBJECT or JSON_SCHEMA")
    js = rf.json_schema
    where: Loc = (*at, "json_schema", "schema_json")
    schema = _json(js.schema_json, where) if js.schema_json else {}
    guided, validator = json_schema(schema, js.strict, path(where), limits.max_schema_depth)
    d.constrain(guided, validator, path(at))


def _json(text: str, at: Loc) -> object:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        raise invalid(at, "{at} must be valid JSON text") from None


# ---------------------------------------------------------------- completion


def _completion(msg: inference_pb2.GenerateRequest, d: Draft) -> None:
    c = msg.completion
    if c.prompt_token_ids:
        if c.prompt:
            raise bad_request(
                "set completion.prompt or completion.prompt_token_ids, not both",
                "completion.prompt_token_ids",
            )
        at = ("completion", "prompt_token_ids")
        d.prompt_ids = sampling.token_ids(list(c.prompt_token_ids), at)
    else:
        d.prompt_text = c.prompt
    d.echo = c.echo
    # The alternatives per token (OpenAI's completions take one integer, 0 to 5).
    if msg.HasField("top_logprobs"):
        if not msg.logprobs:
            raise bad_request("top_logprobs requires logprobs=true", "top_logprobs")
        if not 0 <= msg.top_logprobs <= _MAX_COMPLETION_TOP:
            raise bad_request(
                f"top_logprobs must be between 0 and {_MAX_COMPLETION_TOP} for a completion",
                "top_logprobs",
            )
    if msg.logprobs:
        d.sampling["top_logprobs"] = msg.top_logprobs
        d.sampling["logprobs"] = True
