"""A request's parameters named as its client sent them (sans-IO).

The Anthropic, Responses and gRPC front ends translate a request into the OpenAI chat
body it means and check that with :func:`~neutrino.frontends.http.parse.parse_chat`; an
error from there names the chat body's parameters (``messages[3].content[1]``,
``max_completion_tokens``, ``response_format.json_schema.schema``). A :class:`Renames`
says how the client's own request names them, and :func:`renamed` rewrites the error:

* a message path ``messages[k]`` becomes the path of what chat message ``k`` came from
  (``Origin.path``), and its ``.content[p]`` that of the client's part (``Origin.parts``
  maps the indexes, when the translation moved parts);
* otherwise the longest ``fields`` key that begins the path (a whole name: up to a ``.``,
  a ``[`` or the end) is replaced by its value;
* in what follows a renamed head, ``inner`` replaces chat's inner names in order (keys
  carry their delimiters: ``(".content[", ".parts[")``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from neutrino.errors import NeutrinoError

_MESSAGE = re.compile(r"messages\[(\d+)\]")
_PART = re.compile(r"\.content\[(\d+)\]")
# A path as a message names it: a name, then ``.name`` and ``[n]`` steps.
_PATH = re.compile(r"(?<![\w.\[])[A-Za-z_]\w*(?:\[\d+\]|\.[A-Za-z_]\w*)*")


@dataclass(frozen=True, slots=True)
class Origin:
    """Where one message of the chat body came from in the client's request."""

    path: str  # the message's path there: "messages[2]", "input[0]", "system"
    parts: Sequence[int] | None = None  # the client's index of each content part (None: same)
    parts_at: str = ".content"  # what the parts' indexes follow: "system[0]" has ""

    def part(self, p: int) -> str:
        """The path of the message's content part ``p`` (chat's index)."""
        parts = self.parts
        j = parts[p] if parts is not None and p < len(parts) else p
        return f"{self.path}{self.parts_at}[{j}]"


@dataclass(frozen=True, slots=True)
class Renames:
    """How a client's request names what its chat body names."""

    messages: Sequence[Origin] = ()  # chat message k came from messages[k]
    fields: Mapping[str, str] = field(default_factory=dict)  # chat's leading path -> the client's
    inner: Sequence[tuple[str, str]] = ()  # after a renamed head: chat's names -> the client's


def rename_path(path: str, renames: Renames) -> str:
    """``path`` (a chat body's parameter) as the client's request names it; itself when
    the renames do not name it."""
    head, rest = _message_head(path, renames.messages)
    if head is None:
        head, rest = _field_head(path, renames.fields)
        if head is None:
            return path
    for old, new in renames.inner:
        rest = rest.replace(old, new)
    return head + rest


def _message_head(path: str, origins: Sequence[Origin]) -> tuple[str | None, str]:
    m = _MESSAGE.match(path)
    if m is None or int(m.group(1)) >= len(origins):
        return None, path
    origin = origins[int(m.group(1))]
    rest = path[m.end() :]
    part = _PART.match(rest)
    if part is None:
        return origin.path, rest
    return origin.part(int(part.group(1))), rest[part.end() :]


def _field_head(path: str, fields: Mapping[str, str]) -> tuple[str | None, str]:
    best = ""
    for key in fields:
        if len(key) > len(best) and path.startswith(key) and path[len(key) : len(key) + 1] in ".[":
            best = key
    if not best:
        return None, path
    return fields[best], path[len(best) :]


def renamed(
    err: NeutrinoError, renames: Renames, *, in_message: bool = False, name_param: bool = False
) -> NeutrinoError:
    """``err`` with its ``param`` as the client's request names it. ``in_message``: the
    paths its message names are renamed too; ``name_param``: a message that does not
    name the parameter is prefixed with it (for an error object without a ``param``).
    ``err`` itself when nothing changes."""
    param = None if err.param is None else rename_path(err.param, renames)
    message = err.message
    if in_message:
        message = _PATH.sub(lambda m: rename_path(m.group(0), renames), message)
    if name_param and param is not None and param not in message:
        message = f"{param}: {message}"
    if param == err.param and message == err.message:
        return err
    return NeutrinoError(err.kind, message, param=param, code=err.code)
