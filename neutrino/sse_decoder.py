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
        self._buf = b""
        self._event = ""
        self._data: list[str] = []
        self._size = 0
        self._max = max_event_bytes

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        buf = self._buf + chunk if self._buf else chunk
        out: list[tuple[str, str]] = []
        start = 0
        if not self._data and not self._event:
            start = self._whole_events(buf, out)
        while (end := buf.find(b"\n", start)) >= 0:  # the rest, line by line
            line = buf[start:end].rstrip(b"\r")
            start = end + 1
            self._line(line.decode("utf-8", "replace"), out)
        self._buf = buf[start:]
        if len(self._buf) + self._size > self._max:
            raise SSEError(f"an event longer than {self._max} bytes")
        return out

    def _whole_events(self, buf: bytes, out: list[tuple[str, str]]) -> int:
        """The events that end in ``buf`` with a blank line (LF line ends), from its
        start: one ``data`` line each, as servers mostly send them, taken at once;
        where the next event starts."""
        start = 0
        while (end := buf.find(b"\n\n", start)) >= 0:
            block = buf[start:end]
            start = end + 2
            if block[:5] == b"data:" and b"\n" not in block and b"\r" not in block:
                value = block[6:] if block[5:6] == b" " else block[5:]
                out.append(("message", value.decode("utf-8", "replace")))
                continue
            for line in block.split(b"\n"):
                self._line(line.rstrip(b"\r").decode("utf-8", "replace"), out)
            self._line("", out)
        return start

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
