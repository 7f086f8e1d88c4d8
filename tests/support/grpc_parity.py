"""gRPC for the parity tests: an OpenAI chat body as the ``neutrino.v1`` request a gRPC
client would write for it, and gRPC answers read into :class:`tests.support.parity.Answer`.

The translation is written from the proto's documentation, independently of the server's
``frontends/grpc/convert.py`` (which goes the other way), so a test that sends both and
compares the answers checks the server's mapping rather than repeating it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import grpc

from neutrino.v1 import inference_pb2
from tests.support.parity import Answer, Choice, kinds_of_grpc

FINISH = {
    inference_pb2.FINISH_REASON_STOP: "stop",
    inference_pb2.FINISH_REASON_LENGTH: "length",
    inference_pb2.FINISH_REASON_TOOL_CALLS: "tool_calls",
}
_SCALARS = (
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "ignore_eos",
    "min_tokens",
    "user",
    "logprobs",
    "top_logprobs",
    "n",
    "include_stop_str_in_output",
    "stop_token_ids",
)
_CHAT_SCALARS = ("add_generation_prompt", "parallel_tool_calls")
_MODES = {
    "auto": inference_pb2.TOOL_CHOICE_MODE_AUTO,
    "none": inference_pb2.TOOL_CHOICE_MODE_NONE,
    "required": inference_pb2.TOOL_CHOICE_MODE_REQUIRED,
}
_FORMATS = {
    "text": inference_pb2.RESPONSE_FORMAT_TYPE_TEXT,
    "json_object": inference_pb2.RESPONSE_FORMAT_TYPE_JSON_OBJECT,
    "json_schema": inference_pb2.RESPONSE_FORMAT_TYPE_JSON_SCHEMA,
}


def grpc_request(body: dict[str, Any]) -> inference_pb2.GenerateRequest:
    """The gRPC request of an OpenAI chat body (raises KeyError for a field it lacks)."""
    known = {*_SCALARS, *_CHAT_SCALARS, "model", "messages", "stop", "tools", "tool_choice"}
    known |= {"response_format", "chat_template_kwargs", "reasoning_effort", "stream"}
    unknown = set(body) - known
    if unknown:
        raise KeyError(f"no gRPC translation for {sorted(unknown)}")
    chat = inference_pb2.Chat(messages=[_message(m) for m in body["messages"]])
    for key in _CHAT_SCALARS:
        if key in body:
            setattr(chat, key, body[key])
    for tool in body.get("tools") or []:
        fn = tool["function"]
        t = chat.tools.add(name=fn["name"], description=fn.get("description", ""))
        if "parameters" in fn:
            t.parameters_json = json.dumps(fn["parameters"])
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        chat.tool_choice.function = choice["function"]["name"]
    elif choice is not None:
        chat.tool_choice.mode = _MODES[choice]
    if "response_format" in body:
        chat.response_format.CopyFrom(_response_format(body["response_format"]))
    if "chat_template_kwargs" in body:
        chat.chat_template_kwargs_json = json.dumps(body["chat_template_kwargs"])
    if "reasoning_effort" in body:
        effort = "REASONING_EFFORT_" + body["reasoning_effort"].upper()
        chat.reasoning_effort = inference_pb2.ReasoningEffort.Value(effort)  # type: ignore[assignment]
    msg = inference_pb2.GenerateRequest(model=body["model"], chat=chat)
    for key in _SCALARS:
        if key in body:
            if isinstance(body[key], list):
                getattr(msg, key).extend(body[key])
            else:
                setattr(msg, key, body[key])
    stop = body.get("stop")
    msg.stop.extend([stop] if isinstance(stop, str) else stop or [])
    return msg


def _message(m: dict[str, Any]) -> inference_pb2.ChatMessage:
    out = inference_pb2.ChatMessage(role=m["role"])
    content = m.get("content")
    if isinstance(content, str):
        out.content = content
    for part in content if isinstance(content, list) else []:
        if part["type"] == "text":
            out.parts.add(text=part["text"])
        else:
            url = part["image_url"]["url"]
            out.parts.add(image_url=url)
    for call in m.get("tool_calls") or []:
        fn = call["function"]
        out.tool_calls.add(id=call.get("id", ""), name=fn["name"], arguments=fn["arguments"])
    for key in ("name", "tool_call_id", "reasoning_content"):
        if key in m:
            setattr(out, key, m[key])
    return out


def _response_format(rf: dict[str, Any]) -> inference_pb2.ResponseFormat:
    out = inference_pb2.ResponseFormat(type=_FORMATS[rf["type"]])
    spec = rf.get("json_schema")
    if spec is not None:
        out.json_schema.name = spec["name"]
        out.json_schema.schema_json = json.dumps(spec.get("schema", {}))
        if "strict" in spec:
            out.json_schema.strict = spec["strict"]
    return out


def image_bytes(data_uri: str) -> bytes:
    """The bytes of a base64 data URI (for a ``ContentPart.image``)."""
    return base64.b64decode(data_uri.partition(",")[2])


# ---------------------------------------------------------------- answers


def _logprobs(lp: inference_pb2.Logprobs) -> list[tuple[str, float, list[str]]]:
    return [(e.token, round(e.logprob, 4), [t.token for t in e.top_logprobs]) for e in lp.content]


def grpc_answer(resp: inference_pb2.GenerateResponse) -> Answer:
    out = Answer(
        prompt_tokens=resp.usage.prompt_tokens, completion_tokens=resp.usage.completion_tokens
    )
    for c in resp.choices:
        out.choices.append(
            Choice(
                text=c.text,
                reasoning=c.reasoning,
                calls=[(t.name, json.loads(t.arguments)) for t in c.tool_calls],
                finish=FINISH.get(c.finish_reason),
                logprobs=_logprobs(c.logprobs) if c.HasField("logprobs") else None,
            )
        )
    return out


def grpc_stream_answer(msgs: Sequence[inference_pb2.GenerateStreamResponse]) -> Answer:
    """A stream's messages added up as a client does (calls by their index)."""
    out = Answer()
    by_index: dict[int, Choice] = {}
    calls: dict[int, dict[int, list[str]]] = {}
    for m in msgs:
        c = by_index.setdefault(m.index, Choice())
        c.reasoning += m.reasoning_delta
        c.text += m.delta
        for d in m.tool_calls:
            call = calls.setdefault(m.index, {}).setdefault(d.index, ["", ""])
            call[0] += d.name
            call[1] += d.arguments
        if m.HasField("logprobs"):
            c.logprobs = (c.logprobs or []) + _logprobs(m.logprobs)
        if m.finish_reason:
            c.finish = FINISH.get(m.finish_reason)
        if m.HasField("usage"):
            out.prompt_tokens = m.usage.prompt_tokens
            out.completion_tokens = m.usage.completion_tokens
    for i, c in by_index.items():
        c.calls = [(n, json.loads(a)) for _, (n, a) in sorted(calls.get(i, {}).items())]
    out.choices = [by_index[i] for i in sorted(by_index)]
    return out


def grpc_error_answer(err: grpc.aio.AioRpcError) -> Answer:
    return Answer(error=kinds_of_grpc(err.code().name))
