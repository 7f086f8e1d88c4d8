"""A bounded ring of finished requests, for /neutrino/v1/history.

An entry is a snapshot of counts, timings and short strings, taken when the request
ends: never the request, its prompt, its tokens or an exception (whose traceback would
keep every local of the frames it passed through, the parsed body and the token list
among them). The ring is bounded in entries and in bytes: strings a client chose (the
request id, the model name, an error message that quotes them) are cut to a few hundred
characters and counted. The JSON form is built only when someone asks for it.
"""

from __future__ import annotations

import sys
from collections import deque
from dataclasses import dataclass
from typing import Any

from neutrino.errors import NeutrinoError
from neutrino.pipeline.state import Lifecycle

MAX_TEXT = 256  # characters kept of each client-chosen string
_ENTRY_BYTES = 400  # an entry's own objects, beside its strings (measured: ~330)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    request_id: str
    model: str
    state: str
    created: float
    # (state, nanoseconds since the request started), in the order entered.
    transitions: tuple[tuple[str, int], ...]
    timings: tuple[float, float, float, float]  # queue, prompt, completion, total
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    error_kind: str | None = None
    error_message: str | None = None

    @classmethod
    def of(
        cls,
        request_id: str,
        model: str,
        lifecycle: Lifecycle,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        finish_reason: str | None = None,
        error: NeutrinoError | None = None,
    ) -> HistoryEntry:
        """The snapshot of a request that has ended (only strings and numbers are kept)."""
        t0 = lifecycle.times[next(iter(lifecycle.times))]
        timings = lifecycle.timings()
        return cls(
            request_id=_cut(request_id),
            model=_cut(model),
            state=lifecycle.state.value,
            created=lifecycle.created_wall,
            transitions=tuple((s.value, t - t0) for s, t in lifecycle.times.items()),
            timings=(
                timings["queue_time"],
                timings["prompt_time"],
                timings["completion_time"],
                timings["total_time"],
            ),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            finish_reason=finish_reason,
            error_kind=error.kind.spec.label if error is not None else None,
            error_message=_cut(error.message) if error is not None else None,
        )

    @property
    def nbytes(self) -> int:
        """What this entry holds, roughly: its objects and its strings."""
        text = len(self.request_id) + len(self.model) + len(self.error_message or "")
        return _ENTRY_BYTES + 48 * len(self.transitions) + text

    def to_dict(self) -> dict[str, Any]:
        queue, prompt, completion, total = self.timings
        return {
            "id": self.request_id,
            "model": self.model,
            "state": self.state,
            "created": self.created,
            "transitions": [(s, t / 1e9) for s, t in self.transitions],
            "timings": {
                "queue_time": queue,
                "prompt_time": prompt,
                "completion_time": completion,
                "total_time": total,
            },
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
            "error": {"kind": self.error_kind, "message": self.error_message}
            if self.error_kind is not None
            else None,
        }


class History:
    """The last ``size`` finished requests, within ``max_bytes`` in all."""

    def __init__(self, size: int, max_bytes: int = sys.maxsize) -> None:
        self._ring: deque[HistoryEntry] = deque()
        self._size = max(1, size)
        self._max_bytes = max_bytes
        self.nbytes = 0
        self.total = 0

    def add(self, entry: HistoryEntry) -> None:
        ring = self._ring
        ring.append(entry)
        self.nbytes += entry.nbytes
        self.total += 1
        while len(ring) > self._size or (self.nbytes > self._max_bytes and len(ring) > 1):
            self.nbytes -= ring.popleft().nbytes

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
