"""Admission control: a bounded FIFO queue in front of a bounded in-flight set."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable

from neutrino.errors import ErrorKind, NeutrinoError


def _shutting_down() -> NeutrinoError:
    return NeutrinoError(ErrorKind.SHUTTING_DOWN, "the server is shutting down")


class Admission:
    def __init__(self, max_queue: int, limit: Callable[[], int]) -> None:
        self.max_queue = max_queue
        self._limit = limit
        self.inflight = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        self.closed = False  # a shutdown ended the queue: no slot is handed out any more

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

    async def enter(
        self, timeout: float, on_queued: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """Take a slot, waiting in the queue up to ``timeout`` seconds if need be;
        ``on_queued`` is awaited first when the request has to wait."""
        if self.closed:
            raise _shutting_down()
        if self.try_acquire():
            return
        if self.full:
            raise NeutrinoError(ErrorKind.QUEUE_FULL, "the server is at capacity; retry later")
        if on_queued is not None:
            await on_queued()
        try:
            async with asyncio.timeout(timeout):
                await self.acquire()
        except TimeoutError:
            raise NeutrinoError(
                ErrorKind.TIMEOUT, "the request timed out waiting in the queue"
            ) from None
        if self.closed:  # handed a slot just before the shutdown ended the queue
            self.release()
            raise _shutting_down()

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
