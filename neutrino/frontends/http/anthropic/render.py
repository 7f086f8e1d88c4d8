"""Sans-IO rendering of Anthropic Messages answers: the message object, its ids, stop
reasons and usage, and the SSE framing of its stream events.

Thinking blocks carry ``signature`` :data:`SIGNATURE` (an empty string): Anthropic signs
its own models' thinking so that it can check it when a client sends it back; Neutrino's
models have nothing to sign, and a thinking block sent back is taken as it is.
"""

from __future__ import annotations

import orjson

from neutrino.errors import NeutrinoError
from neutrino.pipeline.assembler import Outcome
from neutrino.pipeline.generation import Generation

SIGNATURE = ""

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def message_id(request_id: str) -> str:
    """``msg_<id>`` for the request ``msg-<id>`` (the id its logs and history show)."""
    return "msg_" + request_id.partition("-")[2]


def tool_use_id(call_id: str) -> str:
    """A tool call's id in Anthropic's form, ``toolu_...`` (a family whose template takes
    only its own form of id, such as Mistral's nine characters, keeps it)."""
    if call_id.startswith("call_"):
        return "toolu_" + call_id[5:]
    return call_id


def stop_reason(out: Outcome, stops: frozenset[str]) -> tuple[str, str | None]:
    """``stop_reason`` and ``stop_sequence`` of a finished answer."""
    matched = out.stop_reason
    if out.finish_reason == "stop" and isinstance(matched, str) and matched in stops:
        return "stop_sequence", matched
    return _STOP_REASONS.get(out.finish_reason, "end_turn"), None


def usage(out: Outcome) -> dict[str, object]:
    """Anthropic's usage of a finished answer, the same in the message and in a stream's
    ``message_delta``: ``input_tokens`` counts the prompt tokens not read from the cache
    (those are ``cache_read_input_tokens``), as Anthropic bills them. A prompt is never
    written to a cache on request (``cache_control`` is ignored), so
    ``cache_creation_input_tokens`` is 0. ``output_tokens_details``
    (``thinking_tokens``: the reasoning's share of ``output_tokens``) is in Anthropic's
    ``Usage`` and ``MessageDeltaUsage``, given when the answer's reasoning was parsed."""
    u: dict[str, object] = {
        "input_tokens": out.prompt_tokens - out.cached_tokens,
        "output_tokens": out.completion_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": out.cached_tokens,
    }
    if out.reasoning_tokens is not None:
        u["output_tokens_details"] = {"thinking_tokens": out.reasoning_tokens}
    return u


def tool_input(arguments: str) -> dict[str, object]:
    """A call's arguments (a JSON object in text, as the output parsers give them) as
    the ``input`` object of a tool_use block."""
    if not arguments:
        return {}
    value = orjson.loads(arguments)
    return value if isinstance(value, dict) else {"value": value}


def message(gen: Generation, text: str, out: Outcome, stops: frozenset[str]) -> dict[str, object]:
    """The whole answer of a non-streamed request: thinking, text, then tool_use blocks."""
    content: list[dict[str, object]] = []
    if out.reasoning:
        content.append({"type": "thinking", "thinking": out.reasoning, "signature": SIGNATURE})
    if text:
        content.append({"type": "text", "text": text})
    for call in out.tool_calls:
        content.append(
            {
                "type": "tool_use",
                "id": tool_use_id(call.id),
                "name": call.name,
                "input": tool_input(call.arguments),
            }
        )
    reason, sequence = stop_reason(out, stops)
    return {
        "id": message_id(gen.request_id),
        "type": "message",
        "role": "assistant",
        "model": gen.model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": sequence,
        "usage": usage(out),
    }


# ---------------------------------------------------------------- stream events


def event(name: bytes, payload: bytes) -> bytes:
    """One SSE event: its ``event:`` line and its JSON ``data:`` line."""
    return b"event: " + name + b"\ndata: " + payload + b"\n\n"


PING = event(b"ping", b'{"type":"ping"}')
MESSAGE_STOP = event(b"message_stop", b'{"type":"message_stop"}')


def error_body(err: NeutrinoError) -> bytes:
    """An error answered before a stream opened (the response's JSON body)."""
    return orjson.dumps(err.anthropic_body())


def error_events(err: NeutrinoError) -> bytes:
    """An error in a stream: Anthropic's ``error`` event (the stream ends with it)."""
    return event(b"error", orjson.dumps(err.anthropic_body()))


def message_start(gen: Generation) -> bytes:
    """The stream's first event: the message, with no content yet.

    Its usage says what is known when the stream opens: the prompt's length, all of it
    as ``input_tokens``. How much of it the engine read from its prefix cache is known
    only from the engine's final result, so ``message_delta`` (whose counts are
    cumulative and replace these: the SDKs' stream helpers take them) gives the
    answer's usage as the non-streamed message does, ``input_tokens`` less the cache
    reads that ``cache_read_input_tokens`` then counts."""
    msg: dict[str, object] = {
        "id": message_id(gen.request_id),
        "type": "message",
        "role": "assistant",
        "model": gen.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": gen.prompt_tokens,
            "output_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    return event(b"message_start", orjson.dumps({"type": "message_start", "message": msg}))


def message_delta(out: Outcome, stops: frozenset[str]) -> bytes:
    """The stream's stop reason and final usage: the non-streamed message's (input,
    cache and output counts, cumulative, as Anthropic sends them)."""
    reason, sequence = stop_reason(out, stops)
    payload = {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": sequence},
        "usage": usage(out),
    }
    return event(b"message_delta", orjson.dumps(payload))
