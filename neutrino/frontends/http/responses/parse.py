"""OpenAI Responses API request JSON -> :class:`GenerateRequest` (sans-IO).

A Responses request is translated into the pipeline's typed request: each value goes
through the validator of its type with the path the client used for it
(``max_output_tokens``, ``text.format``, ``input[2].content[0]``); the fields the
Responses API shares with chat completions, by name and meaning, are set by chat's own
setters.

What a Responses request carries that chat has no field for (instructions, metadata,
``store``, ``previous_response_id``) is kept beside the request, for the answer to
repeat. Fields the server cannot honour (background responses, server-side
conversations and prompts, built-in tools) are refused with a 400 naming them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from neutrino.config import LimitsConfig
from neutrino.errors import ErrorKind, NeutrinoError, bad_request, unsupported
from neutrino.frontends.common import new_id, object_member
from neutrino.frontends.http.openai.parse import fill_chat_fields
from neutrino.frontends.http.responses.items import Conversation, input_items
from neutrino.pipeline import chat
from neutrino.pipeline.chat import Tool, ToolChoice
from neutrino.pipeline.draft import Draft, Names
from neutrino.pipeline.request import GenerateRequest
from neutrino.pipeline.structured import Constraint, format_kind, json_schema

MAX_METADATA = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
LOGPROBS_INCLUDE = "message.output_text.logprobs"

# Fields of the same name and meaning as chat's: sampling, and the vLLM-style extras.
_SAME = (
    "model",
    "stream",
    "temperature",
    "top_p",
    "user",
    "parallel_tool_calls",
    "seed",
    "stop",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "min_tokens",
    "ignore_eos",
    "stop_token_ids",
    "include_stop_str_in_output",
    "chat_template_kwargs",
)
NAMES = Names(messages=("input",), constraints="text.format")


@dataclass(slots=True)
class Stored:
    """A finished response kept by the store: its conversation (as input items, the
    response's own output last) and the Response object itself."""

    owner: str  # the API key's name that made it ("" when keys are off)
    items: list[object]
    response: dict[str, object]
    size: int = 0  # bytes, roughly (what the store's bound counts)


# previous_response_id -> the stored response (None: unknown); None: there is no store.
Lookup = Callable[[str], Stored | None] | None


@dataclass(slots=True)
class ResponsesRequest:
    """A parsed Responses request: the pipeline's request and what the answer repeats."""

    req: GenerateRequest
    echo: dict[str, object]  # the request's settings, as a Response object shows them
    items: list[object]  # the conversation: the previous response's items, then this input
    store: bool = True
    previous: Stored | None = None


def parse_responses(body: object, limits: LimitsConfig, lookup: Lookup = None) -> ResponsesRequest:
    """A Responses request; NeutrinoError (400 naming the parameter) when it is invalid."""
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    _refuse_unsupported(body)
    previous = _previous(body.get("previous_response_id"), lookup)
    earlier = previous.items if previous is not None else []
    items = [*earlier, *input_items(body.get("input"))]
    d = Draft(new_id("resp"), "chat")
    conv = Conversation(d)
    for i, item in enumerate(items):
        conv.add(item, "previous_response_id" if i < len(earlier) else f"input[{i - len(earlier)}]")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise bad_request("instructions must be a string", "instructions")
    d.messages = conv.messages(instructions)
    chat.messages_count(len(d.messages), ("input",), limits)
    fill_chat_fields(d, body, _SAME, limits)
    _sampling(body, d, _include(body.get("include")), limits)
    tools = _tools(body.get("tools"))
    if tools:
        chat.tools_count(len(tools), ("tools",), limits)
        d.tools = tuple(tools)
    if body.get("tool_choice") is not None:
        d.tool_choice = _tool_choice(body["tool_choice"])
    req = d.freeze(NAMES)
    store = body.get("store", True)
    if not isinstance(store, bool):
        raise bad_request("store must be a boolean", "store")
    echo = _echo(body, req, tools)
    return ResponsesRequest(req, echo, items, store, previous)


def _refuse_unsupported(body: dict[str, object]) -> None:
    if body.get("background"):
        raise unsupported("background responses are not supported", "background")
    for key in ("conversation", "prompt"):
        if body.get(key) is not None:
            raise unsupported(f"{key} is not supported: send the input itself", key)
    if body.get("truncation", "disabled") not in ("disabled", None):
        raise unsupported("truncation must be 'disabled' (the default)", "truncation")


def _previous(value: object, lookup: Lookup) -> Stored | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad_request("previous_response_id must be a string", "previous_response_id")
    if lookup is None:
        raise bad_request(
            "previous_response_id needs the response store, which is off on this server "
            "([responses] store_entries = 0): send the whole conversation as input",
            "previous_response_id",
        )
    stored = lookup(value)
    if stored is None:
        raise not_found_previous(value)
    return stored


def not_found_previous(value: str) -> NeutrinoError:
    return NeutrinoError(
        ErrorKind.NOT_FOUND,
        f"Previous response with id {value[:128]!r} not found.",
        param="previous_response_id",
        code="previous_response_not_found",
    )


def _include(v: object) -> list[str]:
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v) or len(v) > 64:
        raise bad_request("include must be an array of strings", "include")
    return v


def _sampling(body: dict[str, object], d: Draft, include: list[str], limits: LimitsConfig) -> None:
    """max_output_tokens, text.format, reasoning and logprobs."""
    if body.get("max_output_tokens") is not None:
        d.sample("max_tokens", body["max_output_tokens"], ("max_output_tokens",), limits)
    text = object_member(body, "text")
    if text is not None:
        fmt = text.get("format")
        if fmt is not None:
            guided, validator = _response_format(fmt, limits)
            d.constrain(guided, validator, "text.format")
    reasoning = object_member(body, "reasoning")
    if reasoning is not None and reasoning.get("effort") is not None:
        d.reasoning_effort = chat.reasoning_effort(reasoning["effort"], ("reasoning", "effort"))
    top = body.get("top_logprobs")
    if top is not None:
        d.sample("top_logprobs", top, ("top_logprobs",), limits)
    if top is not None or LOGPROBS_INCLUDE in include:
        d.sampling["logprobs"] = True


def _response_format(fmt: object, limits: LimitsConfig) -> Constraint:
    """``text.format``: text, a JSON object, or a JSON schema (strict or not)."""
    plain = format_kind(fmt, "text.format")
    if plain is not None:
        return plain
    assert isinstance(fmt, dict)  # format_kind has read it
    if not isinstance(fmt.get("name"), str):
        raise bad_request("text.format.name is required for json_schema", "text.format.name")
    if "schema" not in fmt:
        raise bad_request("text.format.schema is required for json_schema", "text.format.schema")
    strict = fmt.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise bad_request("text.format.strict must be a boolean", "text.format.strict")
    return json_schema(fmt["schema"], bool(strict), "text.format.schema", limits.max_schema_depth)


def _tools(v: object) -> list[Tool]:
    """Function tools, checked (name, description, parameters, strict)."""
    if v is None:
        return []
    if not isinstance(v, list):
        raise bad_request("tools must be an array", "tools")
    return [_tool(t, f"tools[{i}]") for i, t in enumerate(v)]


def _tool(t: object, where: str) -> Tool:
    if not isinstance(t, dict):
        raise bad_request(f"{where} must be an object", where)
    if t.get("type") != "function":
        kind = str(t.get("type"))[:64]
        raise unsupported(
            f"tools of type {kind!r} are not supported: only function tools", f"{where}.type"
        )
    name, description = t.get("name"), t.get("description")
    parameters, strict = t.get("parameters"), t.get("strict")
    if not isinstance(name, str) or not name:
        raise bad_request(f"{where}.name must be a non-empty string", f"{where}.name")
    if description is not None and not isinstance(description, str):
        raise bad_request(f"{where}.description must be a string", f"{where}.description")
    if parameters is not None and not isinstance(parameters, dict):
        raise bad_request(f"{where}.parameters must be an object", f"{where}.parameters")
    if strict is not None and not isinstance(strict, bool):
        raise bad_request(f"{where}.strict must be a boolean", f"{where}.strict")
    return Tool(name, description, parameters, {"strict": strict} if strict is not None else {})


def _shown(t: Tool) -> dict[str, object]:
    """A tool as the Response object repeats it."""
    return {
        "type": "function",
        "name": t.name,
        "description": t.description,
        "parameters": t.parameters,
        "strict": t.extra.get("strict"),
    }


def _tool_choice(v: object) -> ToolChoice:
    if v in ("auto", "none", "required"):
        return ToolChoice(v)
    if isinstance(v, dict) and v.get("type") == "function" and isinstance(v.get("name"), str):
        return ToolChoice("named", v["name"])
    raise bad_request(
        "tool_choice must be 'auto', 'none', 'required' or {'type': 'function', 'name': ...}",
        "tool_choice",
    )


def _metadata(v: object) -> dict[str, str]:
    if v is None:
        return {}
    if not isinstance(v, dict) or len(v) > MAX_METADATA:
        raise bad_request(f"metadata must be an object of at most {MAX_METADATA} pairs", "metadata")
    for key, value in v.items():
        if len(key) > MAX_METADATA_KEY or not isinstance(value, str):
            raise bad_request(
                f"metadata keys must be at most {MAX_METADATA_KEY} characters and values strings",
                "metadata",
            )
        if len(value) > MAX_METADATA_VALUE:
            raise bad_request(
                f"metadata values must be at most {MAX_METADATA_VALUE} characters", "metadata"
            )
    return dict(v)


def _echo(body: dict[str, object], req: GenerateRequest, tools: list[Tool]) -> dict[str, object]:
    """The request's settings as the Response object repeats them."""
    reasoning = body.get("reasoning")
    text = body.get("text")
    fmt = (text.get("format") if isinstance(text, dict) else None) or {"type": "text"}
    choice = body.get("tool_choice", "auto")
    echo: dict[str, object] = {
        "instructions": body.get("instructions"),
        "max_output_tokens": req.sampling.max_tokens,
        "metadata": _metadata(body.get("metadata")),
        "parallel_tool_calls": req.tools.parallel,
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": None
        if not isinstance(reasoning, dict)
        else {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "temperature": req.sampling.temperature,
        "text": {"format": fmt},
        "tool_choice": "auto" if choice is None else choice,
        "tools": [_shown(t) for t in tools],
        "top_logprobs": req.sampling.top_logprobs,
        "top_p": req.sampling.top_p,
        "truncation": "disabled",
    }
    if req.user is not None:
        echo["user"] = req.user
    return echo
