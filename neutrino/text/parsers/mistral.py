"""``mistral``: Mistral tool calls (all tokenizer versions), and ``[THINK]`` reasoning.

The format follows the tokenizer version of ``mistral-common`` (the reference renderer):

* v3 / v3-tekken / v7 (Mistral-7B-Instruct-v0.3, Mixtral, Mistral-Nemo): one JSON array
  after the marker, optionally preceded by a space::

      [TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abcDEF123"}]

* v11 (Mistral-Small-3.2-2506): one marker per call, with the model's call id::

      [TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]{"city": "Paris"}[TOOL_CALLS]…

* v13+ (Magistral-Small-2509, Ministral-3, Devstral-2, Mistral-Medium-3.5, Small-4)::

      [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}

Text before the first call is content (a whitespace-only run just before a call is dropped);
text after a call is dropped (the README's rule: vLLM's and SGLang's non-streamed parsers
answer with the text before ``[TOOL_CALLS]``). The model's call ids (``"id"``,
``[CALL_ID]``) are ignored: ids are ``{id_prefix}{index}``. A name must match
``[A-Za-z0-9_.-]{1,256}``. Anything after ``[TOOL_CALLS]`` that does not fit one of the forms,
or an array in which an element is not a ``{"name", "arguments"}`` object, is content verbatim
(marker included); so is a call cut off by the end of the stream; after a call, such text is
dropped like all other text.

Reasoning (v13+ reasoning models: Magistral-2509, Medium-3.5, Small-4): ``[THINK]…[/THINK]``,
handled like ``<think>`` by :class:`MistralReasoningParser` (older Magistral 2506/2507 used
``<think>``: use the ``think`` parser for those).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from neutrino.text.parsers.base import Call, CallIds, Delta, load_call_list, load_object
from neutrino.text.parsers.segmented import SegmentedToolParser
from neutrino.text.parsers.think import ThinkReasoningParser

__all__ = ["ARGS", "CALL_ID", "TOOL_CALLS", "MistralReasoningParser", "MistralToolParser"]

TOOL_CALLS: Final = "[TOOL_CALLS]"
ARGS: Final = "[ARGS]"
CALL_ID: Final = "[CALL_ID]"
NAME_LIMIT: Final = 256
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")

# states
_TEXT, _AFTER_MARKER, _JSON, _NAME, _CALL_ID, _ARGS_WAIT, _ARGS = range(7)


class MistralReasoningParser(ThinkReasoningParser):
    """``[THINK]…[/THINK]`` reasoning (Mistral v13+ reasoning models)."""

    open_marker = "[THINK]"
    close_marker = "[/THINK]"

    __slots__ = ()


class MistralToolParser(SegmentedToolParser):
    """Mistral ``[TOOL_CALLS]`` tool calls (see the module docstring).

    The block's text (``_raw``) is all the text of the current call, for the malformed case.
    """

    __slots__ = ("_name",)

    def __init__(
        self, *, tools: Sequence[Mapping[str, object]] | None = None, id_prefix: CallIds = "call_"
    ) -> None:
        super().__init__(tools=tools, id_prefix=id_prefix)
        self._name = ""

    def _scan(self, out: Delta, buf: str) -> str:
        while buf:
            state = self._state
            if state == _TEXT:
                buf, found = self._segments.until(out, buf, TOOL_CALLS)
                if not found:
                    break
                self._open_block(TOOL_CALLS)
                self._state = _AFTER_MARKER
            elif state in (_AFTER_MARKER, _ARGS_WAIT):
                buf = self._skip_space(buf)
                if not buf:
                    break
                ch = buf[0]
                if ch == "{" or (ch == "[" and state == _AFTER_MARKER):
                    self._start_json()
                    self._state = _JSON if state == _AFTER_MARKER else _ARGS
                elif state == _AFTER_MARKER:
                    self._name = ""
                    self._state = _NAME
                else:
                    self._fail(out)
            elif state in (_JSON, _ARGS):
                end = self._take_json(buf)
                if end < 0:
                    return ""
                buf = buf[end:]
                self._complete(out)
            else:  # _NAME / _CALL_ID: identifier characters up to [ARGS] (or [CALL_ID])
                i, n = 0, len(buf)
                while i < n and buf[i] in _NAME_CHARS:
                    i += 1
                if state == _NAME:
                    self._name += buf[:i]
                self._raw.append(buf[:i])
                buf = buf[i:]
                if len(self._name) > NAME_LIMIT:
                    self._fail(out)
                elif not buf:
                    break
                elif buf.startswith(ARGS) and self._name:
                    self._raw.append(ARGS)
                    buf = buf[len(ARGS) :]
                    self._state = _ARGS_WAIT
                elif buf.startswith(CALL_ID) and state == _NAME and self._name:
                    self._raw.append(CALL_ID)
                    buf = buf[len(CALL_ID) :]
                    self._state = _CALL_ID
                elif len(buf) < len(CALL_ID) and (ARGS.startswith(buf) or CALL_ID.startswith(buf)):
                    break  # a marker may be arriving
                else:
                    self._fail(out)
        return buf

    def _complete(self, out: Delta) -> None:
        """The JSON value after the marker (array form) or after ``[ARGS]`` is complete."""
        text = self._json_text()
        calls: list[Call] | None
        if self._state == _ARGS:
            args = load_object(text)
            calls = None if args is None else [(self._name, args)]
        else:  # v3/v7: a non-empty JSON array of call objects (or a single object)
            calls = load_call_list(text) or None
        self._end_block(out, calls)
        self._state = _TEXT
