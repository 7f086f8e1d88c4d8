"""The mock engine's event log: one JSON object per line, flushed as it happens.

Every line has ``event`` (connect, hello, query, cancel, ping, disconnect, finish),
``conn`` (connection number, from 1) and ``t`` (``time.time()``); the other fields
depend on the event (``request_id``, ``model``, ``prompt_tokens``, ``max_tokens``,
``seed``, ``reason``, ``finish_reason``, ...); a query's carries the ``traceparent`` its
frame had ("" for none), a text query's also its prompt's token ids (``prompt_ids``) and
how many images came with it (``images``) and of forced tokens (``forced_tokens``: the
answer so far of a request moved from another replica).
"""

from __future__ import annotations

import json
import os
import time
from typing import IO, Any


class EventLog:
    """Appends events to a file (or does nothing when ``path`` is None)."""

    __slots__ = ("_file",)

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self._file: IO[str] | None = (
            open(path, "a", encoding="utf-8") if path is not None else None  # noqa: SIM115
        )

    @property
    def enabled(self) -> bool:
        return self._file is not None

    def emit(self, event: str, conn: int, **fields: Any) -> None:
        f = self._file
        if f is None:
            return
        record: dict[str, Any] = {"event": event, "conn": conn}
        record.update(fields)
        record["t"] = time.time()
        f.write(json.dumps(record, ensure_ascii=False) + "\n")
        f.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_events(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every complete event in the log at ``path`` (none if the file does not exist yet)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return []
    events: list[dict[str, Any]] = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line still being written
        if isinstance(record, dict):
            events.append(record)
    return events
