"""Anthropic's Messages API on the wire (sans-IO): the request body, and the answer read into
a :class:`Probe`, streamed (typed SSE events) or whole."""

from __future__ import annotations

import json
from typing import Any

from neutrino.loadgen.api import Api, Params
from neutrino.loadgen.errors import stream_failure
from neutrino.loadgen.jsonio import count, json_object
from neutrino.loadgen.probe import Probe
from neutrino.loadgen.prompts import Prompt

PATH = "/v1/messages"
VERSION = "2023-06-01"
# Delta types that carry generated output (text, thinking, a tool call's arguments).
_OUTPUT_DELTAS = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": ""}


def body(prompt: Prompt, params: Params) -> bytes:
    if prompt.max_tokens is None:
        raise ValueError("the Messages API needs max_tokens")
    req: dict[str, Any] = {
        "model": params.model,
        "max_tokens": prompt.max_tokens,
        "messages": [{"role": r, "content": t} for r, t in prompt.turns],
    }
    if prompt.system:
        req["system"] = prompt.system
    if params.temperature is not None:
        req["temperature"] = params.temperature
    if params.stream:
        req["stream"] = True
    return json.dumps(req).encode()


def headers(api_key: str | None) -> dict[str, str]:
    out = {"content-type": "application/json", "anthropic-version": VERSION}
    if api_key:
        out["x-api-key"] = api_key
    return out


class MessageStream:
    """Reads a streamed answer's events; ``done`` once ``message_stop`` arrived."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.done = False

    def event(self, name: str, data: str) -> None:
        obj = json_object(data)
        kind = obj.get("type", name)
        if kind == "error":
            raise stream_failure(obj)
        if kind == "message_start":
            _usage((obj.get("message") or {}).get("usage"), self.probe)
        elif kind == "content_block_delta":
            delta = obj.get("delta") or {}
            field = _OUTPUT_DELTAS.get(delta.get("type", ""))
            if field is not None:
                text = delta.get(field) if field == "text" else ""
                self.probe.chunk(text if isinstance(text, str) else "")
        elif kind == "message_delta":
            _usage(obj.get("usage"), self.probe)
        elif kind == "message_stop":
            self.done = True


def read_whole(data: bytes, probe: Probe) -> None:
    obj = json_object(data)
    for block in obj.get("content") or ():
        if isinstance(block, dict) and block.get("type") == "text":
            probe.keep(block.get("text") or "")
    _usage(obj.get("usage"), probe)


def _usage(usage: Any, probe: Probe) -> None:
    if isinstance(usage, dict):
        probe.usage(count(usage.get("input_tokens")), count(usage.get("output_tokens")))


API = Api(PATH, body, headers, MessageStream, read_whole)
