"""A bounded ring of finished requests, for /neutrino/v1/history."""

from __future__ import annotations

from collections import deque
from typing import Any


class History:
    def __init__(self, size: int) -> None:
        self._ring: deque[dict[str, Any]] = deque(maxlen=max(1, size))
        self.total = 0

    def add(self, record: dict[str, Any]) -> None:
        self._ring.append(record)
        self.total += 1

    def latest(self, limit: int) -> list[dict[str, Any]]:
        """Newest first, at most ``limit`` records."""
        if limit <= 0:
            return []
        out: list[dict[str, Any]] = []
        for rec in reversed(self._ring):
            out.append(rec)
            if len(out) >= limit:
                break
        return out

    def __len__(self) -> int:
        return len(self._ring)
