"""Anthropic Messages request JSON -> :class:`GenerateRequest` (sans-IO).

A Messages body is translated into the pipeline's typed request: each value goes
through the validator of its type (the limits, sampling checks, image decoding and
tool-choice rules every protocol gets) with its path in the Messages body, so an error
names the field as the client wrote it (Anthropic's error object has no ``param``: the
message leads with the path when it does not name it). What only Anthropic's API has:

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
from collections.abc import Iterator

from neutrino.config import LimitsConfig
from neutrino.errors import NeutrinoError, bad_request, parse_path, unsupported
from neutrino.frontends.common import new_id, object_member
from neutrino.pipeline import chat, sampling
from neutrino.pipeline.chat import (
    AUTO_TOOLS,
    FunctionCall,
    ImagePart,
    Message,
    Part,
    TextPart,
    Tool,
    ToolChoice,
)
from neutrino.pipeline.draft import Draft, Names
from neutrino.pipeline.fields import is_int, is_num
from neutrino.pipeline.images import decode_image_url
from neutrino.pipeline.request import GenerateRequest
from neutrino.pipeline.structured import json_schema

MAX_TOOL_NAME = 128
NAMES = Names(constraints="output_config.format")


def parse_messages(body: object, limits: LimitsConfig) -> GenerateRequest:
    """``POST /v1/messages``: a generation request (kind chat, one choice)."""
    return _named(body, limits, new_id("msg"), generate=True)


def parse_count(body: object, limits: LimitsConfig) -> GenerateRequest:
    """``POST /v1/messages/count_tokens``: the prompt of the same request (no
    ``max_tokens`` or sampling: only what the prompt is made of)."""
    return _named(body, limits, new_id("msgcount"), generate=False)


def _named(body: object, limits: LimitsConfig, rid: str, *, generate: bool) -> GenerateRequest:
    try:
        return _parse(body, limits, rid, generate=generate)
    except NeutrinoError as err:
        # Anthropic's error object has no param: the message names the field.
        param = err.param
        if param is None or param in err.message:
            raise
        raise NeutrinoError(
            err.kind, f"{param}: {err.message}", param=param, code=err.code, loc=err.loc
        ) from None


def _parse(body: object, limits: LimitsConfig, rid: str, *, generate: bool) -> GenerateRequest:
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    d = Draft(rid, "chat")
    model = body.get("model")
    d.model = model if isinstance(model, str) else ""
    d.messages = _conversation(body, d, limits)
    if generate:
        _generation_fields(body, d, limits)
    tools = body.get("tools")
    if tools is not None:
        d.tools = _tools(tools, limits)
    choice = body.get("tool_choice")
    if choice is not None:
        d.tool_choice, parallel = _tool_choice(choice, bool(d.tools))
        if parallel is not None:
            d.parallel_tool_calls = parallel
    thinking = body.get("thinking")
    if thinking is not None:
        d.template_kwargs = thinking_kwargs(thinking)
    output = body.get("output_config")
    if output is not None:
        _output_config(output, d, generate, limits)
    return d.freeze(NAMES)


# ---------------------------------------------------------------- scalar fields


def _generation_fields(body: dict[str, object], d: Draft, limits: LimitsConfig) -> None:
    """``max_tokens`` (required), sampling, stop sequences, stream, metadata."""
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        raise bad_request("max_tokens is required", "max_tokens")
    d.sample("max_tokens", max_tokens, ("max_tokens",), limits)
    temperature = body.get("temperature")
    if temperature is not None:
        if not is_num(temperature) or not 0.0 <= temperature <= 1.0:
            raise bad_request("temperature must be a number between 0 and 1", "temperature")
        d.sample("temperature", temperature, ("temperature",), limits)
    for key in ("top_p", "top_k", "seed"):  # seed: Neutrino's extension
        if body.get(key) is not None:
            d.sample(key, body[key], (key,), limits)
    stream = body.get("stream")
    if stream is not None:
        if not isinstance(stream, bool):
            raise bad_request("stream must be a boolean", "stream")
        d.stream = stream
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise bad_request("stop_sequences must be an array of strings", "stop_sequences")
        d.stop = sampling.stops(stops, ("stop_sequences",), limits)
    metadata = object_member(body, "metadata")
    if metadata is not None:
        user = metadata.get("user_id")
        if user is not None:
            if not isinstance(user, str):
                raise bad_request("metadata.user_id must be a string", "metadata.user_id")
            d.user = user


_EFFORTS = {"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}


def _output_config(output: object, d: Draft, generate: bool, limits: LimitsConfig) -> None:
    """``effort`` (the template's ``reasoning_effort``, as the OpenAI route's) and
    ``format`` (a JSON schema the answer follows, strictly)."""
    if not isinstance(output, dict):
        raise bad_request("output_config must be an object", "output_config")
    effort = output.get("effort")
    if effort is not None:
        if effort not in _EFFORTS:
            raise bad_request(
                "output_config.effort must be one of low, medium, high, xhigh, max",
                "output_config.effort",
            )
        d.reasoning_effort = _EFFORTS[effort]
    form = output.get("format")
    if form is None or not generate:
        return
    kind, schema = (form.get("type"), form.get("schema")) if isinstance(form, dict) else (0, 0)
    if kind != "json_schema" or not isinstance(schema, dict):
        raise bad_request(
            "output_config.format must be {'type': 'json_schema', 'schema': {...}}",
            "output_config.format",
        )
    guided, validator = json_schema(
        schema, True, "output_config.format.schema", limits.max_schema_depth
    )
    d.constrain(guided, validator, "output_config.format")


def thinking_kwargs(thinking: object) -> dict[str, object]:
    """The template variables that ``thinking`` sets: ``enable_thinking`` (Qwen3, GLM,
    Nemotron) and ``thinking`` (DeepSeek-V3.1, Granite), and ``thinking_budget`` for
    a template that reads a budget."""
    if not isinstance(thinking, dict):
        thinking = {}
    kind = thinking.get("type")
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


def _tools(tools: object, limits: LimitsConfig) -> tuple[Tool, ...]:
    if not isinstance(tools, list):
        raise bad_request("tools must be an array", "tools")
    chat.tools_count(len(tools), ("tools",), limits)
    return tuple([_tool(tool, i) for i, tool in enumerate(tools)])


def _tool(tool: object, i: int) -> Tool:
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
    description = tool.get("description")
    if description is not None and not isinstance(description, str):
        raise bad_request(f"{where}.description must be a string", where)
    return Tool(name, description, schema)


_CHOICES = {"auto": AUTO_TOOLS, "any": ToolChoice("required"), "none": ToolChoice("none")}


def _tool_choice(choice: object, has_tools: bool) -> tuple[ToolChoice, bool | None]:
    """The tool choice and whether calls may be parallel (None: not said)."""
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
        return ToolChoice("named", name), parallel
    return _CHOICES[kind], parallel


# ---------------------------------------------------------------- messages


def _conversation(body: dict[str, object], d: Draft, limits: LimitsConfig) -> tuple[Message, ...]:
    """The turns of ``system`` and ``messages``: a user turn's tool results become tool
    messages before its other blocks, an assistant's thinking its reasoning."""
    out: list[Message] = []
    system = _system(body.get("system"))
    if system is not None:
        out.append(system)
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise bad_request("messages must be a non-empty array", "messages")
    chat.messages_count(len(messages), ("messages",), limits)
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise bad_request(f"{where} must be an object", where)
        role = m.get("role")
        if role not in ("user", "assistant"):
            raise bad_request(f"{where}.role must be 'user' or 'assistant'", f"{where}.role")
        content = m.get("content")
        if isinstance(content, str):
            out.append(Message(role, content))
        elif isinstance(content, list):
            if role == "user":
                _user_turn(content, i, out, d)
            else:
                out.append(_assistant_turn(content, i))
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
    return tuple(out)


def _system(system: object) -> Message | None:
    if system is None or system == "" or system == []:
        return None
    if isinstance(system, str):
        return Message("system", system)
    if not isinstance(system, list):
        raise bad_request("system must be a string or an array of text blocks", "system")
    parts: list[Part] = []
    for j, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise bad_request(f"system[{j}] must be a text block", f"system[{j}]")
        parts.append(_text_part(block, f"system[{j}]"))
    return Message("system", tuple(parts))


def _blocks(blocks: list[object], where: str) -> Iterator[tuple[str, str, dict[str, object]]]:
    """Each content block of ``blocks`` (at ``where``): its place, its type, the block."""
    for j, block in enumerate(blocks):
        at = f"{where}[{j}]"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise bad_request(f"{at} must be a content block with a type", at)
        yield at, block["type"], block


def _not_in(kind: str, where: str, turn: str) -> NeutrinoError:
    return unsupported(
        f"{where}: content blocks of type {kind[:64]!r} are not supported in {turn}", where
    )


def _text_part(block: dict[str, object], where: str) -> TextPart:
    text = block.get("text")
    if not isinstance(text, str):
        raise bad_request(f"{where}.text must be a string", f"{where}.text")
    return TextPart(text)


def _image_part(block: dict[str, object], where: str, d: Draft) -> ImagePart:
    """An image block: a base64 source's bytes, checked as every image is (a URL
    source is refused as the OpenAI route refuses one: Neutrino fetches nothing)."""
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") not in ("base64", "url"):
        raise bad_request(f"{where}.source must be a base64 or url image source", f"{where}.source")
    if source["type"] == "url":
        url: object = source.get("url")
        if not isinstance(url, str):
            raise bad_request(f"{where}.source.url must be a string", f"{where}.source.url")
    else:
        media, data = source.get("media_type"), source.get("data")
        if not isinstance(media, str) or not isinstance(data, str):
            raise bad_request(
                f"{where}.source needs a media_type and base64 data", f"{where}.source"
            )
        url = f"data:{media};base64,{data}"
    chat.images_count(len(d.images), parse_path(where))
    return ImagePart(d.add_image(decode_image_url(url, parse_path(where))))


def _user_turn(blocks: list[object], i: int, out: list[Message], d: Draft) -> None:
    """A user turn: its tool results as ``tool`` messages, then its text and images."""
    parts: list[Part] = []
    for where, kind, block in _blocks(blocks, f"messages[{i}].content"):
        if kind == "text":
            parts.append(_text_part(block, where))
        elif kind == "image":
            parts.append(_image_part(block, where, d))
        elif kind == "tool_result":
            out.append(_tool_result(block, where))
        else:
            raise _not_in(kind, where, "a user turn")
    if parts or not blocks:
        out.append(Message("user", tuple(parts)))


def _tool_result(block: dict[str, object], where: str) -> Message:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise bad_request(f"{where}.tool_use_id must be a string", f"{where}.tool_use_id")
    content = block.get("content", "")
    if content is None:
        content = ""
    if isinstance(content, list):
        texts = []
        for at, kind, part in _blocks(content, f"{where}.content"):
            if kind != "text":
                raise unsupported(f"{at}: a tool result may hold only text blocks", at)
            texts.append(_text_part(part, at).text)
        content = "".join(texts)
    elif not isinstance(content, str):
        raise bad_request(
            f"{where}.content must be a string or an array of text blocks", f"{where}.content"
        )
    return Message("tool", content, extra={"tool_call_id": call_id})


def _assistant_turn(blocks: list[object], i: int) -> Message:
    """An assistant turn: text, thinking (its reasoning_content) and tool_use blocks."""
    parts: list[Part] = []
    reasoning: list[str] = []
    calls: list[FunctionCall] = []
    for where, kind, block in _blocks(blocks, f"messages[{i}].content"):
        if kind == "text":
            parts.append(_text_part(block, where))
        elif kind == "thinking":
            thought = block.get("thinking")
            if not isinstance(thought, str):
                raise bad_request(f"{where}.thinking must be a string", f"{where}.thinking")
            reasoning.append(thought)
        elif kind == "tool_use":
            calls.append(_tool_use(block, where))
        elif kind != "redacted_thinking":
            raise _not_in(kind, where, "an assistant turn")
    content: tuple[Part, ...] | str | None = tuple(parts) or (None if calls else "")
    extra = {"reasoning_content": "".join(reasoning)} if reasoning else {}
    return Message("assistant", content, tuple(calls), extra)


def _tool_use(block: dict[str, object], where: str) -> FunctionCall:
    call_id, name, args = block.get("id"), block.get("name"), block.get("input")
    if not isinstance(call_id, str) or not call_id:
        raise bad_request(f"{where}.id must be a string", f"{where}.id")
    if not isinstance(name, str) or not name:
        raise bad_request(f"{where}.name must be a string", f"{where}.name")
    if not isinstance(args, dict):
        raise bad_request(f"{where}.input must be an object", f"{where}.input")
    return FunctionCall(name, json.dumps(args, ensure_ascii=False), call_id)
