"""A streamed Responses API answer: its typed SSE events (sans-IO) and its push target.

:class:`ResponseEvents` turns what a generation produces into the events the ``openai``
SDK's ``responses`` stream reads, each ``event: TYPE`` / ``data: {...}`` with its
``sequence_number``:

- ``response.created``, ``response.in_progress`` (the response, no output yet);
- per output item, ``response.output_item.added``, its content part's
  ``response.content_part.added``, the deltas (``response.reasoning_text.delta`` for a
  reasoning item, ``response.output_text.delta`` for the message), their ``.done``,
  ``response.content_part.done`` and ``response.output_item.done``;
- per function call (from the parsed outcome, once the answer ended, after the message:
  the order of the unstreamed output), ``output_item.added``,
  ``response.function_call_arguments.delta`` / ``.done``, ``output_item.done``;
- ``response.completed`` (or ``response.incomplete``, cut by ``max_output_tokens``) with
  the whole response; on an error, an ``error`` event then ``response.failed``.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson

from neutrino.errors import NeutrinoError
from neutrino.frontends.http.responses.render import (
    call_item,
    end_status,
    first_part,
    item_id,
    logprob_entries,
    message_item,
    reasoning_item,
    response_object,
    text_part,
)
from neutrino.frontends.http.sse import SSEStream
from neutrino.pipeline.assembler import Outcome
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.logprobs import TokenLogprob
from neutrino.text.parsers import ToolCallDelta


class ResponseEvents:
    """The events of one streamed response, in order (each method returns their bytes)."""

    __slots__ = (
        "_created_at",
        "_echo",
        "_kind",
        "_logprobs",
        "_message_seen",
        "_output",
        "_seq",
        "_text",
        "final",
        "model",
        "opened",
        "resp_id",
    )

    def __init__(self, echo: dict[str, object], resp_id: str, created_at: int, model: str) -> None:
        self._echo = echo
        self.resp_id = resp_id
        self._created_at = created_at
        self.model = model
        self._seq = 0
        self._output: list[dict[str, object]] = []  # finished items
        self._kind: str | None = None  # the open item's: "reasoning", "message" or None
        self._text: list[str] = []  # the open item's text so far
        self._logprobs: list[dict[str, object]] = []  # the open message's
        self._message_seen = False
        self.opened = False
        self.final: dict[str, object] | None = None  # the response, once it has ended

    def _event(self, kind: str, **fields: object) -> bytes:
        data = orjson.dumps({"type": kind, **fields, "sequence_number": self._seq})
        self._seq += 1
        return b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"

    def _response(
        self, outcome: Outcome | None = None, error: NeutrinoError | None = None
    ) -> dict[str, object]:
        output = list(self._output)
        return response_object(
            self._echo, self.resp_id, self._created_at, self.model, output, outcome, error
        )

    def opening(self) -> bytes:
        """``response.created`` and ``response.in_progress``."""
        self.opened = True
        resp = self._response()
        return self._event("response.created", response=resp) + self._event(
            "response.in_progress", response=resp
        )

    @property
    def _index(self) -> int:
        return len(self._output)

    def _item_id(self) -> str:
        prefix = "rs" if self._kind == "reasoning" else "msg"
        return item_id(prefix, self.resp_id, self._index)

    def _open(self, kind: str) -> bytes:
        out = self._close("completed") if self._kind is not None else b""
        self._kind = kind
        iid = self._item_id()
        if kind == "reasoning":
            item = reasoning_item(iid, "", "in_progress")
            item["content"] = []
            part: dict[str, object] = {"type": "reasoning_text", "text": ""}
        else:
            self._message_seen = True
            item = message_item(iid, "in_progress", None)
            part = text_part("", [])
        where = {"item_id": iid, "output_index": self._index, "content_index": 0}
        return (
            out
            + self._event("response.output_item.added", output_index=self._index, item=item)
            + self._event("response.content_part.added", **where, part=part)
        )

    def _close(self, status: str) -> bytes:
        text = "".join(self._text)
        iid = self._item_id()
        where = {"item_id": iid, "output_index": self._index, "content_index": 0}
        if self._kind == "reasoning":
            item = reasoning_item(iid, text, status)
            out = self._event("response.reasoning_text.done", **where, text=text)
        else:
            item = message_item(iid, status, text, self._logprobs)
            out = self._event(
                "response.output_text.done", **where, text=text, logprobs=self._logprobs
            )
        out += self._event("response.content_part.done", **where, part=first_part(item))
        out += self._event("response.output_item.done", output_index=self._index, item=item)
        self._output.append(item)
        self._kind = None
        self._text = []
        self._logprobs = []
        return out

    def reasoning(self, delta: str) -> bytes:
        out = b"" if self._kind == "reasoning" else self._open("reasoning")
        self._text.append(delta)
        where = {"item_id": self._item_id(), "output_index": self._index, "content_index": 0}
        return out + self._event("response.reasoning_text.delta", **where, delta=delta)

    def text(self, delta: str, logprobs: list[TokenLogprob] | None = None) -> bytes:
        out = b"" if self._kind == "message" else self._open("message")
        lps = logprob_entries(logprobs)
        self._text.append(delta)
        self._logprobs += lps
        where = {"item_id": self._item_id(), "output_index": self._index, "content_index": 0}
        return out + self._event("response.output_text.delta", **where, delta=delta, logprobs=lps)

    def finish(self, outcome: Outcome) -> bytes:
        """The last items (an empty message, the function calls) and the end event."""
        out = b""
        if not self._message_seen and not outcome.tool_calls:
            out += self._open("message")  # an answer with no text still has its message
        if self._kind is not None:
            out += self._close(end_status(outcome))
        for call in outcome.tool_calls:
            iid = item_id("fc", self.resp_id, self._index)
            index = self._index
            added = call_item(iid, call, "in_progress", arguments="")
            out += self._event("response.output_item.added", output_index=index, item=added)
            at = {"item_id": iid, "output_index": index}
            out += self._event("response.function_call_arguments.delta", **at, delta=call.arguments)
            out += self._event(
                "response.function_call_arguments.done",
                **at,
                name=call.name,
                arguments=call.arguments,
            )
            done = call_item(iid, call, "completed")
            out += self._event("response.output_item.done", output_index=index, item=done)
            self._output.append(done)
        self.final = resp = self._response(outcome=outcome)
        kind = "response.incomplete" if resp["status"] == "incomplete" else "response.completed"
        return out + self._event(kind, response=resp)

    def failed(self, err: NeutrinoError) -> bytes:
        """An ``error`` event, then ``response.failed`` (opening the stream first if the
        request failed before anything was sent)."""
        out = b"" if self.opened else self.opening()
        out += self._event("error", code=err.code, message=err.message, param=err.param)
        return out + self._event("response.failed", response=self._response(error=err))


class ResponsesWriter:
    """The push target of a streamed response's generation."""

    __slots__ = ("_events", "_on_final", "_stream")

    def __init__(
        self,
        stream: SSEStream,
        events: ResponseEvents,
        on_final: Callable[[dict[str, object]], None] | None = None,
    ) -> None:
        self._stream = stream
        self._events = events
        self._on_final = on_final

    def on_parts(self, reasoning: str, tool_calls: list[ToolCallDelta]) -> None:
        # Function calls are sent whole from the outcome, after the message (finish).
        if reasoning:
            self._stream.write(self._events.reasoning(reasoning))

    def on_text(self, text: str, tokens: int, logprobs: list[TokenLogprob] | None) -> None:
        if text or logprobs:
            self._stream.write(self._events.text(text, logprobs))

    def on_end(self, gen: Generation) -> None:
        err = gen.error
        if err is not None:
            self._stream.fail(err)
        elif gen.outcome is not None:
            self._stream.ended(0, gen.outcome, self)

    def closing(self, outcomes: list[Outcome]) -> bytes:
        """The end of the stream (SSEStream's Closing), once the generation has ended."""
        data = self._events.finish(outcomes[0])
        final = self._events.final
        if self._on_final is not None and final is not None:
            self._on_final(final)
        return data
