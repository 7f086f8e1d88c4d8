"""A bounded ring of finished requests, for /neutrino/v1/history.

Entries keep the request's lifecycle object and a few counters; the JSON form is
built only when someone asks for it, not on the request path.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from neutrino.errors import NeutrinoError
from neutrino.pipeline.state import Lifecycle


@dataclass(slots=True)
class HistoryEntry:
    request_id: str
    model: str
    lifecycle: Lifecycle
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    error: NeutrinoError | None = None

    def to_dict(self) -> dict[str, Any]:
        lc = self.lifecycle
        err = self.error
        return {
            "id": self.request_id,
            "model": self.model,
            "state": lc.state.value,
            "created": lc.created_wall,
            "transitions": lc.transitions(),
            "timings": lc.timings(),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
            "error": {"kind": err.kind.spec.label, "message": err.message} if err else None,
        }


class History:
    def __init__(self, size: int) -> None:
        self._ring: deque[HistoryEntry] = deque(maxlen=max(1, size))
        self.total = 0

    def add(self, entry: HistoryEntry) -> None:
        self._ring.append(entry)
        self.total += 1

    def latest(self, limit: int) -> list[dict[str, Any]]:
        """Newest first, at most ``limit`` records."""
        if limit <= 0:
            return []
        out: list[dict[str, Any]] = []
        for entry in reversed(self._ring):
            out.append(entry.to_dict())
            if len(out) >= limit:
                break
        return out

    def __len__(self) -> int:
        return len(self._ring)
