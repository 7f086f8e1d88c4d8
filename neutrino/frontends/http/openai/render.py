"""Sans-IO rendering of OpenAI responses, stream chunks and SSE framing.

A stream's chunk envelope (id, object, created, model) is serialised once; each
chunk then costs one ``orjson.dumps`` of its text and a bytes join.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Literal

import orjson

from neutrino.errors import NeutrinoError
from neutrino.frontends.http.openai.pieces import (
    chat_logprobs_json,
    completion_logprobs_json,
    marker,
    pieces,
)
from neutrino.pipeline.assembler import Outcome
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.logprobs import (
    LogprobColumns,
    TokenLogprob,
    chat_logprobs,
    completion_logprobs,
    large,
)
from neutrino.pipeline.usage import usage_of
from neutrino.text.parsers import ToolCallDelta

SSE_DONE = b"data: [DONE]\n\n"
SSE_OPEN = b": ok\n\n"
SSE_KEEPALIVE = b": keepalive\n\n"


def sse_event(payload: object) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def sse_error(err: NeutrinoError) -> bytes:
    return sse_event(err.openai_body())


def usage(outcomes: Sequence[Outcome]) -> dict[str, object]:
    """OpenAI's usage object of a response (pipeline.usage: what it counts)."""
    first = outcomes[0]
    if len(outcomes) == 1 and first.reasoning_tokens is None:  # the common case, directly
        u1: dict[str, object] = {
            "prompt_tokens": first.prompt_tokens,
            "completion_tokens": first.completion_tokens,
            "total_tokens": first.prompt_tokens + first.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": first.cached_tokens},
        }
        u1.update(first.timings)
        return u1
    total = usage_of(outcomes)
    u: dict[str, object] = {
        "prompt_tokens": total.prompt_tokens,
        "completion_tokens": total.completion_tokens,
        "total_tokens": total.total_tokens,
        "prompt_tokens_details": {"cached_tokens": total.cached_tokens},
    }
    if total.reasoning_tokens is not None:
        u["completion_tokens_details"] = {"reasoning_tokens": total.reasoning_tokens}
    u.update(total.timings)
    return u


Answer = bytes | Iterator[bytes]  # a non-streamed answer: whole, or in pieces (pieces.py)


Answerer = Callable[[Sequence[Generation], Sequence[tuple[str, Outcome]], str], Answer]


def _answerer(
    respond: Callable[..., dict[str, object]], render: Callable[[LogprobColumns], Iterator[bytes]]
) -> Answerer:
    """An API's answer as JSON: ``respond``'s object whole, or, when its logprobs are
    large, in pieces, each choice's logprobs rendered by ``render``."""

    def answer(
        gens: Sequence[Generation], results: Sequence[tuple[str, Outcome]], reasoning_field: str
    ) -> Answer:
        if not large([out.logprobs for _, out in results]):
            return orjson.dumps(respond(gens, results, reasoning_field))
        body = respond(gens, results, reasoning_field, defer=True)
        return pieces(body, [_deferred(render, out) for _, out in results])

    return answer


def _deferred(
    render: Callable[[LogprobColumns], Iterator[bytes]], out: Outcome
) -> Callable[[], Iterator[bytes]]:
    columns = out.logprobs
    if columns is None:
        return lambda: iter((b"null",))
    return lambda: render(columns)


def _logprobs(
    out: Outcome, index: int, defer: bool, whole: Callable[[list[TokenLogprob]], object]
) -> object:
    if out.logprobs is None:
        return None
    return marker(index) if defer else whole(out.logprobs.entries())


def _choice(index: int, key: str, body: object, lps: object, out: Outcome) -> dict[str, object]:
    """One choice of an answer (``key``: ``message`` or ``text``), in OpenAI's order."""
    return {
        "index": index,
        key: body,
        "logprobs": lps,
        "finish_reason": out.finish_reason,
        "stop_reason": out.stop_reason,
    }


def _answer_object(
    kind: str,
    gens: Sequence[Generation],
    results: Sequence[tuple[str, Outcome]],
    reasoning_field: str = "reasoning_content",
    defer: bool = False,
) -> dict[str, object]:
    """The answer object of either route (``kind``: its ``object``; ``defer``: each
    choice's logprobs a marker), in OpenAI's order of fields."""
    chat = kind == "chat.completion"
    whole = chat_logprobs if chat else completion_logprobs
    choices = []
    for i, ((text, out), gen) in enumerate(zip(results, gens, strict=True)):
        lps = None if out.logprobs is None else _logprobs(out, i, defer, whole)
        if chat:
            choices.append(_choice(i, "message", _message(text, out, reasoning_field), lps, out))
        else:
            choices.append(_choice(i, "text", gen.echo + text, lps, out))
    first = gens[0]
    return {
        "id": first.request_id,
        "object": kind,
        "created": first.created,
        "model": first.model,
        "choices": choices,
        "usage": usage([out for _, out in results]),
    }


chat_response = partial(_answer_object, "chat.completion")
completion_response = partial(_answer_object, "text_completion")


def _call_delta(c: ToolCallDelta) -> dict[str, object]:
    out: dict[str, object] = {"index": c.index}
    if c.id is not None:
        out["id"] = c.id
        out["type"] = "function"
    function: dict[str, object] = {"arguments": c.arguments}
    if c.name is not None:
        function["name"] = c.name
    out["function"] = function
    return out


def _message(text: str, out: Outcome, reasoning_field: str) -> dict[str, object]:
    msg: dict[str, object] = {
        "role": "assistant",
        "content": text if text or not out.tool_calls else None,
        "refusal": None,
    }
    if out.reasoning is not None:
        msg[reasoning_field] = out.reasoning or None
    if out.tool_calls:
        msg["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in out.tool_calls
        ]
    return msg


class ChunkEncoder:
    """Builds the SSE events of one streamed choice (chat or completion)."""

    __slots__ = (
        "_head",
        "_include_usage",
        "_kind",
        "_mid",
        "_offset",
        "_tail",
        "text_after",
        "text_before",
    )

    def __init__(
        self,
        gen: Generation,
        kind: Literal["chat", "completion"],
        include_usage: bool,
        index: int = 0,
    ) -> None:
        self._kind = kind
        self._include_usage = include_usage
        self._offset = 0  # completion text sent so far (logprobs' text_offset)
        obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
        envelope = orjson.dumps(
            {"id": gen.request_id, "object": obj, "created": gen.created, "model": gen.model}
        )
        # b'data: {"id":...,"model":"m","choices":[{"index":0,' ... '}]}\n\n'
        self._head = b"data: " + envelope[:-1] + b',"choices":[{"index":%d,' % index
        # Chat chunks carry "usage": null until the usage chunk when it is asked for
        # (CreateChatCompletionStreamResponse allows null); completion chunks are
        # CreateCompletionResponse objects, whose usage may be absent but not null.
        usage_null = b',"usage":null' if include_usage and kind == "chat" else b""
        if kind == "chat":
            self._mid = b'"delta":{"content":'
            self._tail = b'},"logprobs":null,"finish_reason":null}]' + usage_null + b"}\n\n"
        else:
            self._mid = b'"text":'
            self._tail = b',"logprobs":null,"finish_reason":null}]' + usage_null + b"}\n\n"
        # A text chunk without logprobs (the per-token path) is these around its JSON text.
        self.text_before = self._head + self._mid
        self.text_after = self._tail

    def first(self) -> bytes:
        """The opening chunk (chat: the assistant role)."""
        if self._kind != "chat":
            return b""
        return self._head + b'"delta":{"role":"assistant","content":""' + self._tail

    def text(self, text: str, logprobs: list[TokenLogprob] | None = None) -> bytes:
        if logprobs is None:
            return self.text_before + orjson.dumps(text) + self.text_after
        # With logprobs (rare): the chunk's logprobs object replaces the null.
        if self._kind == "chat":
            lp = orjson.dumps(chat_logprobs(logprobs))
            body = self._mid + orjson.dumps(text) + b'},"logprobs":' + lp
        else:
            lp = orjson.dumps(completion_logprobs(logprobs, self._offset))
            body = self._mid + orjson.dumps(text) + b',"logprobs":' + lp
        self._offset += len(text)
        return self._head + body + self._tail[self._tail.index(b',"finish_reason"') :]

    def parts(self, reasoning: str, calls: list[ToolCallDelta], reasoning_field: str) -> bytes:
        """Chunks for reasoning text and tool-call deltas (chat only)."""
        out = b""
        if reasoning:
            delta = orjson.dumps({reasoning_field: reasoning})
            out += self._head + b'"delta":' + delta + self._tail[self._tail.index(b',"logprobs"') :]
        if calls:
            delta = orjson.dumps({"tool_calls": [_call_delta(c) for c in calls]})
            out += self._head + b'"delta":' + delta + self._tail[self._tail.index(b',"logprobs"') :]
        return out

    def final(self, outcome: Outcome) -> bytes:
        """This choice's last chunk (finish reason); ``usage_chunk`` follows all choices."""
        fin = orjson.dumps(outcome.finish_reason)
        stop = orjson.dumps(outcome.stop_reason)
        body = b'"delta":{}' if self._kind == "chat" else b'"text":""'
        return (
            self._head
            + body
            + b',"logprobs":null,"finish_reason":'
            + fin
            + b',"stop_reason":'
            + stop
            + self._tail[self._tail.rindex(b"}]") :]  # b'}]' [b',"usage":null'] b'}\n\n'
        )

    def closing(self, outcomes: list[Outcome]) -> bytes:
        """What ends the stream once every choice has ended: the usage chunk, [DONE]."""
        return self.usage_chunk(outcomes) + SSE_DONE

    def usage_chunk(self, outcomes: Sequence[Outcome]) -> bytes:
        """The closing chunk with no choices and the usage (when asked for), else b""."""
        if not self._include_usage:
            return b""
        envelope = self._head[: self._head.index(b'[{"index":')]
        return envelope + b'[],"usage":' + orjson.dumps(usage(outcomes)) + b"}\n\n"


chat_answer = _answerer(chat_response, chat_logprobs_json)  # a chat completion's JSON
completion_answer = _answerer(completion_response, completion_logprobs_json)
