"""OpenAI Responses API request JSON -> :class:`GenerateRequest` (sans-IO).

A Responses request is translated into the OpenAI chat request that means the same
thing, which :func:`~neutrino.frontends.http.parse.parse_chat` then checks and turns into
the pipeline's request: validation, limits and errors are chat's, with the parameter
names the client used (``max_output_tokens``, ``text.format``, ``input[2].content[0]``).

What a Responses request carries that chat has no field for (instructions, metadata,
``store``, ``previous_response_id``) is kept beside the request, for the answer to
repeat. Fields the server cannot honour (background responses, server-side
conversations and prompts, built-in tools) are refused with a 400 naming them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from neutrino.config import LimitsConfig
from neutrino.errors import ErrorKind, NeutrinoError, bad_request, unsupported
from neutrino.frontends.common import new_id
from neutrino.frontends.http.parse import parse_chat
from neutrino.frontends.http.responses_items import Conversation, input_items
from neutrino.frontends.params import Origin, Renames, renamed
from neutrino.pipeline.request import GenerateRequest
from neutrino.pipeline.sampling import MAX_TOP_LOGPROBS

MAX_METADATA = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
LOGPROBS_INCLUDE = "message.output_text.logprobs"

# Fields passed to chat as they are (the same name and meaning there): sampling, and
# the vLLM-style extras chat accepts.
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
# Chat's parameter names in its errors -> the Responses request's.
_FIELDS = {
    "response_format.json_schema.schema": "text.format.schema",
    "response_format.json_schema.strict": "text.format.strict",
    "response_format.json_schema": "text.format",
    "response_format": "text.format",
    "max_completion_tokens": "max_output_tokens",
    "reasoning_effort": "reasoning.effort",
}


@dataclass(slots=True)
class Stored:
    """A finished response kept by the store: its conversation (as input items, the
    response's own output last) and the Response object itself."""

    owner: str  # the API key's name that made it ("" when keys are off)
    items: list[Any]
    response: dict[str, Any]
    size: int = 0  # bytes, roughly (what the store's bound counts)


# previous_response_id -> the stored response (None: unknown); None: there is no store.
Lookup = Callable[[str], Stored | None] | None


@dataclass(slots=True)
class ResponsesRequest:
    """A parsed Responses request: the pipeline's request and what the answer repeats."""

    req: GenerateRequest
    echo: dict[str, Any]  # the request's settings, as a Response object shows them
    items: list[Any]  # the conversation: the previous response's items, then this input
    store: bool = True
    previous: Stored | None = None


def parse_responses(body: Any, limits: LimitsConfig, lookup: Lookup = None) -> ResponsesRequest:
    """A Responses request; NeutrinoError (400 naming the parameter) when it is invalid."""
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    _refuse_unsupported(body)
    previous = _previous(body.get("previous_response_id"), lookup)
    earlier = previous.items if previous is not None else []
    items = [*earlier, *input_items(body.get("input"))]
    conv = Conversation()
    for i, item in enumerate(items):
        conv.add(item, "previous_response_id" if i < len(earlier) else f"input[{i - len(earlier)}]")
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise bad_request("instructions must be a string", "instructions")
        conv.messages.insert(0, {"role": "system", "content": instructions})
        conv.origins.insert(0, "instructions")
    chat: dict[str, Any] = {k: body[k] for k in _SAME if body.get(k) is not None}
    chat["messages"] = conv.messages
    include = _include(body.get("include"))
    _sampling(body, chat, include)
    tools = _tools(body.get("tools"))
    if tools:
        chat["tools"] = [_chat_tool(t) for t in tools]
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
    try:
        req = parse_chat(chat, limits)
    except NeutrinoError as err:
        terms = Renames(messages=[Origin(o) for o in conv.origins], fields=_FIELDS)
        raise renamed(err, terms, in_message=True) from None
    req = req.replace(request_id=new_id("resp"))
    store = body.get("store", True)
    if not isinstance(store, bool):
        raise bad_request("store must be a boolean", "store")
    echo = _echo(body, req, tools)
    return ResponsesRequest(req, echo, items, store, previous)


def _refuse_unsupported(body: dict[str, Any]) -> None:
    if body.get("background"):
        raise unsupported("background responses are not supported", "background")
    for key in ("conversation", "prompt"):
        if body.get(key) is not None:
            raise unsupported(f"{key} is not supported: send the input itself", key)
    if body.get("truncation", "disabled") not in ("disabled", None):
        raise unsupported("truncation must be 'disabled' (the default)", "truncation")


def _previous(value: Any, lookup: Lookup) -> Stored | None:
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


def _include(v: Any) -> list[str]:
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v) or len(v) > 64:
        raise bad_request("include must be an array of strings", "include")
    return v


def _sampling(body: dict[str, Any], chat: dict[str, Any], include: list[str]) -> None:
    """max_output_tokens, text.format, reasoning and logprobs, as chat names them."""
    if body.get("max_output_tokens") is not None:
        chat["max_completion_tokens"] = body["max_output_tokens"]
    text = body.get("text")
    if text is not None:
        if not isinstance(text, dict):
            raise bad_request("text must be an object", "text")
        fmt = text.get("format")
        if fmt is not None:
            chat["response_format"] = _response_format(fmt)
    reasoning = body.get("reasoning")
    if reasoning is not None:
        if not isinstance(reasoning, dict):
            raise bad_request("reasoning must be an object", "reasoning")
        if reasoning.get("effort") is not None:
            chat["reasoning_effort"] = reasoning["effort"]
    top = body.get("top_logprobs")
    if top is not None:
        if not isinstance(top, int) or isinstance(top, bool) or not 0 <= top <= MAX_TOP_LOGPROBS:
            raise bad_request(
                f"top_logprobs must be an integer between 0 and {MAX_TOP_LOGPROBS}",
                "top_logprobs",
            )
        chat["top_logprobs"] = top
    if top is not None or LOGPROBS_INCLUDE in include:
        chat["logprobs"] = True


def _response_format(fmt: Any) -> dict[str, Any]:
    """``text.format`` as chat's ``response_format``."""
    if not isinstance(fmt, dict) or not isinstance(fmt.get("type"), str):
        raise bad_request("text.format must be an object with a type", "text.format")
    if fmt["type"] != "json_schema":
        return {"type": fmt["type"]}  # text, json_object; chat refuses the others
    spec = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
    if not isinstance(spec.get("name"), str):
        raise bad_request("text.format.name is required for json_schema", "text.format.name")
    if "schema" not in spec:
        raise bad_request("text.format.schema is required for json_schema", "text.format.schema")
    if spec.get("strict") is None:
        spec.pop("strict", None)
    return {"type": "json_schema", "json_schema": spec}


def _tools(v: Any) -> list[dict[str, Any]]:
    """Function tools, checked (name, description, parameters, strict)."""
    if v is None:
        return []
    if not isinstance(v, list):
        raise bad_request("tools must be an array", "tools")
    out = []
    for i, t in enumerate(v):
        where = f"tools[{i}]"
        if not isinstance(t, dict):
            raise bad_request(f"{where} must be an object", where)
        if t.get("type") != "function":
            kind = str(t.get("type"))[:64]
            raise unsupported(
                f"tools of type {kind!r} are not supported: only function tools", f"{where}.type"
            )
        if not isinstance(t.get("name"), str) or not t["name"]:
            raise bad_request(f"{where}.name must be a non-empty string", f"{where}.name")
        for key, kind_of, what in (
            ("description", str, "a string"),
            ("parameters", dict, "an object"),
            ("strict", bool, "a boolean"),
        ):
            if t.get(key) is not None and not isinstance(t[key], kind_of):
                raise bad_request(f"{where}.{key} must be {what}", f"{where}.{key}")
        out.append(
            {
                "type": "function",
                "name": t["name"],
                "description": t.get("description"),
                "parameters": t.get("parameters"),
                "strict": t.get("strict"),
            }
        )
    return out


def _chat_tool(t: dict[str, Any]) -> dict[str, Any]:
    fn = {"name": t["name"]}
    fn.update({k: t[k] for k in ("description", "parameters", "strict") if t[k] is not None})
    return {"type": "function", "function": fn}


def _tool_choice(v: Any) -> Any:
    if v in ("auto", "none", "required"):
        return v
    if isinstance(v, dict) and v.get("type") == "function" and isinstance(v.get("name"), str):
        return {"type": "function", "function": {"name": v["name"]}}
    raise bad_request(
        "tool_choice must be 'auto', 'none', 'required' or {'type': 'function', 'name': ...}",
        "tool_choice",
    )


def _metadata(v: Any) -> dict[str, str]:
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


def _echo(
    body: dict[str, Any], req: GenerateRequest, tools: list[dict[str, Any]]
) -> dict[str, Any]:
    """The request's settings as the Response object repeats them."""
    reasoning = body.get("reasoning")
    fmt = (body.get("text") or {}).get("format") or {"type": "text"}
    choice = body.get("tool_choice", "auto")
    echo: dict[str, Any] = {
        "instructions": body.get("instructions"),
        "max_output_tokens": req.sampling.max_tokens,
        "metadata": _metadata(body.get("metadata")),
        "parallel_tool_calls": req.tools.parallel,
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": None
        if reasoning is None
        else {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "temperature": req.sampling.temperature,
        "text": {"format": fmt},
        "tool_choice": "auto" if choice is None else choice,
        "tools": tools,
        "top_logprobs": req.sampling.top_logprobs,
        "top_p": req.sampling.top_p,
        "truncation": "disabled",
    }
    if req.user is not None:
        echo["user"] = req.user
    return echo
