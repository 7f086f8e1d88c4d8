"""Output types, parser base classes and the scanning helpers the parsers share.

Every parser is sans-IO and incremental: ``feed`` takes the next chunk of detokenized model
output and returns what that chunk made final, ``finish`` flushes at end of stream. A parser
only holds back text it cannot classify yet (a suffix that may be the start of a marker, an
unfinished tool call), and it makes each decision only once the text decides it, so the merged
output never depends on how the text was chunked: feeding the whole text at once and calling
``finish`` (the non-streamed path) gives the same result as any split into chunks.

The work per chunk is proportional to the chunk (plus the held-back tail): parsers keep the
unconsumed text small, collect the body of a tool call in a list of pieces, and scan JSON with
a resumable bracket scanner instead of re-parsing the text seen so far.
"""

from __future__ import annotations

import abc
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from neutrino.text.parsers.arguments import Schemas


__all__ = [
    "Call",
    "CallIds",
    "Delta",
    "JsonScanner",
    "ReasoningParser",
    "TextSegments",
    "ToolCall",
    "ToolCallDelta",
    "ToolParser",
    "call_from_object",
    "dump_arguments",
    "find_first",
    "load_call_list",
    "load_json",
    "load_object",
    "partial_len",
    "tool_names",
]


# How a parser names its calls: a prefix (call ``i`` is ``f"{prefix}{i}"``) or a function
# from the call's index to its id (for families that accept only some ids).
CallIds = str | Callable[[int], str]

# A parsed call: ``(name, arguments)``.
Call = tuple[str, dict[str, object]]


@dataclass(slots=True)
class ToolCallDelta:
    """An OpenAI streaming tool-call delta.

    The first delta of a call carries ``id`` and ``name``; later ones (if any) carry argument
    fragments. The parsers here emit each call as one delta with the complete arguments.
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(slots=True)
class ToolCall:
    """A complete tool call; ``arguments`` is a JSON object serialized as a string."""

    id: str
    name: str
    arguments: str


@dataclass(slots=True)
class Delta:
    """What one ``feed``/``finish`` made final."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallDelta] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.content or self.reasoning or self.tool_calls)


class ReasoningParser(abc.ABC):
    """Splits raw model output into reasoning and content; one instance per response."""

    __slots__ = ("starts_in_reasoning",)

    def __init__(self, *, starts_in_reasoning: bool = False) -> None:
        #: True when the chat template already opened the reasoning block in the prompt.
        self.starts_in_reasoning = starts_in_reasoning

    @classmethod
    def opening(cls) -> str | None:
        """The marker a prompt ends with when its template opened the reasoning block
        (None: the format has no such opening)."""
        return None

    @abc.abstractmethod
    def feed(self, text: str) -> Delta:
        """Reasoning and/or content made final by this chunk."""

    @abc.abstractmethod
    def finish(self) -> Delta:
        """Flush everything still held at end of stream."""


class ToolParser(abc.ABC):
    """Splits the content stream into plain content and tool calls; one instance per response.

    Call ``i`` (0-based, in order of appearance) gets the id ``f"{id_prefix}{i}"``, or
    ``id_prefix(i)`` when it is a function, so a streamed and a non-streamed parse of the
    same text agree.
    """

    __slots__ = ("_calls", "_id_prefix", "_known_names", "_schemas", "_tools")

    def __init__(
        self, *, tools: Sequence[Mapping[str, object]] | None = None, id_prefix: CallIds = "call_"
    ) -> None:
        self._known_names = tool_names(tools)
        self._id_prefix = id_prefix
        self._calls: list[ToolCall] = []
        self._tools = tools
        self._schemas: dict[str, Mapping[str, object]] | None = None

    @property
    def schemas(self) -> Schemas:
        """Each offered function's parameter properties, by name (read at its first use:
        for the formats whose values are typed by the schema)."""
        found = self._schemas
        if found is None:
            # Imported here: importing the package loads only base and registry.
            from neutrino.text.parsers.arguments import parameter_schemas

            found = self._schemas = parameter_schemas(self._tools)
        return found

    @abc.abstractmethod
    def feed(self, text: str) -> Delta:
        """Content that is definitely not part of a tool call, and the calls completed so far."""

    @abc.abstractmethod
    def finish(self) -> Delta:
        """Flush at end of stream: an unfinished call is parsed if complete, else content."""

    @property
    def calls(self) -> list[ToolCall]:
        """All complete calls so far, in order."""
        return list(self._calls)

    def _name_allowed(self, name: str) -> bool:
        """Whether ``name`` is one of the request's tools (always true when none were given)."""
        return self._known_names is None or name in self._known_names

    def _add_call(self, out: Delta, name: str, arguments: Mapping[str, object]) -> None:
        index = len(self._calls)
        ids = self._id_prefix
        call_id = f"{ids}{index}" if isinstance(ids, str) else ids(index)
        call = ToolCall(id=call_id, name=name, arguments=dump_arguments(arguments))
        self._calls.append(call)
        out.tool_calls.append(
            ToolCallDelta(index=index, id=call.id, name=name, arguments=call.arguments)
        )


# --------------------------------------------------------------------------- helpers


def tool_names(tools: Sequence[Mapping[str, object]] | None) -> frozenset[str] | None:
    """Function names of OpenAI ``tools`` (``{"type": "function", "function": {"name": …}}``).

    ``None`` when no tools were given, meaning "do not validate names".
    """
    if not tools:
        return None
    names: set[str] = set()
    for tool in tools:
        fn = tool.get("function", tool)
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if isinstance(name, str):
            names.add(name)
    return frozenset(names)


def dump_arguments(arguments: Mapping[str, object]) -> str:
    """The canonical serialization of a call's arguments.

    Non-ASCII text stays as it is, except that a lone surrogate (a model can write
    ``"\\ud800"`` in JSON) keeps its escape: such a string has no UTF-8 form.
    """
    text = json.dumps(arguments, ensure_ascii=False)
    try:
        text.encode()
    except UnicodeEncodeError:
        return json.dumps(arguments)
    return text


def _reject_constant(name: str) -> object:
    raise ValueError(f"non-JSON constant {name}")


def load_json(text: str) -> tuple[bool, object]:
    """``(True, value)`` for valid JSON (NaN/Infinity rejected), else ``(False, None)``."""
    try:
        return True, json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return False, None


def load_object(text: str) -> dict[str, object] | None:
    """``text`` parsed as a JSON object (NaN/Infinity rejected), else ``None``."""
    value = load_json(text)[1]
    return value if isinstance(value, dict) else None


def call_from_object(
    obj: object,
    args_keys: tuple[str, ...] = ("arguments", "parameters"),
    *,
    require_args: bool = False,
) -> Call | None:
    """``(name, arguments)`` from a ``{"name": …, "arguments": {…}}`` object, else ``None``.

    Missing arguments mean ``{}`` (or no call, with ``require_args``); arguments given as a
    string holding a JSON object (a double-encoded call) are decoded; anything else is not a
    call.
    """
    if not isinstance(obj, dict):
        return None
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None
    for key in args_keys:
        if key in obj:
            args = obj[key]
            break
    else:
        return None if require_args else (name, {})
    if isinstance(args, str):
        args = load_object(args) if args.strip() else {}
    if not isinstance(args, dict) or not _finite(args):
        return None
    return name, args


def load_call_list(text: str) -> list[Call] | None:
    """The calls of ``text``, a JSON array of call objects (see :func:`call_from_object`) or
    one such object.

    ``None`` when ``text`` is not such a value or an element is not a call; an empty array
    gives ``[]``.
    """
    ok, value = load_json(text)
    if not ok:
        return None
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return None
    calls: list[Call] = []
    for item in value:
        call = call_from_object(item)
        if call is None:
            return None
        calls.append(call)
    return calls


def _finite(value: object) -> bool:
    """False if a float inside ``value`` is NaN or infinite (not representable in JSON)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float):
            if not math.isfinite(v):
                return False
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return True


def partial_len(buf: str, start: int, markers: Iterable[str]) -> int:
    """Length of the longest suffix of ``buf[start:]`` that is a proper prefix of a marker."""
    n = len(buf)
    best = 0
    for marker in markers:
        lo = max(start, n - len(marker) + 1)
        first = marker[0]
        i = buf.find(first, lo)
        while i != -1 and n - i > best:
            if marker.startswith(buf[i:]):
                best = n - i
                break
            i = buf.find(first, i + 1)
    return best


def find_first(buf: str, markers: Sequence[str], start: int = 0) -> tuple[int, str | None]:
    """The earliest complete marker in ``buf[start:]`` as ``(index, marker)``.

    When there is none: ``(safe_end, None)``, where ``buf[start:safe_end]`` cannot be part of
    a marker (only a suffix that may begin one is left out).
    """
    for marker in markers:  # fast path: no marker can even start in buf
        if marker[0] in buf:
            break
    else:
        return len(buf), None
    best = -1
    found: str | None = None
    for marker in markers:
        i = buf.find(marker, start)
        if i != -1 and (best == -1 or i < best):
            best, found = i, marker
    if found is not None:
        return best, found
    return len(buf) - partial_len(buf, start, markers), None


_STRUCT: Final = re.compile(r'[{}\[\]"]')
_IN_STRING: Final = re.compile(r'["\\]')


class JsonScanner:
    """Finds where one JSON object or array ends, resumably, in linear time.

    It tracks bracket depth outside strings, so it needs no re-scan as text arrives; the text
    it delimits is then parsed once with :func:`json.loads`. It does not validate JSON.
    """

    __slots__ = ("_depth", "_escape", "_in_string")

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        self._escape = False

    def scan(self, text: str, pos: int = 0) -> int:
        """Consume ``text[pos:]``; the index just past the closing bracket, or -1 if not yet.

        The first structural character seen must be the opening ``{``/``[``.
        """
        n = len(text)
        while pos < n:
            if self._in_string:
                if self._escape:
                    self._escape = False
                    pos += 1
                    continue
                m = _IN_STRING.search(text, pos)
                if m is None:
                    return -1
                pos = m.end()
                if m.group() == "\\":
                    self._escape = True
                else:
                    self._in_string = False
                continue
            m = _STRUCT.search(text, pos)
            if m is None:
                return -1
            pos = m.end()
            ch = m.group()
            if ch == '"':
                self._in_string = True
            elif ch in "{[":
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth <= 0:
                    return pos
        return -1


class TextSegments:
    """Plain content around tool calls.

    Content is the text before the first tool call, verbatim, except that a whitespace-only
    run directly before a call is dropped. Once a call has been made, no more text is
    content: text after the calls, and between them, is dropped, streamed and not (vLLM's and
    SGLang's non-streamed parsers both answer with the text before the first call; see the
    README's parser section). A run that is still whitespace-only is held until it is
    decided; the held text is returned by :meth:`open_block` so that a block that turns out
    to be malformed can emit it again.
    """

    __slots__ = ("_after_block", "_called", "_has_text", "_pending")

    def __init__(self) -> None:
        self._pending = ""
        self._has_text = False
        self._after_block = False
        self._called = False

    @property
    def called(self) -> bool:
        """Whether a call has been made (no more text is content)."""
        return self._called

    def text(self, out: Delta, s: str) -> None:
        if not s or self._called:
            return
        if self._has_text:
            out.content += s
        elif s.isspace():
            self._pending += s
        else:
            out.content += self._pending + s
            self._pending = ""
            self._has_text = True

    def until(self, out: Delta, buf: str, marker: str) -> tuple[str, bool]:
        """Emit the content of ``buf`` before ``marker``.

        Returns ``(rest, found)``: the text after the marker when it was found, else the
        suffix that may still begin one (to be kept for the next chunk).
        """
        rest, found = self.until_first(out, buf, (marker,))
        return rest, found is not None

    def until_first(self, out: Delta, buf: str, markers: Sequence[str]) -> tuple[str, str | None]:
        """Emit the content of ``buf`` before the earliest of ``markers``.

        Returns ``(rest, marker)``: the text after the marker found, or, with ``None``, the
        suffix that may still begin one (to be kept for the next chunk).
        """
        at, found = find_first(buf, markers)
        self.text(out, buf[:at])
        if found is None:
            return buf[at:], None
        return buf[at + len(found) :], found

    def open_block(self) -> str:
        """A (possible) call starts: the whitespace-only run before it, taken out of the output."""
        held = "" if self._has_text else self._pending
        self._pending = ""
        self._has_text = False
        return held

    def block_done(self, called: bool = False) -> None:
        """A block (of ``called``: one or more calls) ended: whitespace right after it is
        dropped, and after a call, all text."""
        self._pending = ""
        self._has_text = False
        self._after_block = True
        self._called = self._called or called

    def block_failed(self, out: Delta, held: str, raw: str) -> None:
        """The block was not a call: it is content (after a call: dropped), with the
        whitespace held before it."""
        if self._called:
            return
        out.content += held + raw
        self._pending = ""
        self._has_text = True
        self._after_block = False

    def finish(self, out: Delta) -> None:
        if not self._has_text and not self._after_block and not self._called:
            out.content += self._pending
        self._pending = ""
