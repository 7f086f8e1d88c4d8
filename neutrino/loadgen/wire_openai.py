"""OpenAI chat completions on the wire (sans-IO): the request body, and the answer read
into a :class:`Probe`, streamed (SSE events) or whole. Shared by HTTP/1.1 and HTTP/3."""

from __future__ import annotations

import json
from typing import Any

from neutrino.loadgen.api import Api, Params
from neutrino.loadgen.errors import http_failure, stream_failure
from neutrino.loadgen.jsonio import count, json_object
from neutrino.loadgen.probe import Probe
from neutrino.loadgen.prompts import Prompt

PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"


def body(prompt: Prompt, params: Params) -> bytes:
    req: dict[str, Any] = {
        "model": params.model,
        "messages": [{"role": r, "content": t} for r, t in prompt.messages],
    }
    if prompt.max_tokens is not None:
        req["max_tokens"] = prompt.max_tokens
    if params.temperature is not None:
        req["temperature"] = params.temperature
    if params.ignore_eos:
        req["ignore_eos"] = True
    if params.stream:
        req["stream"] = True
        req["stream_options"] = {"include_usage": True}
    return json.dumps(req).encode()


def headers(api_key: str | None) -> dict[str, str]:
    out = {"content-type": "application/json"}
    if api_key:
        out["authorization"] = f"Bearer {api_key}"
    return out


def first_model(body: bytes) -> str | None:
    """The first model a ``/v1/models`` answer lists."""
    data = json_object(body).get("data")
    if isinstance(data, list) and data and isinstance(data[0], dict):
        model = data[0].get("id")
        return model if isinstance(model, str) else None
    return None


def answered_model(status: int, body: bytes) -> str | None:
    """The first model of a ``/v1/models`` answer of ``status`` (RequestFailed if not 200)."""
    if status != 200:
        raise http_failure(status, body)
    return first_model(body)


class ChatStream:
    """Reads a streamed answer's events; ``done`` once ``[DONE]`` arrived."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.done = False

    def event(self, name: str, data: str) -> None:
        if data.strip() == "[DONE]":
            self.done = True
            return
        obj = json_object(data)
        if "error" in obj:
            raise stream_failure(obj)
        for choice in obj.get("choices") or ():
            delta = choice.get("delta") or {}
            content = delta.get("content") or ""
            other = delta.get("reasoning_content") or delta.get("reasoning") or ""
            calls = delta.get("tool_calls")
            if content or other or calls:
                self.probe.chunk(content)
        _usage(obj, self.probe)


def read_whole(data: bytes, probe: Probe) -> None:
    """A non-streamed answer: its text and usage."""
    obj = json_object(data)
    for choice in obj.get("choices") or ():
        message = choice.get("message") or {}
        probe.keep(message.get("content") or "")
    _usage(obj, probe)


def _usage(obj: dict[str, Any], probe: Probe) -> None:
    usage = obj.get("usage")
    if isinstance(usage, dict):
        probe.usage(count(usage.get("prompt_tokens")), count(usage.get("completion_tokens")))


API = Api(PATH, body, headers, ChatStream, read_whole)
