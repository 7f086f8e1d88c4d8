"""A chat's typed parts: messages, their content parts and earlier tool calls, the tools
offered and the choice among them (frozen, protocol-neutral).

Front ends translate their protocol's turns into these; the prompt builder turns them into
what chat templates read (:func:`template_messages`, :func:`template_tools`: the Hugging
Face convention, which is OpenAI's shape). Keys a client sent beside the ones the API
defines (``name``, ``tool_call_id``, ``reasoning_content``...) ride along in ``extra``,
verbatim, for templates that read them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import msgspec

from neutrino.config import LimitsConfig
from neutrino.pipeline.fields import Loc, invalid, path
from neutrino.pipeline.images import MAX_IMAGES

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]
# A role as a client sends it -> the typed role (a lookup that also checks it).
ROLE_OF: dict[str, Role] = {
    "system": "system",
    "developer": "developer",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "function",
}
ROLES: frozenset[str] = frozenset(ROLE_OF)


class TextPart(msgspec.Struct, frozen=True, gc=False):
    text: str


class ImagePart(msgspec.Struct, frozen=True, gc=False):
    """An image, by its place among the request's images (``GenerateRequest.images``)."""

    index: int


Part = TextPart | ImagePart


class FunctionCall(msgspec.Struct, frozen=True, gc=False):
    """A tool call an earlier assistant turn made."""

    name: str
    arguments: str | Mapping[str, object] = ""  # JSON text (some clients send an object)
    id: str | None = None
    extra: Mapping[str, object] = {}  # the call's other keys, verbatim


class Message(msgspec.Struct, frozen=True, gc=False):
    role: Role
    content: str | tuple[Part, ...] | None
    tool_calls: tuple[FunctionCall, ...] = ()
    extra: Mapping[str, object] = {}  # the message's other keys, verbatim, for templates


class Tool(msgspec.Struct, frozen=True, gc=False):
    """A function the model may call; ``parameters`` is its JSON schema."""

    name: str
    description: str | None = None
    parameters: Mapping[str, object] | None = None
    extra: Mapping[str, object] = {}  # the function's other keys (``strict``...), verbatim


class ToolChoice(msgspec.Struct, frozen=True, gc=False):
    """``tool_choice``: the model may call tools (auto), must not (none), must call one
    (required), or must call the one ``name``d (named)."""

    mode: Literal["auto", "none", "required", "named"] = "auto"
    name: str | None = None

    @property
    def forced(self) -> bool:
        """Whether the engine decodes under a schema of the call(s) it must make."""
        return self.mode in ("required", "named")


AUTO_TOOLS = ToolChoice()


def _call_view(call: FunctionCall) -> dict[str, object]:
    view: dict[str, object] = {
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
        **call.extra,
    }
    if call.id is not None:
        view["id"] = call.id
    return view


def _content_view(
    content: tuple[Part, ...], image: Mapping[str, object]
) -> list[dict[str, object]]:
    return [
        {"type": "text", "text": p.text} if isinstance(p, TextPart) else dict(image)
        for p in content
    ]


def template_messages(
    messages: Sequence[Message], image: Mapping[str, object]
) -> list[dict[str, object]]:
    """The messages as chat templates read them; each image part becomes ``image`` (the
    family's own image part, or a text part holding its placeholder)."""
    out: list[dict[str, object]] = []
    for m in messages:
        content = m.content
        if not m.extra and not m.tool_calls and content.__class__ is str:
            out.append({"role": m.role, "content": content})  # the common turn
            continue
        view: dict[str, object] = {
            **m.extra,
            "role": m.role,
            "content": content if not isinstance(content, tuple) else _content_view(content, image),
        }
        if m.tool_calls:
            view["tool_calls"] = [_call_view(c) for c in m.tool_calls]
        out.append(view)
    return out


# The offered tools as chat templates and tool parsers read them (None: none offered).
ToolViews = list[dict[str, object]] | None


def template_tools(tools: Sequence[Tool]) -> ToolViews:
    """The tools as chat templates and tool parsers read them, built once per request."""
    if not tools:
        return None
    out: list[dict[str, object]] = []
    for t in tools:
        fn: dict[str, object] = {**t.extra, "name": t.name}
        if t.description is not None:
            fn["description"] = t.description
        if t.parameters is not None:
            fn["parameters"] = t.parameters
        out.append({"type": "function", "function": fn})
    return out


def verbatim_texts(messages: Sequence[Message]) -> list[str]:
    """The texts a template renders as they are: user, system, developer and tool turns'
    (an assistant's may lose its reasoning)."""
    texts: list[str] = []
    for m in messages:
        if m.role in ("user", "system", "developer", "tool"):
            content = m.content
            if isinstance(content, str):
                texts.append(content)
            elif content:
                texts += [p.text for p in content if isinstance(p, TextPart)]
    return texts


# ----------------------------------------------------------------------------- rules
# What a chat's parts must be, whatever protocol carried them; ``at`` is where the value
# is in the client's request (neutrino.pipeline.fields).

_RESERVED_KWARGS = frozenset(
    {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"}
)


def role(v: object, at: Loc) -> Role:
    found = ROLE_OF.get(v) if isinstance(v, str) else None
    if found is None:
        raise invalid(at, f"{{at}} must be one of {sorted(ROLES)}")
    return found


def message(
    who: Role,
    content: str | tuple[Part, ...] | None,
    calls: tuple[FunctionCall, ...],
    extra: Mapping[str, object],
    at: Loc,
) -> Message:
    """A turn; only an assistant's may have no content (a turn of only tool calls), and a
    legacy function result's (``role: "function"``, which OpenAI's API still takes: its
    ``name`` is required, a null content is an empty result)."""
    if who == "function":
        if not isinstance(extra.get("name"), str):
            raise invalid((*at, "name"), "{at} is required for a function message")
        if content is None:
            content = ""
    if content is None and who != "assistant":
        raise invalid((*at, "content"), "{at} is required")
    return Message(who, content, calls, extra)


def messages_count(n: int, at: Loc, limits: LimitsConfig) -> None:
    if n == 0:
        raise invalid(at, "{at} must be a non-empty array")
    if n > limits.max_messages:
        raise invalid(at, f"{{at}} has {n} entries; at most {limits.max_messages} are allowed")


def tools_count(n: int, at: Loc, limits: LimitsConfig) -> None:
    if n > limits.max_tools:
        raise invalid(at, f"{{at}} has {n} entries; at most {limits.max_tools} are allowed")


def images_count(n: int, at: Loc) -> None:
    """Called before an image is added: ``n`` images are already in."""
    if n >= MAX_IMAGES:
        raise invalid(at, f"at most {MAX_IMAGES} images per request")


def template_kwargs(v: object, at: Loc) -> dict[str, object]:
    """Template variables a client sets (``chat_template_kwargs``): never the ones the
    prompt builder sets itself."""
    if not isinstance(v, dict):
        raise invalid(at, "{at} must be an object")
    bad = _RESERVED_KWARGS & v.keys()
    if bad:
        raise invalid(at, f"{{at}} may not set {sorted(bad)[0]}")
    return dict(v)


def tool_choice(choice: ToolChoice, tools: Sequence[Tool], at: Loc, tools_at: Loc) -> ToolChoice:
    """``choice`` checked against the tools offered."""
    if choice.mode == "named" and choice.name not in {t.name for t in tools}:
        raise invalid(at, f"{{at}} names {choice.name!r}, which is not in {path(tools_at)}")
    if choice.mode == "required" and not tools:
        raise invalid(at, f"{{at}} 'required' needs {path(tools_at)}")
    return choice


# OpenAI's values (the ReasoningEffort schema of its API), each handed to the template as
# it came: what a template makes of one it does not know is the template's.
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


def reasoning_effort(v: object, at: Loc) -> str:
    """How hard a reasoning model thinks: the templates' ``reasoning_effort``."""
    if v not in REASONING_EFFORTS:
        raise invalid(at, "{at} must be one of " + ", ".join(f"'{e}'" for e in REASONING_EFFORTS))
    assert isinstance(v, str)
    return v
