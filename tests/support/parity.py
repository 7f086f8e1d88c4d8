"""The parity suite's common language: one answer, whatever protocol carried it.

Each protocol's answer (OpenAI chat JSON or its SSE chunks, Anthropic's message or its
events, the Responses API's response or its events, gRPC messages) is read into an
:class:`Answer`; the suite then compares the answers of one request across protocols.
The requests themselves are written once, as an OpenAI chat body, and translated here
into each protocol's request the way a client of that protocol would write it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from neutrino.errors import ErrorKind


def kinds_of_http(status: int, body: dict[str, Any]) -> frozenset[str]:
    """The error kinds (ErrorKind names) an HTTP error with OpenAI's JSON can stand for."""
    code = (body.get("error") or {}).get("code")
    return frozenset(
        k.name for k in ErrorKind if k.spec.http_status == status and k.spec.code == code
    )


def kinds_of_stream_error(error: dict[str, Any]) -> frozenset[str]:
    """The kinds an OpenAI stream's error event can stand for (its type and code)."""
    return frozenset(
        k.name
        for k in ErrorKind
        if k.spec.type == error.get("type") and k.spec.code == error.get("code")
    )


def kinds_of_code(code: str | None) -> frozenset[str]:
    """The kinds an error code (OpenAI's ``code``, the Responses API's error codes) names."""
    return frozenset(k.name for k in ErrorKind if k.spec.code == code)


def kinds_of_grpc(code_name: str) -> frozenset[str]:
    """The kinds a gRPC status can stand for."""
    return frozenset(k.name for k in ErrorKind if k.spec.grpc == code_name)


@dataclass
class Choice:
    text: str = ""
    reasoning: str = ""
    calls: list[tuple[str, Any]] = field(default_factory=list)  # (name, parsed arguments)
    finish: str | None = None  # stop | length | tool_calls
    logprobs: list[tuple[str, float, list[str]]] | None = None  # token, logprob, top tokens


@dataclass
class Answer:
    choices: list[Choice] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # The error kinds (ErrorKind names) the answer's error can stand for; None: no error.
    # Protocols with fewer error classes than Neutrino (gRPC statuses, Anthropic's types)
    # map several kinds to one: the suite checks the kind the HTTP answer names is in it.
    error: frozenset[str] | None = None

    @property
    def one(self) -> Choice:
        assert len(self.choices) == 1, self
        return self.choices[0]


def _calls(raw: list[dict[str, Any]] | None) -> list[tuple[str, Any]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in raw or []]


def _chat_logprobs(lp: dict[str, Any] | None) -> list[tuple[str, float, list[str]]] | None:
    if lp is None:
        return None
    return [
        (e["token"], round(e["logprob"], 4), [t["token"] for t in e.get("top_logprobs") or []])
        for e in lp.get("content") or []
    ]


def openai_answer(status: int, body: dict[str, Any]) -> Answer:
    """A chat completion (or OpenAI's error JSON) as an answer."""
    if status != 200:
        return Answer(error=kinds_of_http(status, body))
    out = Answer(
        prompt_tokens=body["usage"]["prompt_tokens"],
        completion_tokens=body["usage"]["completion_tokens"],
    )
    for c in sorted(body["choices"], key=lambda c: c["index"]):
        msg = c["message"]
        out.choices.append(
            Choice(
                text=msg.get("content") or "",
                reasoning=msg.get("reasoning_content") or "",
                calls=_calls(msg.get("tool_calls")),
                finish=c["finish_reason"],
                logprobs=_chat_logprobs(c.get("logprobs")),
            )
        )
    return out


def sse_events(raw: bytes) -> list[tuple[str, str]]:
    """(event name or "", data) of each SSE event in ``raw``; comments skipped."""
    out = []
    for block in raw.decode().replace("\r\n", "\n").split("\n\n"):
        name, data = "", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            out.append((name, "\n".join(data)))
    return out


def openai_stream_answer(status: int, raw: bytes) -> Answer:
    """A streamed chat completion (with ``include_usage``), added up as a client does."""
    if status != 200:
        return openai_answer(status, json.loads(raw))
    out = Answer()
    calls: dict[int, dict[int, dict[str, str]]] = {}
    by_index: dict[int, Choice] = {}
    for _, data in sse_events(raw):
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if "error" in chunk:
            return Answer(error=kinds_of_stream_error(chunk["error"]))
        if chunk.get("usage"):
            out.prompt_tokens = chunk["usage"]["prompt_tokens"]
            out.completion_tokens = chunk["usage"]["completion_tokens"]
        for c in chunk["choices"]:
            choice = by_index.setdefault(c["index"], Choice())
            delta = c.get("delta") or {}
            choice.text += delta.get("content") or ""
            choice.reasoning += delta.get("reasoning_content") or ""
            for d in delta.get("tool_calls") or []:
                call = calls.setdefault(c["index"], {}).setdefault(
                    d["index"], {"name": "", "arguments": ""}
                )
                fn = d.get("function") or {}
                call["name"] += fn.get("name") or ""
                call["arguments"] += fn.get("arguments") or ""
            lp = _chat_logprobs(c.get("logprobs"))
            if lp is not None:
                choice.logprobs = (choice.logprobs or []) + lp
            choice.finish = c.get("finish_reason") or choice.finish
    for i, choice in by_index.items():
        choice.calls = [
            (c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.get(i, {}).items())
        ]
        out.choices.append(choice)
    out.choices = [by_index[i] for i in sorted(by_index)]
    return out


# --------------------------------------------------------------------- Anthropic


def _parts(content: Any, convert: Any) -> Any:
    """A message's content with each OpenAI part converted (a string stays a string)."""
    return content if isinstance(content, str) else [convert(p) for p in content]


def _anthropic_part(part: dict[str, Any]) -> dict[str, Any]:
    if part["type"] == "text":
        return part
    media, _, data = part["image_url"]["url"].removeprefix("data:").partition(";base64,")
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}


def _responses_part(part: dict[str, Any]) -> dict[str, Any]:
    if part["type"] == "text":
        return {"type": "input_text", "text": part["text"]}
    return {"type": "input_image", "image_url": part["image_url"]["url"]}


_ANTHROPIC_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
}


def kinds_of_anthropic(status: int, error_type: str) -> frozenset[str]:
    """The kinds an Anthropic error (its status and ``error.type``) can stand for."""
    from neutrino.errors import ANTHROPIC_TYPES

    return frozenset(
        k.name
        for k, t in ANTHROPIC_TYPES.items()
        if t == error_type and (status == 0 or k.spec.http_status == status)
    )


def to_anthropic(body: dict[str, Any]) -> dict[str, Any]:
    """The Messages request a client of Anthropic's API writes for an OpenAI chat body."""
    out: dict[str, Any] = {
        "model": body["model"],
        "max_tokens": body.get("max_tokens", 64),
        "messages": [
            {"role": m["role"], "content": _parts(m["content"], _anthropic_part)}
            for m in body["messages"]
        ],
    }
    if "tools" in body:
        out["tools"] = [
            {
                "name": t["function"]["name"],
                "description": t["function"]["description"],
                "input_schema": t["function"]["parameters"],
            }
            for t in body["tools"]
        ]
    choice = body.get("tool_choice")
    if choice == "required":
        out["tool_choice"] = {"type": "any"}
    elif isinstance(choice, dict):
        out["tool_choice"] = {"type": "tool", "name": choice["function"]["name"]}
    if "stop" in body:
        out["stop_sequences"] = body["stop"]
    return out


def anthropic_answer(status: int, body: dict[str, Any]) -> Answer:
    """A Messages API response (or its error) as an answer."""
    if status != 200:
        return Answer(error=kinds_of_anthropic(status, body["error"]["type"]))
    choice = Choice(finish=_ANTHROPIC_FINISH[body["stop_reason"]])
    for block in body["content"]:
        if block["type"] == "text":
            choice.text += block["text"]
        elif block["type"] == "thinking":
            choice.reasoning += block["thinking"]
        elif block["type"] == "tool_use":
            choice.calls.append((block["name"], block["input"]))
    usage = body["usage"]
    return Answer([choice], usage["input_tokens"], usage["output_tokens"])


def anthropic_stream_answer(status: int, raw: bytes) -> Answer:
    """A streamed Messages response, added up from its events as the SDK does."""
    if status != 200:
        return anthropic_answer(status, json.loads(raw))
    out, choice = Answer(), Choice()
    blocks: dict[int, dict[str, Any]] = {}
    names = [name for name, _ in sse_events(raw)]
    for name, data in sse_events(raw):
        event = json.loads(data)
        assert event["type"] == name, (name, event)
        if name == "error":
            return Answer(error=kinds_of_anthropic(0, event["error"]["type"]))
        if name == "content_block_stop":
            blocks[event["index"]]["stopped"] = True
        if name == "message_start":
            out.prompt_tokens = event["message"]["usage"]["input_tokens"]
        elif name == "content_block_start":
            blocks[event["index"]] = {**event["content_block"], "json": ""}
        elif name == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            if delta["type"] == "text_delta":
                choice.text += delta["text"]
            elif delta["type"] == "thinking_delta":
                choice.reasoning += delta["thinking"]
            elif delta["type"] == "input_json_delta":
                block["json"] += delta["partial_json"]
        elif name == "message_delta":
            choice.finish = _ANTHROPIC_FINISH[event["delta"]["stop_reason"]]
            out.completion_tokens = event["usage"]["output_tokens"]
    # Anthropic's order: message_start first, message_delta then message_stop last, and
    # every block that started also stopped.
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"], names
    assert all(b.get("stopped") for b in blocks.values()), names
    choice.calls = [
        (b["name"], json.loads(b["json"] or "{}"))
        for _, b in sorted(blocks.items())
        if b["type"] == "tool_use"
    ]
    out.choices = [choice]
    return out


# ------------------------------------------------------------------ Responses API


def to_responses(body: dict[str, Any]) -> dict[str, Any]:
    """The Responses API request a client writes for an OpenAI chat body."""
    out: dict[str, Any] = {
        "model": body["model"],
        "input": [
            {"role": m["role"], "content": _parts(m["content"], _responses_part)}
            for m in body["messages"]
        ],
        "max_output_tokens": body.get("max_tokens", 64),
    }
    if "tools" in body:
        out["tools"] = [{"type": "function", **t["function"]} for t in body["tools"]]
    choice = body.get("tool_choice")
    if choice is not None:
        named = isinstance(choice, dict)
        out["tool_choice"] = (
            {"type": "function", "name": choice["function"]["name"]} if named else choice
        )
    fmt = body.get("response_format")
    if fmt is not None and fmt["type"] == "json_schema":
        out["text"] = {"format": {"type": "json_schema", **fmt["json_schema"]}}
    return out


def responses_answer(status: int, body: dict[str, Any]) -> Answer:
    """A Response object (or OpenAI's error JSON) as an answer."""
    if status != 200:
        return Answer(error=kinds_of_http(status, body))
    if body["status"] == "failed":
        return Answer(error=kinds_of_code(body["error"]["code"]))
    choice = Choice()
    for item in body["output"]:
        if item["type"] == "message":
            choice.text += "".join(c["text"] for c in item["content"] if c["type"] == "output_text")
        elif item["type"] == "reasoning":
            choice.reasoning += "".join(c["text"] for c in item.get("content") or [])
        elif item["type"] == "function_call":
            choice.calls.append((item["name"], json.loads(item["arguments"])))
    incomplete = body["status"] == "incomplete"
    choice.finish = "length" if incomplete else "tool_calls" if choice.calls else "stop"
    usage = body["usage"]
    return Answer([choice], usage["input_tokens"], usage["output_tokens"])


def responses_stream_answer(status: int, raw: bytes) -> Answer:
    """A streamed response: its final event's Response, checked against the deltas."""
    if status != 200:
        return responses_answer(status, json.loads(raw))
    text, reasoning, final = "", "", None
    arguments: dict[str, str] = {}  # function call item id -> its argument deltas
    for name, data in sse_events(raw):
        event = json.loads(data)
        assert event["type"] == name, (name, event)
        if name == "response.output_text.delta":
            text += event["delta"]
        elif name == "response.reasoning_text.delta":
            reasoning += event["delta"]
        elif name == "response.function_call_arguments.delta":
            arguments[event["item_id"]] = arguments.get(event["item_id"], "") + event["delta"]
        elif name == "error":
            return Answer(error=kinds_of_code(event["code"]))
        elif name in ("response.completed", "response.incomplete", "response.failed"):
            final = event["response"]
    assert final is not None, raw[-500:]
    answer = responses_answer(200, final)
    if answer.error is None:  # the deltas add up to the final response
        assert (text, reasoning) == (answer.one.text, answer.one.reasoning), (text, answer)
        calls = [i for i in final["output"] if i["type"] == "function_call"]
        assert [arguments.get(i["id"]) for i in calls] == [i["arguments"] for i in calls]
    return answer
