"""The push target of a streamed Anthropic message: the pipeline's deltas as Anthropic's
events, in Anthropic's order.

``message_start`` and a ``ping`` open the stream; then each run of one kind of output is
a content block: ``content_block_start``, its deltas (``thinking_delta``, then a
``signature_delta`` before the block stops; ``text_delta``; ``input_json_delta`` for a
tool call's arguments), ``content_block_stop``. Reasoning, text and tool calls arrive in
the order the model wrote them, so a block ends when another kind (or another call)
begins. ``message_delta`` (stop reason, usage) and ``message_stop`` end the stream; an
error ends it with an ``error`` event instead.
"""

from __future__ import annotations

from typing import Literal

import orjson

from neutrino.frontends.http.anthropic.render import (
    MESSAGE_STOP,
    PING,
    SIGNATURE,
    event,
    message_delta,
    message_start,
    tool_use_id,
)
from neutrino.frontends.http.sse import SSEStream
from neutrino.pipeline.assembler import Outcome
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.logprobs import TokenLogprob
from neutrino.text.parsers import ToolCallDelta

Kind = Literal["thinking", "text", "tool_use"]

_DELTA = b'{"type":"content_block_delta","index":%d,"delta":{"type":"%s","%s":'
_SIGNATURE = b'{"type":"signature_delta","signature":' + orjson.dumps(SIGNATURE) + b"}"


def _start(index: int, block: bytes) -> bytes:
    return event(
        b"content_block_start",
        b'{"type":"content_block_start","index":%d,"content_block":%b}' % (index, block),
    )


def _delta(index: int, kind: bytes, key: bytes, value: str) -> bytes:
    payload = _DELTA % (index, kind, key) + orjson.dumps(value) + b"}}"
    return event(b"content_block_delta", payload)


def _stop(index: int, kind: Kind) -> bytes:
    out = b""
    if kind == "thinking":  # the signature comes just before the block stops
        payload = b'{"type":"content_block_delta","index":%d,"delta":%b}' % (index, _SIGNATURE)
        out = event(b"content_block_delta", payload)
    stop = b'{"type":"content_block_stop","index":%d}' % index
    return out + event(b"content_block_stop", stop)


class MessageWriter:
    """Writes one streamed message (Anthropic's streams have one choice) to ``stream``."""

    __slots__ = ("_call", "_index", "_kind", "_stops", "_stream")

    def __init__(self, stream: SSEStream, stops: frozenset[str]) -> None:
        self._stream = stream
        self._stops = stops
        self._kind: Kind | None = None  # the open block's kind, if one is open
        self._index = -1  # the open (or last) block's index
        self._call = -1  # the tool call the open tool_use block holds

    def open(self, gen: Generation) -> None:
        """The stream's first events."""
        self._stream.write(message_start(gen) + PING)

    def _switch(self, kind: Kind, block: bytes) -> bytes:
        """End the open block; start the next one."""
        out = b"" if self._kind is None else _stop(self._index, self._kind)
        self._kind = kind
        self._index += 1
        return out + _start(self._index, block)

    def on_parts(self, reasoning: str, tool_calls: list[ToolCallDelta]) -> None:
        out = b""
        if reasoning:
            if self._kind != "thinking":
                out += self._switch("thinking", b'{"type":"thinking","thinking":"","signature":""}')
            out += _delta(self._index, b"thinking_delta", b"thinking", reasoning)
        for call in tool_calls:
            if self._kind != "tool_use" or call.index != self._call:
                block = {
                    "type": "tool_use",
                    "id": tool_use_id(call.id or ""),
                    "name": call.name or "",
                    "input": {},
                }
                out += self._switch("tool_use", orjson.dumps(block))
                self._call = call.index
            if call.arguments:
                out += _delta(self._index, b"input_json_delta", b"partial_json", call.arguments)
        if out:
            self._stream.write(out)

    def on_text(self, text: str, tokens: int, logprobs: list[TokenLogprob] | None) -> None:
        if not text:
            return
        out = b""
        if self._kind != "text":
            out = self._switch("text", b'{"type":"text","text":""}')
        self._stream.write(out + _delta(self._index, b"text_delta", b"text", text))

    def on_end(self, gen: Generation) -> None:
        err = gen.error
        if err is not None:
            self._stream.fail(err)
        elif gen.outcome is not None:
            if self._kind is not None:
                self._stream.write(_stop(self._index, self._kind))
                self._kind = None
            self._stream.ended(0, gen.outcome, self)

    def closing(self, outcomes: list[Outcome]) -> bytes:
        """What ends the stream: the stop reason and usage, then ``message_stop``."""
        return message_delta(outcomes[0], self._stops) + MESSAGE_STOP
