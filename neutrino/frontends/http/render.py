"""Sans-IO rendering of OpenAI responses, stream chunks and SSE framing.

A stream's chunk envelope (id, object, created, model) is serialised once; each
chunk then costs one ``orjson.dumps`` of its text and a bytes join.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson

from neutrino.errors import NeutrinoError
from neutrino.pipeline.generation import Generation, Outcome
from neutrino.pipeline.logprobs import TokenLogprob, chat_logprobs, completion_logprobs

SSE_DONE = b"data: [DONE]\n\n"
SSE_OPEN = b": ok\n\n"
SSE_KEEPALIVE = b": keepalive\n\n"


def sse_event(payload: Any) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def sse_error(err: NeutrinoError) -> bytes:
    return sse_event(err.openai_body())


def usage(outcome: Outcome) -> dict[str, Any]:
    u: dict[str, Any] = {
        "prompt_tokens": outcome.prompt_tokens,
        "completion_tokens": outcome.completion_tokens,
        "total_tokens": outcome.prompt_tokens + outcome.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": outcome.cached_tokens},
    }
    u.update(outcome.timings)
    return u


def chat_response(gen: Generation, text: str, outcome: Outcome) -> dict[str, Any]:
    return {
        "id": gen.request_id,
        "object": "chat.completion",
        "created": gen.created,
        "model": gen.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None if outcome.logprobs is None else chat_logprobs(outcome.logprobs),
                "finish_reason": outcome.finish_reason,
                "stop_reason": outcome.stop_reason,
            }
        ],
        "usage": usage(outcome),
    }


def completion_response(gen: Generation, text: str, outcome: Outcome) -> dict[str, Any]:
    return {
        "id": gen.request_id,
        "object": "text_completion",
        "created": gen.created,
        "model": gen.model,
        "choices": [
            {
                "index": 0,
                "text": text,
                "logprobs": None
                if outcome.logprobs is None
                else completion_logprobs(outcome.logprobs),
                "finish_reason": outcome.finish_reason,
                "stop_reason": outcome.stop_reason,
            }
        ],
        "usage": usage(outcome),
    }


class ChunkEncoder:
    """Builds the SSE events of one streamed choice (chat or completion)."""

    __slots__ = ("_head", "_include_usage", "_kind", "_mid", "_offset", "_tail")

    def __init__(
        self, gen: Generation, kind: Literal["chat", "completion"], include_usage: bool
    ) -> None:
        self._kind = kind
        self._include_usage = include_usage
        self._offset = 0  # completion text sent so far (logprobs' text_offset)
        obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
        envelope = orjson.dumps(
            {"id": gen.request_id, "object": obj, "created": gen.created, "model": gen.model}
        )
        # b'data: {"id":...,"model":"m","choices":[{"index":0,' ... '}]}\n\n'
        self._head = b"data: " + envelope[:-1] + b',"choices":[{"index":0,'
        usage_null = b',"usage":null' if include_usage else b""
        if kind == "chat":
            self._mid = b'"delta":{"content":'
            self._tail = b'},"logprobs":null,"finish_reason":null}]' + usage_null + b"}\n\n"
        else:
            self._mid = b'"text":'
            self._tail = b',"logprobs":null,"finish_reason":null}]' + usage_null + b"}\n\n"

    def first(self) -> bytes:
        """The opening chunk (chat: the assistant role)."""
        if self._kind != "chat":
            return b""
        return self._head + b'"delta":{"role":"assistant","content":""' + self._tail

    def text(self, text: str, logprobs: list[TokenLogprob] | None = None) -> bytes:
        if logprobs is None:
            return self._head + self._mid + orjson.dumps(text) + self._tail
        # With logprobs (rare): the chunk's logprobs object replaces the null.
        if self._kind == "chat":
            lp = orjson.dumps(chat_logprobs(logprobs))
            body = self._mid + orjson.dumps(text) + b'},"logprobs":' + lp
        else:
            lp = orjson.dumps(completion_logprobs(logprobs, self._offset))
            body = self._mid + orjson.dumps(text) + b',"logprobs":' + lp
        self._offset += len(text)
        return self._head + body + self._tail[self._tail.index(b',"finish_reason"') :]

    def final(self, outcome: Outcome) -> bytes:
        fin = orjson.dumps(outcome.finish_reason)
        stop = orjson.dumps(outcome.stop_reason)
        usage_null = b',"usage":null' if self._include_usage else b""
        body = b'"delta":{}' if self._kind == "chat" else b'"text":""'
        out = (
            self._head
            + body
            + b',"logprobs":null,"finish_reason":'
            + fin
            + b',"stop_reason":'
            + stop
            + b"}]"
            + usage_null
            + b"}\n\n"
        )
        if self._include_usage:
            out += (
                self._head[: -len(b'[{"index":0,')]
                + b'[],"usage":'
                + orjson.dumps(usage(outcome))
                + b"}\n\n"
            )
        return out
