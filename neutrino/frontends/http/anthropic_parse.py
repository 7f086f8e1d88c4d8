"""Anthropic Messages request JSON -> :class:`GenerateRequest` (sans-IO).

A Messages body is translated into the OpenAI chat body it means, and that body goes
through :func:`~neutrino.frontends.http.parse.parse_chat`: the limits, the sampling
checks, the image decoding and the tool-choice rules are the OpenAI route's, applied
once. What only Anthropic's API has is checked here, with the paths of its own body:

* ``system`` (a string or text blocks) becomes the leading system message;
* user turns: ``text`` and ``image`` blocks (base64 source; a ``url`` source is refused
  as the OpenAI route refuses image URLs), and ``tool_result`` blocks, which become
  ``tool`` messages placed before the turn's other blocks;
* assistant turns: ``text``, ``thinking`` (the turn's ``reasoning_content``, which the
  reasoning templates replay), ``redacted_thinking`` (dropped) and ``tool_use`` blocks
  (the turn's ``tool_calls``);
* ``tools`` (``name``, ``description``, ``input_schema``), ``tool_choice`` (auto, any,
  tool, none; ``disable_parallel_tool_use``), ``stop_sequences``, ``metadata.user_id``;
* ``thinking``: ``enabled`` / ``adaptive`` / ``disabled`` set the template switches the
  reasoning families read (``enable_thinking``, ``thinking``) and ``budget_tokens`` is
  passed as ``thinking_budget`` (no bundled template reads one yet).

Unknown fields are ignored (``cache_control``, ``service_tier``, ...). A conversation
that ends with an assistant turn (Anthropic's "prefill") is refused: Neutrino's
templates render a finished assistant turn, not one to continue.
"""

from __future__ import annotations

import json
from typing import Any

from neutrino.config import LimitsConfig
from neutrino.errors import NeutrinoError, bad_request, unsupported
from neutrino.frontends.common import new_id
from neutrino.frontends.http.parse import parse_chat
from neutrino.frontends.params import Origin, Renames, renamed
from neutrino.pipeline.fields import is_int, is_num
from neutrino.pipeline.request import GenerateRequest

MAX_TOOL_NAME = 128
# Where each message of the translated body came from (the Anthropic message, and the
# block index of each of its content parts).
Origins = list[Origin]
# The translated body's fields that the Messages request names otherwise.
_FIELDS = {
    "response_format.json_schema.schema": "output_config.format.schema",
    "response_format.json_schema": "output_config.format",
    "response_format": "output_config.format",
    "reasoning_effort": "output_config.effort",
}


def parse_messages(body: Any, limits: LimitsConfig) -> GenerateRequest:
    """``POST /v1/messages``: a generation request (kind chat, one choice)."""
    return _parse(body, limits, generate=True).replace(request_id=new_id("msg"))


def parse_count(body: Any, limits: LimitsConfig) -> GenerateRequest:
    """``POST /v1/messages/count_tokens``: the prompt of the same request (no
    ``max_tokens`` or sampling: only what the prompt is made of)."""
    return _parse(body, limits, generate=False).replace(request_id=new_id("msgcount"))


def _parse(body: Any, limits: LimitsConfig, *, generate: bool) -> GenerateRequest:
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    origins: Origins = []
    chat: dict[str, Any] = {"model": body.get("model"), "messages": _conversation(body, origins)}
    if generate:
        _generation_fields(body, chat)
    tools = body.get("tools")
    if tools is not None:
        chat["tools"] = _tools(tools)
    choice = body.get("tool_choice")
    if choice is not None:
        chat["tool_choice"], parallel = _tool_choice(choice, bool(chat.get("tools")))
        if parallel is not None:
            chat["parallel_tool_calls"] = parallel
    thinking = body.get("thinking")
    if thinking is not None:
        chat["chat_template_kwargs"] = thinking_kwargs(thinking)
    output = body.get("output_config")
    if output is not None:
        _output_config(output, chat, generate)
    try:
        return parse_chat(chat, limits)
    except NeutrinoError as err:
        # Anthropic's error object has no param: the message names the field.
        terms = Renames(messages=origins, fields=_FIELDS)
        raise renamed(err, terms, in_message=True, name_param=True) from None


# ---------------------------------------------------------------- scalar fields


def _generation_fields(body: dict[str, Any], chat: dict[str, Any]) -> None:
    """``max_tokens`` (required), sampling, stop sequences, stream, metadata."""
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        raise bad_request("max_tokens is required", "max_tokens")
    chat["max_tokens"] = max_tokens
    temperature = body.get("temperature")
    if temperature is not None:
        if not is_num(temperature) or not 0.0 <= temperature <= 1.0:
            raise bad_request("temperature must be a number between 0 and 1", "temperature")
        chat["temperature"] = temperature
    for key in ("top_p", "top_k", "stream", "seed"):  # seed: Neutrino's extension
        if body.get(key) is not None:
            chat[key] = body[key]
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise bad_request("stop_sequences must be an array of strings", "stop_sequences")
        chat["stop"] = stops
    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise bad_request("metadata must be an object", "metadata")
        user = metadata.get("user_id")
        if user is not None:
            if not isinstance(user, str):
                raise bad_request("metadata.user_id must be a string", "metadata.user_id")
            chat["user"] = user


_EFFORTS = {"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}


def _output_config(output: Any, chat: dict[str, Any], generate: bool) -> None:
    """``effort`` (the template's ``reasoning_effort``, as the OpenAI route's) and
    ``format`` (a JSON schema the answer follows: a strict ``response_format``)."""
    if not isinstance(output, dict):
        raise bad_request("output_config must be an object", "output_config")
    effort = output.get("effort")
    if effort is not None:
        if effort not in _EFFORTS:
            raise bad_request(
                "output_config.effort must be one of low, medium, high, xhigh, max",
                "output_config.effort",
            )
        chat["reasoning_effort"] = _EFFORTS[effort]
    form = output.get("format")
    if form is None or not generate:
        return
    kind, schema = (form.get("type"), form.get("schema")) if isinstance(form, dict) else (0, 0)
    if kind != "json_schema" or not isinstance(schema, dict):
        raise bad_request(
            "output_config.format must be {'type': 'json_schema', 'schema': {...}}",
            "output_config.format",
        )
    chat["response_format"] = {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema, "strict": True},
    }


def thinking_kwargs(thinking: Any) -> dict[str, Any]:
    """The template variables that ``thinking`` sets: ``enable_thinking`` (Qwen3, GLM,
    Nemotron) and ``thinking`` (DeepSeek-V3.1, Granite), and ``thinking_budget`` for
    a template that reads a budget."""
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind == "disabled":
        return {"enable_thinking": False, "thinking": False}
    if kind == "adaptive":
        return {"enable_thinking": True, "thinking": True}
    if kind != "enabled":
        raise bad_request(
            "thinking must be {'type': 'enabled', 'budget_tokens': N}, "
            "{'type': 'adaptive'} or {'type': 'disabled'}",
            "thinking",
        )
    budget = thinking.get("budget_tokens")
    if not is_int(budget) or budget < 1:
        raise bad_request(
            "thinking.budget_tokens must be a positive integer", "thinking.budget_tokens"
        )
    return {"enable_thinking": True, "thinking": True, "thinking_budget": budget}


# ---------------------------------------------------------------- tools


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise bad_request("tools must be an array", "tools")
    out = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise bad_request(f"{where} must be an object", where)
        kind = tool.get("type")
        if kind not in (None, "custom"):
            raise unsupported(
                f"{where}: server tools (type {str(kind)[:64]!r}) are not supported; "
                "only client tools with an input_schema",
                where,
            )
        name = tool.get("name")
        if not isinstance(name, str) or not 0 < len(name) <= MAX_TOOL_NAME:
            raise bad_request(f"{where}.name must be a string of 1 to 128 characters", where)
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            raise bad_request(f"{where}.input_schema must be an object", f"{where}.input_schema")
        # OpenAI's order (name, description, parameters): the templates render the
        # tools as JSON, so the same tools give the same prompt over either API.
        function: dict[str, Any] = {"name": name}
        description = tool.get("description")
        if description is not None:
            if not isinstance(description, str):
                raise bad_request(f"{where}.description must be a string", where)
            function["description"] = description
        function["parameters"] = schema
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: Any, has_tools: bool) -> tuple[Any, bool | None]:
    """The OpenAI ``tool_choice`` and ``parallel_tool_calls`` (None: not set)."""
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind not in ("auto", "any", "tool", "none"):
        raise bad_request(
            "tool_choice must be {'type': 'auto' | 'any' | 'tool' | 'none'}", "tool_choice"
        )
    assert isinstance(choice, dict)
    if kind in ("any", "tool") and not has_tools:
        raise bad_request(f"tool_choice {{'type': {kind!r}}} needs tools", "tool_choice")
    disable = choice.get("disable_parallel_tool_use")
    if disable is not None and not isinstance(disable, bool):
        raise bad_request(
            "tool_choice.disable_parallel_tool_use must be a boolean",
            "tool_choice.disable_parallel_tool_use",
        )
    parallel = None if disable is None else not disable
    if kind == "tool":
        name = choice.get("name")
        if not isinstance(name, str):
            raise bad_request("tool_choice.name must be a string", "tool_choice.name")
        return {"type": "function", "function": {"name": name}}, parallel
    return {"auto": "auto", "any": "required", "none": "none"}[kind], parallel


# ---------------------------------------------------------------- messages


def _conversation(body: dict[str, Any], origins: Origins) -> list[dict[str, Any]]:
    """The OpenAI messages of ``system`` and ``messages``; ``origins`` says, for each,
    which Anthropic message (and blocks) it came from."""
    out: list[dict[str, Any]] = []
    system = _system(body.get("system"))
    if system is not None:
        out.append(system)
        origins.append(Origin("system", parts_at=""))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages must be a non-empty array", "messages")
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise bad_request(f"{where} must be an object", where)
        role = m.get("role")
        if role not in ("user", "assistant"):
            raise bad_request(f"{where}.role must be 'user' or 'assistant'", f"{where}.role")
        content = m.get("content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            origins.append(Origin(where))
        elif isinstance(content, list):
            turn = _user_turn if role == "user" else _assistant_turn
            turn(content, i, out, origins)
        else:
            raise bad_request(
                f"{where}.content must be a string or an array of content blocks",
                f"{where}.content",
            )
    if messages[-1].get("role") == "assistant":
        raise unsupported(
            "the last message must be a user turn: continuing a final assistant turn "
            "(prefill) is not supported",
            "messages",
        )
    return out


def _system(system: Any) -> dict[str, Any] | None:
    if system is None or system == "" or system == []:
        return None
    if isinstance(system, str):
        return {"role": "system", "content": system}
    if not isinstance(system, list):
        raise bad_request("system must be a string or an array of text blocks", "system")
    parts = []
    for j, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise bad_request(f"system[{j}] must be a text block", f"system[{j}]")
        parts.append(_text_part(block, f"system[{j}]"))
    return {"role": "system", "content": parts}


def _block(block: Any, where: str) -> str:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise bad_request(f"{where} must be a content block with a type", where)
    kind: str = block["type"]
    return kind


def _text_part(block: dict[str, Any], where: str) -> dict[str, Any]:
    text = block.get("text")
    if not isinstance(text, str):
        raise bad_request(f"{where}.text must be a string", f"{where}.text")
    return {"type": "text", "text": text}


def _image_part(block: dict[str, Any], where: str) -> dict[str, Any]:
    """An image block as the OpenAI route's ``image_url`` part (a data URI for a base64
    source; a URL source is passed on, and refused there: Neutrino fetches nothing)."""
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") not in ("base64", "url"):
        raise bad_request(f"{where}.source must be a base64 or url image source", f"{where}.source")
    if source["type"] == "url":
        url: Any = source.get("url")
        if not isinstance(url, str):
            raise bad_request(f"{where}.source.url must be a string", f"{where}.source.url")
        return {"type": "image_url", "image_url": {"url": url}}
    media, data = source.get("media_type"), source.get("data")
    if not isinstance(media, str) or not isinstance(data, str):
        raise bad_request(f"{where}.source needs a media_type and base64 data", f"{where}.source")
    url = f"data:{media};base64,{data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _user_turn(blocks: list[Any], i: int, out: list[dict[str, Any]], origins: Origins) -> None:
    """A user turn: its tool results as ``tool`` messages, then its text and images."""
    parts: list[dict[str, Any]] = []
    at: list[int] = []
    for j, block in enumerate(blocks):
        where = f"messages[{i}].content[{j}]"
        kind = _block(block, where)
        if kind == "text":
            parts.append(_text_part(block, where))
        elif kind == "image":
            parts.append(_image_part(block, where))
        elif kind == "tool_result":
            out.append(_tool_result(block, where))
            origins.append(Origin(f"messages[{i}]", [j]))
            continue
        else:
            raise unsupported(
                f"{where}: content blocks of type {kind[:64]!r} are not supported in a user turn",
                where,
            )
        at.append(j)
    if parts or not blocks:
        out.append({"role": "user", "content": parts})
        origins.append(Origin(f"messages[{i}]", at))


def _tool_result(block: dict[str, Any], where: str) -> dict[str, Any]:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise bad_request(f"{where}.tool_use_id must be a string", f"{where}.tool_use_id")
    content = block.get("content", "")
    if content is None:
        content = ""
    if isinstance(content, list):
        texts = []
        for k, part in enumerate(content):
            at = f"{where}.content[{k}]"
            if _block(part, at) != "text":
                raise unsupported(f"{at}: a tool result may hold only text blocks", at)
            texts.append(_text_part(part, at)["text"])
        content = "".join(texts)
    elif not isinstance(content, str):
        raise bad_request(
            f"{where}.content must be a string or an array of text blocks", f"{where}.content"
        )
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _assistant_turn(blocks: list[Any], i: int, out: list[dict[str, Any]], origins: Origins) -> None:
    """An assistant turn: text, thinking (its reasoning_content) and tool_use blocks."""
    parts: list[dict[str, Any]] = []
    at: list[int] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        where = f"messages[{i}].content[{j}]"
        kind = _block(block, where)
        if kind == "text":
            parts.append(_text_part(block, where))
            at.append(j)
        elif kind == "thinking":
            thought = block.get("thinking")
            if not isinstance(thought, str):
                raise bad_request(f"{where}.thinking must be a string", f"{where}.thinking")
            reasoning.append(thought)
        elif kind == "tool_use":
            calls.append(_tool_use(block, where))
        elif kind != "redacted_thinking":
            raise unsupported(
                f"{where}: content blocks of type {kind[:64]!r} are not supported in an "
                "assistant turn",
                where,
            )
    msg: dict[str, Any] = {"role": "assistant", "content": parts or (None if calls else "")}
    if reasoning:
        msg["reasoning_content"] = "".join(reasoning)
    if calls:
        msg["tool_calls"] = calls
    out.append(msg)
    origins.append(Origin(f"messages[{i}]", at))


def _tool_use(block: dict[str, Any], where: str) -> dict[str, Any]:
    call_id, name, args = block.get("id"), block.get("name"), block.get("input")
    if not isinstance(call_id, str) or not call_id:
        raise bad_request(f"{where}.id must be a string", f"{where}.id")
    if not isinstance(name, str) or not name:
        raise bad_request(f"{where}.name must be a string", f"{where}.name")
    if not isinstance(args, dict):
        raise bad_request(f"{where}.input must be an object", f"{where}.input")
    arguments = json.dumps(args, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
