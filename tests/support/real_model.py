"""Checks that hold for any real model behind Neutrino (the llama.cpp engine, an HTTP
upstream in token mode): what Neutrino itself does to a real model's answers."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import openai


def check_stop_string(client: openai.OpenAI, model: str) -> None:
    """A stop string cuts the greedy answer where it first occurs (after its first
    character), and the choice ends with ``stop``: Neutrino applies stops itself."""
    messages: Any = [{"role": "user", "content": "Count from one to ten in words."}]
    free = client.chat.completions.create(
        model=model, messages=messages, max_tokens=40, temperature=0
    )
    text = free.choices[0].message.content or ""
    stop = next(w for w in (",", " ", "e") if w in text[1:])
    cut = client.chat.completions.create(
        model=model, messages=messages, max_tokens=40, temperature=0, stop=[stop]
    )
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].message.content == text[: text.index(stop, 1)]


def post_json(url: str, doc: dict[str, Any]) -> Any:
    """POST ``doc`` to a server (an upstream, straight) and decode its JSON answer."""
    req = urllib.request.Request(
        url, data=json.dumps(doc).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def sse_data(url: str, doc: dict[str, Any]) -> list[str]:
    """POST ``doc`` for a streamed answer: its SSE data fields, in order, read raw."""
    req = urllib.request.Request(
        url, data=json.dumps(doc).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.headers["Content-Type"].startswith("text/event-stream")
        return [line[6:].decode().rstrip("\r\n") for line in r if line.startswith(b"data: ")]


def chat_deltas(events: list[str]) -> list[Any]:
    """Each chat chunk's first choice's (delta, finish reason), of ``sse_data``'s events."""
    chunks = [json.loads(e) for e in events if e != "[DONE]"]
    return [
        (c["choices"][0]["delta"], c["choices"][0]["finish_reason"]) for c in chunks if c["choices"]
    ]
