"""The Responses API's input items -> the pipeline's typed chat turns (sans-IO).

A Responses conversation is a list of items: messages (user, system, developer and
assistant, with string content or typed parts), the model's function calls and their
outputs, and reasoning. They become the turns a chat template renders:

- a message keeps its role; ``input_text`` / ``output_text`` parts become text parts (an
  assistant's become one string), ``input_image`` parts with an ``image_url`` become
  images (decoded and bounded as every protocol's are);
- ``function_call`` items become the ``tool_calls`` of an assistant message (joined to
  the assistant message just before them, if any), ``function_call_output`` items
  become ``tool`` messages;
- a ``reasoning`` item's text becomes the ``reasoning_content`` of the assistant message
  that follows it (templates that render earlier reasoning read it there; the others
  drop it); one that no assistant message follows is dropped, as is an encrypted one.

Every check is made on the item itself, so an error names the client's own
``input[i]``.
"""

from __future__ import annotations

from neutrino.errors import bad_request, parse_path, unsupported
from neutrino.pipeline import chat
from neutrino.pipeline.chat import FunctionCall, ImagePart, Message, Part, TextPart
from neutrino.pipeline.draft import Draft
from neutrino.pipeline.images import decode_image_url

MAX_INPUT_ITEMS = 4096
MAX_PARTS = 1024  # content parts of one message
_ROLES = ("user", "system", "developer", "assistant")
_TEXT_PARTS = ("input_text", "output_text", "text")


def _text(v: object, where: str) -> str:
    if not isinstance(v, str):
        raise bad_request(f"{where} must be a string", where)
    return v


def input_items(v: object) -> list[object]:
    """``input`` as a list of items (a string is one user message)."""
    if isinstance(v, str):
        return [{"type": "message", "role": "user", "content": v}]
    if not isinstance(v, list) or not v:
        raise bad_request("input must be a string or a non-empty array of items", "input")
    if len(v) > MAX_INPUT_ITEMS:
        raise bad_request(f"input accepts at most {MAX_INPUT_ITEMS} items", "input")
    return v


class _Turn:
    """A turn being built (a function call may still join an assistant's)."""

    __slots__ = ("calls", "content", "extra", "role", "where")

    def __init__(self, role: str, content: str | tuple[Part, ...] | None, where: str) -> None:
        self.role = role
        self.content = content
        self.where = where
        self.calls: list[FunctionCall] = []
        self.extra: dict[str, object] = {}


class Conversation:
    """Typed chat turns built from items, in order; images go to the draft."""

    __slots__ = ("_call_names", "_draft", "_reasoning", "_turns")

    def __init__(self, draft: Draft) -> None:
        self._draft = draft
        self._turns: list[_Turn] = []
        self._reasoning: str | None = None  # for the next assistant message
        self._call_names: dict[str, str] = {}  # call_id -> function name

    def messages(self, instructions: str | None) -> tuple[Message, ...]:
        """The turns (``instructions`` first, as a system turn)."""
        out = [Message("system", instructions)] if instructions is not None else []
        for t in self._turns:
            role = chat.role(t.role, (t.where, "role"))
            out.append(Message(role, t.content, tuple(t.calls), t.extra))
        return tuple(out)

    def add(self, item: object, where: str) -> None:
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

    def _append(self, turn: _Turn) -> None:
        if turn.role == "assistant" and self._reasoning is not None:
            turn.extra["reasoning_content"] = self._reasoning
        self._reasoning = None
        self._turns.append(turn)

    def _message(self, item: dict[str, object], where: str) -> None:
        role = item.get("role")
        if role not in _ROLES:
            raise bad_request(f"{where}.role must be one of {list(_ROLES)}", f"{where}.role")
        content = item.get("content")
        if isinstance(content, str):
            self._append(_Turn(role, content, where))
            return
        if not isinstance(content, list):
            raise bad_request(
                f"{where}.content must be a string or an array of parts", f"{where}.content"
            )
        if len(content) > MAX_PARTS:
            raise bad_request(
                f"{where}.content has more than {MAX_PARTS} parts", f"{where}.content"
            )
        parts = [self._part(p, f"{where}.content[{j}]", role) for j, p in enumerate(content)]
        if role == "assistant":  # templates take an assistant's content as a string
            text = "".join(p.text for p in parts if isinstance(p, TextPart))
            self._append(_Turn(role, text, where))
        else:
            self._append(_Turn(role, tuple(parts), where))

    def _part(self, part: object, where: str, role: str) -> Part:
        """One content part: text, or (not from the assistant) an image by its URL."""
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise bad_request(f"{where} must be an object with a type", where)
        kind: str = part["type"]
        if kind in _TEXT_PARTS:
            return TextPart(_text(part.get("text"), f"{where}.text"))
        if kind == "refusal" and role == "assistant":
            return TextPart(_text(part.get("refusal"), f"{where}.refusal"))
        if kind == "input_image" and role != "assistant":
            url = part.get("image_url")
            if part.get("file_id") is not None and url is None:
                raise unsupported("images by file_id are not supported; send image_url", where)
            url = _text(url, f"{where}.image_url")
            d = self._draft
            chat.images_count(len(d.images), parse_path(where))
            return ImagePart(d.add_image(decode_image_url(url, parse_path(where))))
        raise unsupported(f"content parts of type {kind[:64]!r} are not supported here", where)

    def _call(self, item: dict[str, object], where: str) -> None:
        call_id = _text(item.get("call_id"), f"{where}.call_id")
        name = _text(item.get("name"), f"{where}.name")
        arguments = _text(item.get("arguments"), f"{where}.arguments")
        if not name:
            raise bad_request(f"{where}.name must not be empty", f"{where}.name")
        self._call_names[call_id] = name
        call = FunctionCall(name, arguments, call_id)
        last = self._turns[-1] if self._turns else None
        if last is not None and last.role == "assistant" and self._reasoning is None:
            last.calls.append(call)
            if not last.content:
                last.content = None
            return
        turn = _Turn("assistant", None, where)
        turn.calls.append(call)
        self._append(turn)

    def _output(self, item: dict[str, object], where: str) -> None:
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
        turn = _Turn("tool", _text(output, f"{where}.output"), where)
        turn.extra["tool_call_id"] = call_id
        name = self._call_names.get(call_id)
        if name is not None:
            turn.extra["name"] = name
        self._append(turn)


def reasoning_text(item: dict[str, object], where: str) -> str:
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
