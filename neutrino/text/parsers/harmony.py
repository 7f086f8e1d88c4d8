"""``harmony``: gpt-oss output in OpenAI's harmony format, as reasoning, content and tool calls.

Source: "OpenAI harmony response format" (openai-cookbook ``articles/openai-harmony.md``).
A message is ``<|start|>{header}<|message|>{body}<|end|>``; the model may end its last message
with ``<|return|>`` (done) or ``<|call|>`` (tool call) instead of ``<|end|>``. The prompt ends
with ``<|start|>assistant``, so the first message of the output starts at ``<|channel|>``::

    <|channel|>analysis<|message|>chain of thought<|end|>
    <|start|>assistant<|channel|>final<|message|>answer<|return|>

    <|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary
    to=functions.get_weather <|constrain|>json<|message|>{"location":"SF"}<|call|>

The header holds the role, ``<|channel|>NAME`` and optionally a recipient ``to=NAME``, which
"might be defined in the role or channel section of the header", and a content type such as
``<|constrain|>json``.

Classification of a message:

* recipient ``functions.NAME`` (any channel): a call of tool ``NAME``, body = JSON arguments;
* channel ``analysis``, or a recipient that is not a function (the built-in ``browser.*`` and
  ``python`` tools, used inside the chain of thought): reasoning;
* channel ``final``, ``commentary`` without recipient (a preamble meant for the user), or no
  channel: content.

Design choice: the two parsers share one state machine. :class:`HarmonyReasoningParser`
emits reasoning and content and passes each function-call message through to its content
**verbatim** (header, body and terminator), so the ``harmony`` tool parser, which runs on that
content, sees it; :class:`HarmonyToolParser` extracts those messages as tool calls. The tool
parser also accepts raw model output directly (it then reports reasoning too), so either
``reasoning=harmony`` + ``tools=harmony`` or the tool parser alone gives the same calls.

Text outside messages is content, except whitespace-only runs next to a message. Stray
terminators outside a message and an unfinished header at the end of the stream are dropped;
a header longer than 1024 characters, or cut short by another marker, is content verbatim. A
function-call body that is not a JSON object (empty means ``{}``) is content verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from neutrino.text.parsers.base import (
    CallIds,
    Delta,
    ReasoningParser,
    TextSegments,
    ToolParser,
    find_first,
    load_object,
)

__all__ = ["HarmonyReasoningParser", "HarmonyToolParser"]

START: Final = "<|start|>"
CHANNEL: Final = "<|channel|>"
MESSAGE: Final = "<|message|>"
END: Final = "<|end|>"
RETURN: Final = "<|return|>"
CALL: Final = "<|call|>"
CONSTRAIN: Final = "<|constrain|>"
MARKERS: Final = (START, CHANNEL, MESSAGE, END, RETURN, CALL, CONSTRAIN)

_TEXT_MARKERS: Final = MARKERS
_HEADER_MARKERS: Final = (MESSAGE, START, END, RETURN, CALL)
_BODY_MARKERS: Final = (END, RETURN, CALL, START, CHANNEL)
_TERMINATORS: Final = (END, RETURN, CALL)
HEADER_LIMIT: Final = 1024

_TEXT, _HEADER, _BODY = 0, 1, 2
# body kinds
_REASONING, _CONTENT, _CALL_TOOL, _PASS = 0, 1, 2, 3


_CONTENT_TYPE: Final = re.compile(r"<\|constrain\|>\s*[^\s<]*")

AddCall = Callable[[Delta, str, dict[str, object]], None]


def parse_header(opener: str, header: str) -> tuple[str | None, str | None]:
    """``(channel, recipient)`` of a header (the text between the opener and ``<|message|>``)."""
    full = header if opener == START else opener + header
    if CONSTRAIN in full:
        full = _CONTENT_TYPE.sub(" ", full)
    role_part, sep, channel_part = full.partition(CHANNEL)
    recipient: str | None = None
    channel: str | None = None
    for word in role_part.split():
        if word.startswith("to="):
            recipient = word[3:]
    for word in channel_part.split():
        if word.startswith("to="):
            recipient = word[3:]
        elif channel is None and sep:
            channel = word
    return channel, recipient


class _HarmonyMachine:
    """The harmony state machine; ``tool_mode`` selects what function-call messages become."""

    __slots__ = (
        "_buf",
        "_header",
        "_kind",
        "_name",
        "_opener",
        "_parts",
        "_segments",
        "_state",
        "_tool_mode",
        "_ws_before",
        "add_call",
    )

    def __init__(self, *, tool_mode: bool, add_call: AddCall | None = None) -> None:
        self._tool_mode = tool_mode
        self.add_call = add_call
        self._state = _TEXT
        self._buf = ""
        self._segments = TextSegments()
        self._opener = ""
        self._header = ""
        self._kind = _CONTENT
        self._name = ""
        self._parts: list[str] = []
        self._ws_before = ""

    def fed(self, text: str) -> Delta:
        """What ``text`` adds, as a new Delta (the parsers' ``feed``)."""
        out = Delta()
        self.feed(text, out)
        return out

    def finished(self) -> Delta:
        """What the end adds, as a new Delta (the parsers' ``finish``)."""
        out = Delta()
        self.finish(out)
        return out

    def feed(self, text: str, out: Delta) -> None:
        buf = self._buf + text if self._buf else text
        while buf:
            if self._state == _TEXT:
                buf, marker = self._segments.until_first(out, buf, _TEXT_MARKERS)
                if marker is None:
                    break
                if marker in (START, CHANNEL):
                    self._ws_before = self._segments.open_block()
                    self._opener = marker
                    self._state = _HEADER
                elif marker == MESSAGE:  # a body without header: plain content
                    self._ws_before = self._segments.open_block()
                    self._opener, self._header = MESSAGE, ""
                    self._start_body(out, None, None)
                # stray terminators / <|constrain|> outside a message are dropped
            elif self._state == _HEADER:
                window = HEADER_LIMIT + len(MESSAGE)
                at, marker = find_first(buf[:window], _HEADER_MARKERS)
                if marker == MESSAGE:
                    self._header = buf[:at]
                    buf = buf[at + len(MESSAGE) :]
                    self._start_body(out, *parse_header(self._opener, self._header))
                elif marker is not None:  # header cut short by another marker
                    self._segments.block_failed(out, self._ws_before, self._opener + buf[:at])
                    buf = buf[at:]
                    self._state = _TEXT
                elif len(buf) >= window:
                    self._segments.block_failed(
                        out, self._ws_before, self._opener + buf[:HEADER_LIMIT]
                    )
                    buf = buf[HEADER_LIMIT:]
                    self._state = _TEXT
                else:
                    break
            else:
                at, marker = find_first(buf, _BODY_MARKERS)
                self._body_text(out, buf[:at])
                if marker is None:
                    buf = buf[at:]
                    break
                if marker in _TERMINATORS:
                    buf = buf[at + len(marker) :]
                    self._end_body(out, marker)
                else:  # a new message starts: the current one ended without terminator
                    buf = buf[at:]
                    self._end_body(out, "")
        self._buf = buf

    def finish(self, out: Delta) -> None:
        buf, self._buf = self._buf, ""
        if self._state == _TEXT:
            self._segments.text(out, buf)
            self._segments.finish(out)
        elif self._state == _HEADER:  # output cut inside a header: nothing to show
            self._segments.block_done()
            self._segments.finish(out)
        else:
            self._body_text(out, buf)
            self._end_body(out, "")
            self._segments.finish(out)
        self._state = _TEXT

    # ----------------------------------------------------------------- bodies

    def _start_body(self, out: Delta, channel: str | None, recipient: str | None) -> None:
        self._state = _BODY
        if recipient is not None and recipient.startswith("functions."):
            if self._tool_mode:
                self._kind = _CALL_TOOL
                self._name = recipient[len("functions.") :]
                self._parts = []
            else:
                self._kind = _PASS
                out.content += self._ws_before + self._opener + self._header + MESSAGE
        elif recipient is not None or channel == "analysis":
            self._kind = _REASONING
        else:
            self._kind = _CONTENT

    def _body_text(self, out: Delta, s: str) -> None:
        if not s:
            return
        kind = self._kind
        if kind == _REASONING:
            out.reasoning += s
        elif kind == _CALL_TOOL:
            self._parts.append(s)
        else:
            out.content += s

    def _end_body(self, out: Delta, terminator: str) -> None:
        self._state = _TEXT
        if self._kind == _PASS:
            out.content += terminator
        elif self._kind == _CALL_TOOL:
            body = "".join(self._parts)
            self._parts = []
            args = {} if not body.strip() else load_object(body)
            if args is not None and self._name and self.add_call is not None:
                self.add_call(out, self._name, args)
            else:
                raw = self._opener + self._header + MESSAGE + body + terminator
                self._segments.block_failed(out, self._ws_before, raw)
                return
        self._segments.block_done()


class HarmonyReasoningParser(ReasoningParser):
    """Harmony reasoning/content split; function-call messages pass through to the content.

    ``starts_in_reasoning`` is accepted and ignored (the channel header says it all).
    """

    __slots__ = ("_machine",)

    def __init__(self, *, starts_in_reasoning: bool = False) -> None:
        super().__init__(starts_in_reasoning=starts_in_reasoning)
        self._machine = _HarmonyMachine(tool_mode=False)

    def feed(self, text: str) -> Delta:
        return self._machine.fed(text)

    def finish(self) -> Delta:
        return self._machine.finished()


class HarmonyToolParser(ToolParser):
    """Harmony function calls (``to=functions.NAME`` messages) as tool calls."""

    __slots__ = ("_machine",)

    def __init__(
        self, *, tools: Sequence[Mapping[str, object]] | None = None, id_prefix: CallIds = "call_"
    ) -> None:
        super().__init__(tools=tools, id_prefix=id_prefix)
        self._machine = _HarmonyMachine(tool_mode=True, add_call=self._add_call)

    def feed(self, text: str) -> Delta:
        return self._machine.fed(text)

    def finish(self) -> Delta:
        return self._machine.finished()
