"""Sans-IO rendering of the Responses API's objects: the Response, its output items,
its usage and its error.

A response's output is, in order: a ``reasoning`` item (when the model's reasoning was
split off), a ``message`` item (its text; present unless the answer is only function
calls), then one ``function_call`` item per call. A streamed response builds the same
items as it goes (``responses_stream``), so its ``response.completed`` carries what the
same request answers unstreamed.
"""

from __future__ import annotations

import time

from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.pipeline.assembler import Outcome
from neutrino.pipeline.logprobs import LogprobColumns, TokenLogprob, chat_entries
from neutrino.text.parsers import ToolCall

# An error's ResponseError code (the spec's closed set): what the client can act on.
_ERROR_CODES = {
    ErrorKind.QUEUE_FULL: "rate_limit_exceeded",
    ErrorKind.ENGINE_OVERLOADED: "rate_limit_exceeded",
    ErrorKind.KEY_CONCURRENCY: "rate_limit_exceeded",
    ErrorKind.RATE_LIMITED: "rate_limit_exceeded",
    ErrorKind.BAD_REQUEST: "invalid_prompt",
    ErrorKind.CONTEXT_LENGTH: "invalid_prompt",
}


def response_id(request_id: str) -> str:
    """The Response's id for a request's (``resp-…`` -> ``resp_…``)."""
    tail = request_id.partition("-")[2] or request_id
    return "resp_" + tail


def item_id(prefix: str, resp_id: str, index: int) -> str:
    """An output item's id: its kind (``rs``, ``msg``, ``fc``), its response, its place."""
    return f"{prefix}_{resp_id[5:]}_{index}"


def logprob_entries(
    entries: list[TokenLogprob] | LogprobColumns | None,
) -> list[dict[str, object]]:
    """The Responses API's logprobs: a stream's entries, or an answer's columns."""
    if isinstance(entries, LogprobColumns):
        entries = entries.entries()
    return chat_entries(entries) if entries else []


def reasoning_item(iid: str, text: str, status: str) -> dict[str, object]:
    return {
        "type": "reasoning",
        "id": iid,
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
        "status": status,
    }


def first_part(item: dict[str, object]) -> object:
    """The first content part of a message or reasoning item."""
    content = item["content"]
    return content[0] if isinstance(content, list) else None


def text_part(text: str, logprobs: list[dict[str, object]] | str) -> dict[str, object]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs}


def message_item(
    iid: str, status: str, text: str | None, logprobs: list[dict[str, object]] | str | None = None
) -> dict[str, object]:
    """A message item; ``text`` None: no content part yet (a streamed item just opened)."""
    content = [] if text is None else [text_part(text, [] if logprobs is None else logprobs)]
    return {"type": "message", "id": iid, "status": status, "role": "assistant", "content": content}


def call_item(
    iid: str, call: ToolCall, status: str, arguments: str | None = None
) -> dict[str, object]:
    return {
        "type": "function_call",
        "id": iid,
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments if arguments is None else arguments,
        "status": status,
    }


def end_status(outcome: Outcome) -> str:
    """The status of the item the answer ended in."""
    return "incomplete" if outcome.finish_reason == "length" else "completed"


def wants_message(text: str, outcome: Outcome) -> bool:
    """Whether the output has a message item: text, or nothing else to show."""
    return bool(text) or not outcome.tool_calls


def output_items(
    resp_id: str, text: str, outcome: Outcome, logprobs: list[dict[str, object]] | str | None = None
) -> list[dict[str, object]]:
    """A finished answer's output items (as its stream builds them); ``logprobs``, when
    given, stands in for the message's logprobs (a marker: pieces.py)."""
    items: list[dict[str, object]] = []
    message = wants_message(text, outcome)
    if outcome.reasoning:
        status = "completed" if message else end_status(outcome)
        items.append(reasoning_item(item_id("rs", resp_id, 0), outcome.reasoning, status))
    if message:
        iid = item_id("msg", resp_id, len(items))
        lps = logprob_entries(outcome.logprobs) if logprobs is None else logprobs
        items.append(message_item(iid, end_status(outcome), text, lps))
    for call in outcome.tool_calls:
        items.append(call_item(item_id("fc", resp_id, len(items)), call, "completed"))
    return items


def usage(outcome: Outcome) -> dict[str, object]:
    return {
        "input_tokens": outcome.prompt_tokens,
        "input_tokens_details": {"cached_tokens": outcome.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": outcome.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": outcome.reasoning_tokens or 0},
        "total_tokens": outcome.prompt_tokens + outcome.completion_tokens,
    }


def response_error(err: NeutrinoError) -> dict[str, object]:
    return {"code": _ERROR_CODES.get(err.kind, "server_error"), "message": err.message}


def response_object(
    echo: dict[str, object],
    resp_id: str,
    created_at: int,
    model: str,
    output: list[dict[str, object]],
    outcome: Outcome | None = None,
    error: NeutrinoError | None = None,
) -> dict[str, object]:
    """The Response: in progress (no outcome, no error), failed (``error``), or ended as
    ``outcome`` says (completed, or incomplete when cut by max_output_tokens)."""
    if error is not None:
        status = "failed"
    elif outcome is None:
        status = "in_progress"
    else:
        status = "incomplete" if outcome.finish_reason == "length" else "completed"
    resp = {
        "id": resp_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "completed_at": int(time.time()) if status == "completed" else None,
        "error": None if error is None else response_error(error),
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "model": model,
        "output": output,
        **echo,
    }
    if outcome is not None:  # the spec's usage is an object or absent, never null
        resp["usage"] = usage(outcome)
    return resp
