"""Sans-IO: a ``neutrino.v1`` GenerateRequest as the pipeline's :class:`GenerateRequest`.

The message becomes the OpenAI JSON body that the HTTP route would get for the same
request, and that body goes through the HTTP routes' own parser
(:mod:`neutrino.frontends.http.parse`): one set of rules, defaults and error messages for
both protocols. Only fields the client set reach the body, so an unset optional field
takes HTTP's default. A bad field raises the parser's :class:`NeutrinoError`, its
``param`` renamed to the field's path in the proto message (``chat.messages[0].parts[1]``
for HTTP's ``messages[0].content[1]``); INVALID_ARGUMENT on the wire.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from neutrino.config import LimitsConfig
from neutrino.errors import NeutrinoError, bad_request
from neutrino.frontends.grpc.stubs import inference_pb2
from neutrino.frontends.http.parse import parse_chat, parse_completion
from neutrino.frontends.params import Renames, renamed
from neutrino.pipeline.request import GenerateRequest

_MAX_COMPLETION_TOP = 5  # OpenAI's integer `logprobs` of completions

# Request fields that are the same in the proto and in OpenAI's JSON (a proto3 scalar
# without presence, ignore_eos and user, counts as set when it is not its default).
_SCALARS = frozenset(
    {
        "max_tokens",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "repetition_penalty",
        "min_tokens",
        "n",
        "include_stop_str_in_output",
        "ignore_eos",
        "user",
    }
)
_LISTS = frozenset({"stop", "stop_token_ids"})
_MODES = {
    inference_pb2.TOOL_CHOICE_MODE_AUTO: "auto",
    inference_pb2.TOOL_CHOICE_MODE_NONE: "none",
    inference_pb2.TOOL_CHOICE_MODE_REQUIRED: "required",
}
_FORMATS = {
    inference_pb2.RESPONSE_FORMAT_TYPE_TEXT: "text",
    inference_pb2.RESPONSE_FORMAT_TYPE_JSON_OBJECT: "json_object",
    inference_pb2.RESPONSE_FORMAT_TYPE_JSON_SCHEMA: "json_schema",
}
_EFFORTS = {
    inference_pb2.REASONING_EFFORT_MINIMAL: "minimal",
    inference_pb2.REASONING_EFFORT_LOW: "low",
    inference_pb2.REASONING_EFFORT_MEDIUM: "medium",
    inference_pb2.REASONING_EFFORT_HIGH: "high",
}
_REASONING_FORMATS = {
    inference_pb2.REASONING_FORMAT_PARSED: "parsed",
    inference_pb2.REASONING_FORMAT_RAW: "raw",
    inference_pb2.REASONING_FORMAT_HIDDEN: "hidden",
}
# HTTP's parameter names -> the proto field paths; inside those, HTTP's nested names ->
# the proto's (JSON objects are JSON text here). A completion's integer ``logprobs`` is
# ``top_logprobs`` in the proto. Error messages stay HTTP's, word for word.
_PROTO_PATHS = Renames(
    fields={
        "messages": "chat.messages",
        "add_generation_prompt": "chat.add_generation_prompt",
        "tools": "chat.tools",
        "tool_choice": "chat.tool_choice",
        "parallel_tool_calls": "chat.parallel_tool_calls",
        "response_format": "chat.response_format",
        "chat_template_kwargs": "chat.chat_template_kwargs_json",
        "reasoning_effort": "chat.reasoning_effort",
        "reasoning_format": "chat.reasoning_format",
        "prompt": "completion.prompt",
        "echo": "completion.echo",
        "logprobs": "top_logprobs",
    },
    inner=(
        (".function.parameters", ".parameters_json"),
        (".json_schema.schema", ".json_schema.schema_json"),
        (".function.", "."),
        (".content[", ".parts["),
    ),
)


def to_request(
    msg: inference_pb2.GenerateRequest, limits: LimitsConfig, *, stream: bool
) -> GenerateRequest:
    """Validate ``msg`` and build the pipeline's request (raises BAD_REQUEST)."""
    if not msg.model:
        raise bad_request("model is required", "model")
    which = msg.WhichOneof("input")
    if which is None:
        raise bad_request("set either chat or completion", "input")
    body = to_body(msg)
    try:
        req = parse_chat(body, limits) if which == "chat" else parse_completion(body, limits)
    except NeutrinoError as err:
        raise renamed(err, _PROTO_PATHS) from None
    # A stream's last message always carries the usage.
    req = req.replace(stream=stream, include_usage=stream)
    return req


def to_body(msg: inference_pb2.GenerateRequest) -> dict[str, Any]:
    """The OpenAI JSON body of ``msg`` (chat or completion; set fields only)."""
    body: dict[str, Any] = {"model": msg.model}
    for fd, value in msg.ListFields():  # the set fields only, in one call
        key = fd.name
        if key in _SCALARS:
            body[key] = value
        elif key in _LISTS:
            body[key] = list(value)
        elif key == "structured_outputs":
            body[key] = _structured(value)
    if msg.WhichOneof("input") == "chat":
        _chat(msg.chat, body)
        if msg.HasField("logprobs"):
            body["logprobs"] = msg.logprobs
        if msg.HasField("top_logprobs"):
            body["top_logprobs"] = msg.top_logprobs
    else:
        _completion(msg, body)
    return body


# ---------------------------------------------------------------- chat


def _chat(chat: inference_pb2.Chat, body: dict[str, Any]) -> None:
    body["messages"] = [_message(m, i) for i, m in enumerate(chat.messages)]
    if chat.HasField("add_generation_prompt"):
        body["add_generation_prompt"] = chat.add_generation_prompt
    if chat.tools:
        body["tools"] = [_tool(t, i) for i, t in enumerate(chat.tools)]
    choice = chat.tool_choice.WhichOneof("choice") if chat.HasField("tool_choice") else None
    if choice == "function":
        body["tool_choice"] = {"type": "function", "function": {"name": chat.tool_choice.function}}
    elif choice == "mode" and chat.tool_choice.mode in _MODES:
        body["tool_choice"] = _MODES[chat.tool_choice.mode]
    if chat.HasField("parallel_tool_calls"):
        body["parallel_tool_calls"] = chat.parallel_tool_calls
    if chat.HasField("response_format"):
        body["response_format"] = _response_format(chat.response_format)
    if chat.chat_template_kwargs_json:
        body["chat_template_kwargs"] = _json(
            chat.chat_template_kwargs_json, "chat.chat_template_kwargs_json"
        )
    if chat.reasoning_effort in _EFFORTS:
        body["reasoning_effort"] = _EFFORTS[chat.reasoning_effort]
    if chat.reasoning_format in _REASONING_FORMATS:
        body["reasoning_format"] = _REASONING_FORMATS[chat.reasoning_format]


def _message(m: inference_pb2.ChatMessage, i: int) -> dict[str, Any]:
    """One message as OpenAI's JSON (an assistant's tool calls without content: null)."""
    out: dict[str, Any] = {"role": m.role}
    if m.parts:
        if m.content:
            where = f"chat.messages[{i}]"
            raise bad_request(f"{where}: set content or parts, not both", f"{where}.parts")
        out["content"] = [_part(p, f"chat.messages[{i}].parts[{j}]") for j, p in enumerate(m.parts)]
    elif m.content or not (m.role == "assistant" and m.tool_calls):
        out["content"] = m.content
    else:
        out["content"] = None
    if m.HasField("name"):
        out["name"] = m.name
    if m.tool_calls:
        out["tool_calls"] = [_call(c) for c in m.tool_calls]
    if m.HasField("tool_call_id"):
        out["tool_call_id"] = m.tool_call_id
    if m.HasField("reasoning_content"):
        out["reasoning_content"] = m.reasoning_content
    return out


def _part(p: inference_pb2.ContentPart, where: str) -> dict[str, Any]:
    kind = p.WhichOneof("part")
    if kind == "text":
        return {"type": "text", "text": p.text}
    if kind == "image_url":
        return {"type": "image_url", "image_url": {"url": p.image_url}}
    if kind == "image":
        # The same checks as a data URI's (decode_image_url sniffs the format itself).
        url = "data:application/octet-stream;base64," + base64.b64encode(p.image).decode()
        return {"type": "image_url", "image_url": {"url": url}}
    raise bad_request(f"{where} must set text, image_url or image", where)


def _call(c: inference_pb2.ToolCall) -> dict[str, Any]:
    out: dict[str, Any] = {"id": c.id} if c.id else {}
    out["type"] = "function"
    out["function"] = {"name": c.name, "arguments": c.arguments}
    return out


def _tool(t: inference_pb2.Tool, i: int) -> dict[str, Any]:
    """A function tool as OpenAI's JSON: name, description, parameters, strict."""
    fn: dict[str, Any] = {"name": t.name}
    if t.description:
        fn["description"] = t.description
    if t.parameters_json:
        fn["parameters"] = _json(t.parameters_json, f"chat.tools[{i}].parameters_json")
    if t.HasField("strict"):
        fn["strict"] = t.strict
    return {"type": "function", "function": fn}


def _response_format(rf: inference_pb2.ResponseFormat) -> dict[str, Any]:
    kind = _FORMATS.get(rf.type)
    if kind is None:
        raise bad_request(
            "chat.response_format.type must be TEXT, JSON_OBJECT or JSON_SCHEMA",
            "chat.response_format.type",
        )
    out: dict[str, Any] = {"type": kind}
    if kind == "json_schema":
        js = rf.json_schema
        spec: dict[str, Any] = {"name": js.name}
        if js.description:
            spec["description"] = js.description
        where = "chat.response_format.json_schema.schema_json"
        spec["schema"] = _json(js.schema_json, where) if js.schema_json else {}
        if js.HasField("strict"):
            spec["strict"] = js.strict
        out["json_schema"] = spec
    return out


def _structured(so: inference_pb2.StructuredOutputs) -> dict[str, Any]:
    kind = so.WhichOneof("constraint")
    if kind is None:
        return {}  # the parser names what is missing
    if kind == "choice":
        return {"choice": list(so.choice.choices)}
    return {kind: getattr(so, kind)}


def _json(text: str, where: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        raise bad_request(f"{where} must be valid JSON text", where) from None


# ---------------------------------------------------------------- completion


def _completion(msg: inference_pb2.GenerateRequest, body: dict[str, Any]) -> None:
    c = msg.completion
    if c.prompt_token_ids:
        if c.prompt:
            raise bad_request(
                "set completion.prompt or completion.prompt_token_ids, not both",
                "completion.prompt_token_ids",
            )
        body["prompt"] = list(c.prompt_token_ids)
    else:
        body["prompt"] = c.prompt
    if c.echo:
        body["echo"] = True
    # OpenAI's completions take one integer: the alternatives per token (logprobs on).
    if msg.HasField("top_logprobs"):
        if not msg.logprobs:
            raise bad_request("top_logprobs requires logprobs=true", "top_logprobs")
        if not 0 <= msg.top_logprobs <= _MAX_COMPLETION_TOP:
            raise bad_request(
                f"top_logprobs must be between 0 and {_MAX_COMPLETION_TOP} for a completion",
                "top_logprobs",
            )
    if msg.logprobs:
        body["logprobs"] = msg.top_logprobs
