"""A server-sent events decoder (sans-IO): bytes in, ``(event, data)`` pairs out."""

from __future__ import annotations

MAX_EVENT_BYTES = 16 * 1024 * 1024


class SSEError(ValueError):
    """A stream that breaks the event format's limits."""


class SSEDecoder:
    """Feed the body's bytes as they arrive; each call returns the events it completed.
    Lines end in LF or CRLF; ``data`` lines of one event are joined with LF; comments
    (``:``) and fields other than ``event`` and ``data`` are skipped."""

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._buf = bytearray()
        self._event = ""
        self._data: list[str] = []
        self._size = 0
        self._max = max_event_bytes

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        self._buf += chunk
        out: list[tuple[str, str]] = []
        start = 0
        while (end := self._buf.find(b"\n", start)) >= 0:
            line = bytes(self._buf[start:end]).rstrip(b"\r")
            start = end + 1
            self._line(line.decode("utf-8", "replace"), out)
        del self._buf[:start]
        if len(self._buf) + self._size > self._max:
            raise SSEError(f"an event longer than {self._max} bytes")
        return out

    def _line(self, line: str, out: list[tuple[str, str]]) -> None:
        if not line:
            if self._data:
                out.append((self._event or "message", "\n".join(self._data)))
            self._event, self._data, self._size = "", [], 0
            return
        if line.startswith(":"):
            return
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
            self._size += len(value)
        elif name == "event":
            self._event = value
