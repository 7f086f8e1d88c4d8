"""``granite``: IBM Granite 3.x tool calls (``<|tool_call|>[…]``) and Granite 3.3 reasoning.

Tool calls. Granite 3.x's published chat templates tell the model, when tools are offered,
to "respond only with <|tool_call|> followed by a JSON list of tools used"::

    <|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}},
                  {"name": "get_time", "arguments": {}}]

``<|tool_call|>`` is an added token of Granite's tokenizer (the output parsers see special
tokens as text). vLLM's ``granite`` tool parser also accepts the plain string ``<tool_call>``
before the list, which it says Granite 3.1 emits; so does this parser. Rules:

* text before the first call is content (a whitespace-only run just before a call is
  dropped); text after a call is dropped (the README's rule; vLLM's parser answers no
  content once it has calls); a marker may appear more than once;
* after the marker (and optional whitespace) comes one JSON array whose elements are
  ``{"name": …, "arguments": {…}}`` objects (``parameters`` is accepted for ``arguments``,
  missing arguments mean ``{}``, arguments given as a JSON string are decoded); an empty
  array is consumed and gives no call;
* anything else after a marker (no array, invalid JSON, an element that is not such an
  object) is content verbatim, marker included; so is a list cut off by the end of the
  stream (before any call; after one, all text is dropped). A bare JSON array without a
  marker is content.

Reasoning (Granite 3.3). With the template's ``thinking`` flag, its system prompt asks the
model to "Write your thoughts between <think></think> and write your response between
<response></response>"::

    <think>chain of thought</think><response>answer</response>

:class:`GraniteReasoningParser` splits the ``<think>`` block off as the ``think`` parser does
and takes the ``<response>`` wrapper off the answer: ``<response>`` is the wrapper only when
it is the first non-whitespace text of the content (right after ``</think>``, or at the start
when there is no think block); that whitespace is dropped, and the first ``</response>``
after it closes the wrapper. Text after ``</response>`` (a tool call, say) is content, kept
verbatim. A ``<response>`` anywhere else is ordinary text.

Reasoning (Granite 3.2). Its model card's thinking prompt has the model write plain-text
separators instead of tags::

    Here is my thought process: chain of thought Here is my response: answer

(``Here's`` as well as ``Here is``, as vLLM's ``granite`` reasoning parser reads them). Each
phrase opens or closes the reasoning as ``<think>`` / ``</think>`` do, verbatim around it;
where it cannot (a response phrase before any thought process, a thought-process phrase
inside one) it is text, kept (``think``'s rules for word markers).
"""

from __future__ import annotations

from typing import ClassVar, Final

from neutrino.text.parsers.base import Delta, ReasoningParser, find_first, load_call_list
from neutrino.text.parsers.segmented import SegmentedToolParser
from neutrino.text.parsers.think import ThinkReasoningParser

__all__ = [
    "RESPONSE_CLOSE",
    "RESPONSE_OPEN",
    "TOOL_CALL",
    "TOOL_CALL_STRING",
    "GraniteReasoningParser",
    "GraniteToolParser",
]

TOOL_CALL: Final = "<|tool_call|>"
TOOL_CALL_STRING: Final = "<tool_call>"
RESPONSE_OPEN: Final = "<response>"
RESPONSE_CLOSE: Final = "</response>"
_MARKERS: Final = (TOOL_CALL, TOOL_CALL_STRING)

# tool parser states
_TEXT, _AFTER_MARKER, _LIST = 0, 1, 2
# response-wrapper states
_LEAD, _WRAPPED, _PLAIN = 0, 1, 2


class GraniteToolParser(SegmentedToolParser):
    """``<|tool_call|>[…]`` tool calls (see the module docstring).

    The block's text (``_raw``) is the marker and all text after it, for the malformed case.
    """

    __slots__ = ()

    def _scan(self, out: Delta, buf: str) -> str:
        while buf:
            if self._state == _TEXT:
                buf, marker = self._segments.until_first(out, buf, _MARKERS)
                if marker is None:
                    break
                self._open_block(marker)
                self._state = _AFTER_MARKER
            elif self._state == _AFTER_MARKER:
                buf = self._skip_space(buf)
                if not buf:
                    break
                if buf[0] == "[":
                    self._start_json()
                    self._state = _LIST
                else:
                    self._fail(out)
            else:
                end = self._take_json(buf)
                if end < 0:
                    return ""
                buf = buf[end:]
                # the array after the marker is complete; if it is no call list, all the text
                # after the marker is content
                self._end_block(out, load_call_list(self._json_text()))
                self._state = _TEXT
        return buf


class _GraniteThink(ThinkReasoningParser):
    """``<think>`` blocks, or Granite 3.2's plain-text separators."""

    word_opens = ("Here is my thought process:", "Here's my thought process:")
    word_closes = ("Here is my response:", "Here's my response:")


class GraniteReasoningParser(ReasoningParser):
    """``<think>…</think><response>…</response>`` (see the module docstring); a subclass
    names another wrapper (Hunyuan's ``<answer>``)."""

    response_open: ClassVar[str] = RESPONSE_OPEN
    response_close: ClassVar[str] = RESPONSE_CLOSE
    think: ClassVar[type[ThinkReasoningParser]] = _GraniteThink  # the reasoning's

    __slots__ = ("_buf", "_lead", "_state", "_think")

    @classmethod
    def opening(cls) -> str | None:
        return cls.think.opening()

    def __init__(self, *, starts_in_reasoning: bool = False) -> None:
        super().__init__(starts_in_reasoning=starts_in_reasoning)
        self._think = self.think(starts_in_reasoning=starts_in_reasoning)
        self._state = _LEAD
        self._buf = ""  # what may begin <response> (never starts with whitespace)
        # Whitespace before the wrapper, in pieces: a long run of it costs linear time.
        self._lead: list[str] = []

    def feed(self, text: str) -> Delta:
        out = self._think.feed(text)
        out.content = self._unwrap(out.content)
        return out

    def finish(self) -> Delta:
        out = self._think.finish()
        out.content = self._unwrap(out.content) + "".join(self._lead) + self._buf
        self._buf = ""
        self._lead = []
        return out

    def _unwrap(self, text: str) -> str:
        """The content of ``text`` with the ``<response>`` wrapper taken off."""
        if self._state == _PLAIN:
            return text
        buf = self._buf + text if self._buf else text
        self._buf = ""
        parts: list[str] = []
        while buf:
            if self._state == _LEAD:
                stripped = buf.lstrip()
                if len(stripped) < len(buf):
                    self._lead.append(buf[: len(buf) - len(stripped)])
                buf = stripped
                if not buf:
                    break  # whitespace only: wait
                if buf.startswith(self.response_open):
                    buf = buf[len(self.response_open) :]
                    self._lead = []
                    self._state = _WRAPPED
                    continue
                if self.response_open.startswith(buf):
                    self._buf = buf  # what may begin <response>: wait
                    break
                parts.append("".join(self._lead))  # no wrapper: the whitespace is content
                self._lead = []
                self._state = _PLAIN
            if self._state == _WRAPPED:
                at, marker = find_first(buf, (self.response_close,))
                parts.append(buf[:at])
                if marker is None:
                    self._buf = buf[at:]
                    break
                buf = buf[at + len(self.response_close) :]
                self._state = _PLAIN
                continue
            parts.append(buf)
            break
        return "".join(parts)
