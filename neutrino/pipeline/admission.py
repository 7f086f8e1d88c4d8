"""Admission control: a bounded FIFO queue in front of a bounded in-flight set."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable

from neutrino.errors import ErrorKind, NeutrinoError


class Admission:
    def __init__(self, max_queue: int, limit: Callable[[], int]) -> None:
        self.max_queue = max_queue
        self._limit = limit
        self.inflight = 0
        self._waiting: deque[asyncio.Future[None]] = deque()

    @property
    def queued(self) -> int:
        return len(self._waiting)

    @property
    def full(self) -> bool:
        return len(self._waiting) >= self.max_queue

    def _room(self) -> bool:
        return self.inflight < max(1, self._limit())

    def try_acquire(self) -> bool:
        """Take a slot at once if one is free and nobody is waiting."""
        if not self._waiting and self._room():
            self.inflight += 1
            return True
        return False

    async def acquire(self) -> None:
        """Wait in FIFO order for a slot; raises QUEUE_FULL if the queue is full."""
        if self.try_acquire():
            return
        if len(self._waiting) >= self.max_queue:
            raise NeutrinoError(ErrorKind.QUEUE_FULL, "the server is at capacity; retry later")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.release()  # the slot was handed to us as we were cancelled
            else:
                with contextlib.suppress(ValueError):
                    self._waiting.remove(fut)
            raise

    def release(self) -> None:
        self.inflight -= 1
        self.wake()

    def fail_waiters(self, error: NeutrinoError) -> int:
        """Refuse every queued request with ``error`` (a shutdown); how many there were."""
        waiting, self._waiting = self._waiting, deque()
        for fut in waiting:
            if not fut.done():
                fut.set_exception(error.fresh())
        return len(waiting)

    def wake(self) -> None:
        """Hand free slots to waiters (also called when capacity grows)."""
        while self._waiting and self._room():
            fut = self._waiting.popleft()
            if not fut.done():
                self.inflight += 1
                fut.set_result(None)
