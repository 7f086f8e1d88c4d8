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
from typing import NamedTuple, Protocol

from neutrino.errors import NeutrinoError
from neutrino.pipeline.state import Lifecycle, State

MAX_TEXT = 256  # characters kept of each client-chosen string
_ENTRY_BYTES = 400  # an entry's own objects, beside its strings (measured: ~330)


class Spent(NamedTuple):
    """What an ended request used and how it ended, whatever kind of call it was: read
    once at its end for its usage, metrics, span and history entry."""

    prompt_tokens: int
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    finish_reason: str | None = None


class Ended(Protocol):
    """A call that reached an engine and has ended (a Generation, ModalCall, RelayCall)."""

    request_id: str
    model: str
    lifecycle: Lifecycle
    route: str
    hops: list[tuple[str, str]] | None

    @property
    def error(self) -> NeutrinoError | None: ...

    def spent(self) -> Spent: ...


def moves(hops: list[tuple[str, str]]) -> list[str]:
    """Where an answer moved, and why, as history and spans name it: ``engine (why)``."""
    return [f"{engine} ({why})" for engine, why in hops]


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


@dataclass(slots=True)
class HistoryEntry:
    """A finished request: plain strings and numbers, and the monotonic times of its
    states (the lifecycle's own small dict, which holds nothing else)."""

    request_id: str
    model: str
    state: str
    created: float
    times: dict[str, int]  # state -> monotonic nanoseconds, in the order entered
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    error_kind: str | None = None
    error_message: str | None = None
    key: str | None = None  # the name of the API key that made it (never the key)
    route: str | None = None  # how a manifest route sent it (alias; intent; model)
    hops: list[str] | None = None  # engines its answer moved to mid-stream, and why

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
        """The snapshot of a request that has ended (cheap: it is taken per request;
        the JSON form is built when asked for)."""
        return cls(
            request_id if len(request_id) <= MAX_TEXT else _cut(request_id),
            model if len(model) <= MAX_TEXT else _cut(model),
            lifecycle.state._value_,
            lifecycle.created_wall,
            lifecycle.times,
            prompt_tokens,
            completion_tokens,
            finish_reason,
            None if error is None else error.kind.spec.label,
            None if error is None else _cut(error.message),
        )

    @classmethod
    def of_ended(cls, call: Ended, spent: Spent) -> HistoryEntry:
        """The entry of a call that reached an engine, from what it ``spent``."""
        entry = cls.of(
            call.request_id,
            call.model,
            call.lifecycle,
            spent.prompt_tokens,
            spent.completion_tokens,
            spent.finish_reason,
            call.error,
        )
        if call.route:
            entry.route = call.route
        if call.hops:
            entry.hops = moves(call.hops)
        return entry

    @property
    def nbytes(self) -> int:
        """What this entry holds, roughly: its objects and its strings."""
        text = len(self.request_id) + len(self.model) + len(self.error_message or "")
        text += len(self.route or "")
        if self.hops:
            text += sum(56 + len(h) for h in self.hops)
        return _ENTRY_BYTES + 48 * len(self.times) + text

    def to_dict(self) -> dict[str, object]:
        lc = Lifecycle.__new__(Lifecycle)  # the timings' arithmetic, over the kept times
        lc.state = State(self.state)
        lc.times = self.times
        t0 = next(iter(self.times.values()))
        return {
            "id": self.request_id,
            "model": self.model,
            "state": self.state,
            "created": self.created,
            "transitions": [(str(s), (t - t0) / 1e9) for s, t in self.times.items()],
            "timings": lc.timings(),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
            "key": self.key,
            "route": self.route,
            **({"migrated_to": self.hops} if self.hops else {}),
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

    def latest(self, limit: int) -> list[dict[str, object]]:
        """Newest first, at most ``limit`` records."""
        if limit <= 0:
            return []
        out: list[dict[str, object]] = []
        for entry in reversed(self._ring):
            out.append(entry.to_dict())
            if len(out) >= limit:
                break
        return out

    def __len__(self) -> int:
        return len(self._ring)
