"""``llama3_json``: Llama 3.1 / 3.2 / 3.3 JSON tool calls.

Source: Meta's Llama 3.1 prompt format ("JSON based tool calling": the model answers with
``{"name": function name, "parameters": dictionary of argument name and its value}``), and the
``<|python_tag|>`` token that Llama 3.1 may put before a call; vLLM's ``llama3_json`` parser
reads the same, with several calls separated by ``;``::

    {"name": "get_weather", "parameters": {"city": "Paris"}}
    <|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "f", …}

A call is recognised only where it can begin: at the start of the message (after whitespace),
after ``<|python_tag|>`` (which may also follow some content), and after a previous call
(separated by ``;`` and/or whitespace). Each JSON object is parsed once complete; it is a call
if it has a string ``name`` and an object ``parameters`` (or ``arguments``; one of the two must be
present) and, when the
request has tools, the name is one of them. Otherwise the object is content verbatim (so a
plain JSON answer stays content, though it is only released once the object is complete), and
everything after it is content too, unless a call came before it: text after a call is
dropped (the README's rule). Text
after ``<|python_tag|>`` that is not a JSON object (Llama 3.1 built-in tools such as
``brave_search.call(query="…")``) is content, tag included.
"""

from __future__ import annotations

from typing import Final

from neutrino.text.parsers.base import Delta, call_from_object, load_object
from neutrino.text.parsers.segmented import SegmentedToolParser

__all__ = ["PYTHON_TAG", "Llama3JsonToolParser"]

PYTHON_TAG: Final = "<|python_tag|>"

# _START: beginning of the message; _WAIT: a call may begin (after a tag or a call);
# _JSON: inside an object; _TEXT: plain content (only a <|python_tag|> starts a call again).
_START, _WAIT, _JSON, _TEXT = range(4)


class Llama3JsonToolParser(SegmentedToolParser):
    """Llama 3.x JSON tool calls (see the module docstring).

    The block's text (``_raw``) is the text since the last call: tag, separators, the object.
    """

    __slots__ = ()

    def _scan(self, out: Delta, buf: str) -> str:
        while buf:
            state = self._state
            if state == _TEXT:
                buf, found = self._segments.until(out, buf, PYTHON_TAG)
                if not found:
                    break
                self._open_block(PYTHON_TAG)
                self._state = _WAIT
            elif state == _JSON:
                end = self._take_json(buf)
                if end < 0:
                    return ""
                buf = buf[end:]
                self._complete(out)
            else:  # _START / _WAIT: skip whitespace (and ';' after a call), then decide
                i, n = 0, len(buf)
                while i < n and (buf[i].isspace() or (buf[i] == ";" and self._calls)):
                    i += 1
                if state == _START and i:
                    self._segments.text(out, buf[:i])
                else:
                    self._raw.append(buf[:i])
                buf = buf[i:]
                if not buf:
                    break
                if buf[0] == "{":
                    if state == _START:
                        self._open_block()
                    self._start_json()
                    self._state = _JSON
                elif buf.startswith(PYTHON_TAG) and state == _START:
                    buf = buf[len(PYTHON_TAG) :]
                    self._open_block(PYTHON_TAG)
                    self._state = _WAIT
                elif buf.startswith(PYTHON_TAG) and self._raw_is_separator():
                    buf = buf[len(PYTHON_TAG) :]
                    self._raw.append(PYTHON_TAG)
                elif len(buf) < len(PYTHON_TAG) and PYTHON_TAG.startswith(buf):
                    break  # a tag may be arriving
                else:
                    self._to_text(out)
        return buf

    def _flush(self, out: Delta, buf: str) -> None:
        if self._state in (_START, _TEXT):
            self._segments.text(out, buf)
        else:
            self._raw.append(buf)
            self._to_text(out)

    def _raw_is_separator(self) -> bool:
        """Whether only whitespace and ``;`` came since the last call (a tag may follow)."""
        return bool(self._calls) and PYTHON_TAG not in self._raw

    def _to_text(self, out: Delta) -> None:
        """What was held since the last call is content; from here on everything is content."""
        raw = "".join(self._raw)
        self._raw = []
        self._state = _TEXT
        if self._calls and not raw.replace(";", "").strip():
            return  # only separators after the last call
        if raw:
            self._segments.block_failed(out, self._held, raw)
        self._held = ""

    def _complete(self, out: Delta) -> None:
        call = call_from_object(
            load_object(self._json_text()), args_keys=("parameters", "arguments"), require_args=True
        )
        if call is None or not self._name_allowed(call[0]):
            self._to_text(out)
            return
        self._end_block(out, [call])
        self._held = ""
        self._state = _WAIT
