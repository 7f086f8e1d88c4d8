"""The Responses API's input items -> chat messages (sans-IO).

A Responses conversation is a list of items: messages (user, system, developer and
assistant, with string content or typed parts), the model's function calls and their
outputs, and reasoning. The pipeline takes chat messages, so items become the chat
messages an OpenAI chat client would have sent for the same conversation:

- a message keeps its role; ``input_text`` / ``output_text`` parts become text parts (an
  assistant's become one string), ``input_image`` parts with an ``image_url`` become
  ``image_url`` parts (decoded and bounded as chat's are);
- ``function_call`` items become the ``tool_calls`` of an assistant message (joined to
  the assistant message just before them, if any), ``function_call_output`` items
  become ``tool`` messages;
- a ``reasoning`` item's text becomes the ``reasoning_content`` of the assistant message
  that follows it (templates that render earlier reasoning read it there; the others
  drop it); one that no assistant message follows is dropped, as is an encrypted one.

Each message remembers the item it came from, so an error found later in a message
names the client's own ``input[i]``.
"""

from __future__ import annotations

from typing import Any

from neutrino.errors import bad_request, unsupported

MAX_INPUT_ITEMS = 4096
MAX_PARTS = 1024  # content parts of one message
_ROLES = ("user", "system", "developer", "assistant")
_TEXT_PARTS = ("input_text", "output_text", "text")


def _text(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise bad_request(f"{where} must be a string", where)
    return v


def input_items(v: Any) -> list[Any]:
    """``input`` as a list of items (a string is one user message)."""
    if isinstance(v, str):
        return [{"type": "message", "role": "user", "content": v}]
    if not isinstance(v, list) or not v:
        raise bad_request("input must be a string or a non-empty array of items", "input")
    if len(v) > MAX_INPUT_ITEMS:
        raise bad_request(f"input accepts at most {MAX_INPUT_ITEMS} items", "input")
    return v


class Conversation:
    """Chat messages built from items, in order, with the item each one came from."""

    __slots__ = ("_call_names", "_reasoning", "messages", "origins")

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.origins: list[str] = []  # per message: "input[i]" (or what else it came from)
        self._reasoning: str | None = None  # for the next assistant message
        self._call_names: dict[str, str] = {}  # call_id -> function name

    def add(self, item: Any, where: str) -> None:
        if not isinstance(item, dict):
            raise bad_request(f"{where} must be an object", where)
        kind = item.get("type", "message")
        if kind == "message":
            self._message(item, where)
        elif kind == "function_call":
            self._call(item, where)
        elif kind == "function_call_output":
            self._output(item, where)
        elif kind == "reasoning":
            self._reasoning = reasoning_text(item, where) or None
        elif isinstance(kind, str):
            raise unsupported(f"input items of type {kind[:64]!r} are not supported", where)
        else:
            raise bad_request(f"{where}.type must be a string", f"{where}.type")

    def _append(self, msg: dict[str, Any], where: str) -> None:
        if msg["role"] == "assistant" and self._reasoning is not None:
            msg["reasoning_content"] = self._reasoning
        self._reasoning = None
        self.messages.append(msg)
        self.origins.append(where)

    def _message(self, item: dict[str, Any], where: str) -> None:
        role = item.get("role")
        if role not in _ROLES:
            raise bad_request(f"{where}.role must be one of {list(_ROLES)}", f"{where}.role")
        content = item.get("content")
        if isinstance(content, str):
            self._append({"role": role, "content": content}, where)
            return
        if not isinstance(content, list):
            raise bad_request(
                f"{where}.content must be a string or an array of parts", f"{where}.content"
            )
        if len(content) > MAX_PARTS:
            raise bad_request(
                f"{where}.content has more than {MAX_PARTS} parts", f"{where}.content"
            )
        parts = [_part(p, f"{where}.content[{j}]", role) for j, p in enumerate(content)]
        if role == "assistant":  # templates take an assistant's content as a string
            text = "".join(p["text"] for p in parts)
            self._append({"role": role, "content": text}, where)
        else:
            self._append({"role": role, "content": parts}, where)

    def _call(self, item: dict[str, Any], where: str) -> None:
        call_id = _text(item.get("call_id"), f"{where}.call_id")
        name = _text(item.get("name"), f"{where}.name")
        arguments = _text(item.get("arguments"), f"{where}.arguments")
        if not name:
            raise bad_request(f"{where}.name must not be empty", f"{where}.name")
        self._call_names[call_id] = name
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "assistant" and self._reasoning is None:
            last.setdefault("tool_calls", []).append(call)
            if not last["content"]:
                last["content"] = None
            return
        self._append({"role": "assistant", "content": None, "tool_calls": [call]}, where)

    def _output(self, item: dict[str, Any], where: str) -> None:
        call_id = _text(item.get("call_id"), f"{where}.call_id")
        output = item.get("output")
        if isinstance(output, list):  # parts: their text, in order
            if len(output) > MAX_PARTS:
                raise bad_request(f"{where}.output has more than {MAX_PARTS} parts", where)
            texts = []
            for j, part in enumerate(output):
                at = f"{where}.output[{j}]"
                if not isinstance(part, dict) or part.get("type") != "input_text":
                    raise unsupported(f"{at}: only input_text parts are supported here", at)
                texts.append(_text(part.get("text"), f"{at}.text"))
            output = "".join(texts)
        msg: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": call_id,
            "content": _text(output, f"{where}.output"),
        }
        name = self._call_names.get(call_id)
        if name is not None:
            msg["name"] = name
        self._append(msg, where)


def _part(part: Any, where: str, role: str) -> dict[str, Any]:
    """One content part as chat's: text, or (not from the assistant) an image URL."""
    kind = part.get("type") if isinstance(part, dict) else None
    if not isinstance(kind, str):
        raise bad_request(f"{where} must be an object with a type", where)
    if kind in _TEXT_PARTS:
        return {"type": "text", "text": _text(part.get("text"), f"{where}.text")}
    if kind == "refusal" and role == "assistant":
        return {"type": "text", "text": _text(part.get("refusal"), f"{where}.refusal")}
    if kind == "input_image" and role != "assistant":
        url = part.get("image_url")
        if part.get("file_id") is not None and url is None:
            raise unsupported("images by file_id are not supported; send image_url", where)
        return {"type": "image_url", "image_url": {"url": _text(url, f"{where}.image_url")}}
    raise unsupported(f"content parts of type {kind[:64]!r} are not supported here", where)


def reasoning_text(item: dict[str, Any], where: str) -> str:
    """A reasoning item's text: its ``reasoning_text`` content, else its summary."""
    for key, part_type in (("content", "reasoning_text"), ("summary", "summary_text")):
        parts = item.get(key)
        if parts is None:
            continue
        if not isinstance(parts, list) or len(parts) > MAX_PARTS:
            raise bad_request(f"{where}.{key} must be an array of parts", f"{where}.{key}")
        texts = []
        for j, part in enumerate(parts):
            at = f"{where}.{key}[{j}]"
            if not isinstance(part, dict) or part.get("type") != part_type:
                raise bad_request(f"{at} must be a {part_type} part", at)
            texts.append(_text(part.get("text"), f"{at}.text"))
        if texts:
            return "".join(texts)
    return ""
