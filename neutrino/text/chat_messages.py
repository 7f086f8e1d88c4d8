"""Normalisation of OpenAI-style chat messages before template rendering."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from neutrino.text.errors import TemplateError
from neutrino.text.families import ToolCallArguments, ToolCallIds
from neutrino.text.tool_call_ids import fit_alnum9

__all__ = ["normalize_messages"]

_TEXT_PART_KEYS = {"text": "text", "refusal": "refusal"}


def _content_text(parts: Sequence[object], index: int) -> str:
    texts: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, Mapping):
            raise TemplateError(f"messages[{index}].content: a content part must be an object")
        kind = part.get("type", "text")
        key = _TEXT_PART_KEYS.get(kind)
        if key is None:
            raise TemplateError(
                f"messages[{index}].content: content part type {kind!r} is not supported"
            )
        text = part.get(key)
        if not isinstance(text, str):
            raise TemplateError(f"messages[{index}].content: {kind!r} part needs a string {key!r}")
        texts.append(text)
    return "".join(texts)


def _is_image(part: object) -> bool:
    return isinstance(part, Mapping) and part.get("type") == "image"


def _content_parts(parts: Sequence[object], index: int) -> list[dict[str, object]]:
    """Parts for a template that renders images itself: ``{"type": "image"}`` for each image,
    ``{"type": "text", "text": ...}`` for each text part."""
    return [
        {"type": "image"}
        if _is_image(part)
        else {"type": "text", "text": _content_text([part], index)}
        for part in parts
    ]


def _arguments(value: object, mode: ToolCallArguments) -> Any:
    if mode == "object" and isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, dict) else value
    if mode == "string" and not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return value


def _tool_calls(calls: Sequence[object], mode: ToolCallArguments) -> list[object]:
    out: list[object] = []
    for call in calls:
        if isinstance(call, Mapping) and isinstance(call.get("function"), Mapping):
            function = dict(call["function"])
            if "arguments" in function:
                function["arguments"] = _arguments(function["arguments"], mode)
            call = {**call, "function": function}
        out.append(call)
    return out


def normalize_messages(
    messages: Sequence[Mapping[str, object]],
    tool_call_arguments: ToolCallArguments = "as_is",
    *,
    image_parts: bool = False,
    tool_call_ids: ToolCallIds = "as_is",
) -> list[dict[str, object]]:
    """Copies of ``messages`` in the shape chat templates expect (inputs are not modified).

    * ``content`` given as a list of parts (``[{"type": "text", "text": ...}]``) becomes the
      parts' text joined with ``""``; ``None`` stays ``None``; other part types are refused.
      With ``image_parts`` (a template that renders images itself), a list holding
      ``{"type": "image"}`` parts stays a list: image parts and text parts, in order.
    * ``tool_calls`` that is ``None`` or empty is dropped (templates test ``'tool_calls' in
      message``); otherwise each call's ``function.arguments`` is converted per
      ``tool_call_arguments``.
    * With ``tool_call_ids`` ``"alnum9"``, tool-call ids that are not 9 ASCII letters and
      digits are mapped to ones that are, consistently (``neutrino.text.tool_call_ids``).
    """
    out: list[dict[str, object]] = []
    for index, message in enumerate(messages):
        if (
            type(message) is dict
            and type(message.get("content")) is str
            and "tool_calls" not in message
        ):
            out.append(message)  # already in shape; templates only read it
            continue
        if not isinstance(message, Mapping):
            raise TemplateError(f"messages[{index}] must be an object")
        msg = dict(message)
        content = msg.get("content")
        if isinstance(content, list | tuple):
            if image_parts and any(_is_image(part) for part in content):
                msg["content"] = _content_parts(content, index)
            else:
                msg["content"] = _content_text(content, index)
        if "tool_calls" in msg:
            calls = msg["tool_calls"]
            if not calls:
                del msg["tool_calls"]
            elif isinstance(calls, list | tuple):
                msg["tool_calls"] = _tool_calls(calls, tool_call_arguments)
        out.append(msg)
    return fit_alnum9(out) if tool_call_ids == "alnum9" else out
