"""Raw HTTP/1.1 for tests that need what a client library will not do: never read,
dribble a head, send HTTP/1.0, or read a connection to its very end."""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping


def chat_request(
    fields: Mapping[str, object] | None = None, model: str = "qwen2.5-mock", version: str = "1.1"
) -> bytes:
    """A whole ``POST /v1/chat/completions`` (a greeting, unless ``fields`` say more)."""
    body = json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "hi"}], **(fields or {})}
    ).encode()
    return (
        f"POST /v1/chat/completions HTTP/{version}\r\nHost: x\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def read_all(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out
