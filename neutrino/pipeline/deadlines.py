"""Request deadlines grouped into short buckets: one event-loop timer per bucket.

A timer per request costs a libuv timer start, stop and close on every request, most of
which end long before their deadline. Here a request joins the set of its bucket (50 ms
wide by default) and leaves it when it ends; one loop timer per bucket expires whatever
is still in it. A deadline fires at most one bucket width late.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

from neutrino.running import running_loop


class Deadline:
    """One pending deadline; ``cancel`` is idempotent (the TimerHandle contract)."""

    __slots__ = ("_bucket", "callback")

    def __init__(self, callback: Callable[[], None], bucket: set[Deadline]) -> None:
        self.callback: Callable[[], None] | None = callback
        self._bucket = bucket

    def cancel(self) -> None:
        if self.callback is not None:
            self.callback = None
            self._bucket.discard(self)

    def cancelled(self) -> bool:
        return self.callback is None


class DeadlineWheel:
    def __init__(self, resolution_s: float = 0.05) -> None:
        self.resolution_s = resolution_s
        self._buckets: dict[int, set[Deadline]] = {}
        # The loop of the first call, kept: Python 3.11's get_running_loop() costs a getpid().
        self._loop: asyncio.AbstractEventLoop | None = None

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Deadline:
        """Run ``callback`` once ``delay_s`` has passed (at most one bucket later).

        A wheel serves one event loop (the server's).
        """
        loop = self._loop
        if loop is None:
            loop = self._loop = running_loop()
        key = math.ceil((loop.time() + max(0.0, delay_s)) / self.resolution_s)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = set()
            loop.call_at(key * self.resolution_s, self._expire, key)
        entry = Deadline(callback, bucket)
        bucket.add(entry)
        return entry

    def _expire(self, key: int) -> None:
        for entry in self._buckets.pop(key, ()):
            callback = entry.callback
            if callback is not None:
                entry.callback = None
                callback()

    @property
    def pending(self) -> int:
        """Deadlines not yet fired or cancelled."""
        return sum(len(b) for b in self._buckets.values())

    @property
    def timers(self) -> int:
        """Loop timers in use (one per non-expired bucket)."""
        return len(self._buckets)
