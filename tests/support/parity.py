"""The parity suite's common language: one answer, whatever protocol carried it.

Each protocol's answer (OpenAI chat JSON or its SSE chunks, Anthropic's message or its
events, the Responses API's response or its events, gRPC messages) is read into an
:class:`Answer`; the suite then compares the answers of one request across protocols.
The requests themselves are written once, as an OpenAI chat body, and translated here
into each protocol's request the way a client of that protocol would write it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from neutrino.errors import ErrorKind


def kinds_of_http(status: int, body: dict[str, Any]) -> frozenset[str]:
    """The error kinds (ErrorKind names) an HTTP error with OpenAI's JSON can stand for."""
    code = (body.get("error") or {}).get("code")
    return frozenset(
        k.name for k in ErrorKind if k.spec.http_status == status and k.spec.code == code
    )


def kinds_of_stream_error(error: dict[str, Any]) -> frozenset[str]:
    """The kinds an OpenAI stream's error event can stand for (its type and code)."""
    return frozenset(
        k.name
        for k in ErrorKind
        if k.spec.type == error.get("type") and k.spec.code == error.get("code")
    )


def kinds_of_grpc(code_name: str) -> frozenset[str]:
    """The kinds a gRPC status can stand for."""
    return frozenset(k.name for k in ErrorKind if k.spec.grpc == code_name)


@dataclass
class Choice:
    text: str = ""
    reasoning: str = ""
    calls: list[tuple[str, Any]] = field(default_factory=list)  # (name, parsed arguments)
    finish: str | None = None  # stop | length | tool_calls
    logprobs: list[tuple[str, float, list[str]]] | None = None  # token, logprob, top tokens


@dataclass
class Answer:
    choices: list[Choice] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # The error kinds (ErrorKind names) the answer's error can stand for; None: no error.
    # Protocols with fewer error classes than Neutrino (gRPC statuses, Anthropic's types)
    # map several kinds to one: the suite checks the kind the HTTP answer names is in it.
    error: frozenset[str] | None = None

    @property
    def one(self) -> Choice:
        assert len(self.choices) == 1, self
        return self.choices[0]


def _calls(raw: list[dict[str, Any]] | None) -> list[tuple[str, Any]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in raw or []]


def _chat_logprobs(lp: dict[str, Any] | None) -> list[tuple[str, float, list[str]]] | None:
    if lp is None:
        return None
    return [
        (e["token"], round(e["logprob"], 4), [t["token"] for t in e.get("top_logprobs") or []])
        for e in lp.get("content") or []
    ]


def openai_answer(status: int, body: dict[str, Any]) -> Answer:
    """A chat completion (or OpenAI's error JSON) as an answer."""
    if status != 200:
        return Answer(error=kinds_of_http(status, body))
    out = Answer(
        prompt_tokens=body["usage"]["prompt_tokens"],
        completion_tokens=body["usage"]["completion_tokens"],
    )
    for c in sorted(body["choices"], key=lambda c: c["index"]):
        msg = c["message"]
        out.choices.append(
            Choice(
                text=msg.get("content") or "",
                reasoning=msg.get("reasoning_content") or "",
                calls=_calls(msg.get("tool_calls")),
                finish=c["finish_reason"],
                logprobs=_chat_logprobs(c.get("logprobs")),
            )
        )
    return out


def sse_events(raw: bytes) -> list[tuple[str, str]]:
    """(event name or "", data) of each SSE event in ``raw``; comments skipped."""
    out = []
    for block in raw.decode().replace("\r\n", "\n").split("\n\n"):
        name, data = "", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            out.append((name, "\n".join(data)))
    return out


def openai_stream_answer(status: int, raw: bytes) -> Answer:
    """A streamed chat completion (with ``include_usage``), added up as a client does."""
    if status != 200:
        return openai_answer(status, json.loads(raw))
    out = Answer()
    calls: dict[int, dict[int, dict[str, str]]] = {}
    by_index: dict[int, Choice] = {}
    for _, data in sse_events(raw):
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if "error" in chunk:
            return Answer(error=kinds_of_stream_error(chunk["error"]))
        if chunk.get("usage"):
            out.prompt_tokens = chunk["usage"]["prompt_tokens"]
            out.completion_tokens = chunk["usage"]["completion_tokens"]
        for c in chunk["choices"]:
            choice = by_index.setdefault(c["index"], Choice())
            delta = c.get("delta") or {}
            choice.text += delta.get("content") or ""
            choice.reasoning += delta.get("reasoning_content") or ""
            for d in delta.get("tool_calls") or []:
                call = calls.setdefault(c["index"], {}).setdefault(
                    d["index"], {"name": "", "arguments": ""}
                )
                fn = d.get("function") or {}
                call["name"] += fn.get("name") or ""
                call["arguments"] += fn.get("arguments") or ""
            lp = _chat_logprobs(c.get("logprobs"))
            if lp is not None:
                choice.logprobs = (choice.logprobs or []) + lp
            choice.finish = c.get("finish_reason") or choice.finish
    for i, choice in by_index.items():
        choice.calls = [
            (c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.get(i, {}).items())
        ]
        out.choices.append(choice)
    out.choices = [by_index[i] for i in sorted(by_index)]
    return out
