"""Admission control: a bounded queue in front of a bounded in-flight set.

The queue's order is :mod:`neutrino.pipeline.fairness`: higher priorities first, fair
shares by tokens among the keys of one priority, ageing. Each request brings a
:class:`Ticket` (its key, priority and token estimate); the tokens are charged to its key
when it is admitted and corrected when it ends (:meth:`Admission.settle`).

The last ``reserved`` free slots go only to keys that hold none: a key that comes to a
queue another key keeps full is served when one of those slots is free, not after an
answer already running ends (no engine preempts one). They cost the busy keys those
slots while no other key comes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from neutrino.config import KeyConfig
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.pipeline.fairness import FairQueue


def _shutting_down() -> NeutrinoError:
    return NeutrinoError(ErrorKind.SHUTTING_DOWN, "the server is shutting down")


def _full() -> NeutrinoError:
    return NeutrinoError(ErrorKind.QUEUE_FULL, "the server is at capacity; retry later")


def _shed() -> NeutrinoError:
    return NeutrinoError(
        ErrorKind.QUEUE_FULL,
        "the server is at capacity: a request of higher priority took this one's place in "
        "the queue; retry later",
    )


@dataclass(slots=True)
class Ticket:
    """A request's place in the fair shares: whose, how urgent, the tokens it is charged."""

    tenant: str = ""  # its key's name ("": keys are off)
    priority: int = 0
    tokens: int = 0  # charged at admission: its prompt and an estimate of its answer
    admitted: bool = False
    rated: KeyConfig | None = None  # the key whose rate limits counted it (pipeline/quota.py)
    rated_tokens: int = 0  # the tokens they counted


OPEN = Ticket()  # a request that brings none (the modal routes' default)

_Entry = tuple[asyncio.Future[None], Ticket]


class Admission:
    def __init__(
        self,
        max_queue: int,
        limit: Callable[[], int],
        age_s: float = 30.0,
        decay_s: float = 60.0,
        reserved: int = 0,
    ) -> None:
        self.max_queue = max_queue
        self._limit = limit
        self.inflight = 0
        self.reserved = reserved  # the last free slots kept for keys holding none
        self._held: dict[str, int] = {}  # a key's requests holding slots
        self._waiting: FairQueue[_Entry] = FairQueue(age_s, decay_s)
        self.closed = False  # a shutdown ended the queue: no slot is handed out any more
        self.shed = 0  # queued requests dropped for ones of higher priority

    def tune(self, max_queue: int, age_s: float, decay_s: float, reserved: int = 0) -> None:
        """A reload's bounds (the queue and its tenants' usage stay)."""
        self.max_queue = max_queue
        self.reserved = reserved
        self._waiting.age_s, self._waiting.decay_s = age_s, decay_s
        self.wake()

    @property
    def queued(self) -> int:
        return len(self._waiting)

    @property
    def full(self) -> bool:
        return len(self._waiting) >= self.max_queue

    def _free(self) -> int:
        return max(1, self._limit()) - self.inflight

    def _holds_none(self, tenant: str) -> bool:
        """May ``tenant`` take a reserved slot (keys off: one tenant, nothing reserved)."""
        return not tenant or tenant not in self._held

    def _admit(self, ticket: Ticket) -> None:
        self.inflight += 1
        ticket.admitted = True
        tenant = ticket.tenant
        if tenant:  # (keys off: one tenant, nothing to share)
            self._held[tenant] = self._held.get(tenant, 0) + 1
            self._waiting.charge(tenant, ticket.tokens, time.monotonic())

    def try_acquire(self, ticket: Ticket = OPEN) -> bool:
        """Take a slot at once if one is free and nobody waits who may take it (those
        waiting may only be kept from the reserved slots)."""
        free = self._free()
        if free <= 0:
            return False
        if free > self.reserved:
            ok = not self._waiting
        else:
            ok = self._holds_none(ticket.tenant) and not self._waiting.has(self._holds_none)
        if ok:
            self._admit(ticket)
        return ok

    def _may_queue(self, priority: int) -> bool:
        """Room in the queue for one of ``priority``: it is not full, or a lower
        priority waits that may be shed."""
        if len(self._waiting) < self.max_queue:
            return True
        lowest = self._waiting.lowest()
        return self.max_queue > 0 and lowest is not None and lowest < priority

    async def acquire(self, ticket: Ticket = OPEN) -> None:
        """Wait in the queue's order for a slot; raises QUEUE_FULL if the queue is full
        (after shedding a lower priority's newest waiter, if one is queued)."""
        if self.try_acquire(ticket):
            return
        queue = self._waiting
        if len(queue) >= self.max_queue:
            shed = queue.shed_for(ticket.priority, time.monotonic()) if self.max_queue else None
            if shed is None:
                raise _full()
            self.shed += 1
            if not shed.item[0].done():
                shed.item[0].set_exception(_shed())
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = queue.push((fut, ticket), ticket.tenant, ticket.priority, time.monotonic())
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.release(ticket)  # the slot was handed to us as we were cancelled
            else:
                queue.remove(waiter)
            raise

    async def enter(
        self,
        timeout: float,
        on_queued: Callable[[], Awaitable[None]] | None = None,
        ticket: Ticket = OPEN,
    ) -> None:
        """Take a slot, waiting in the queue up to ``timeout`` seconds if need be;
        ``on_queued`` is awaited first when the request has to wait."""
        if self.closed:
            raise _shutting_down()
        if self.try_acquire(ticket):
            return
        if not self._may_queue(ticket.priority):
            raise _full()
        if on_queued is not None:
            await on_queued()
        try:
            async with asyncio.timeout(timeout):
                await self.acquire(ticket)
        except TimeoutError:
            raise NeutrinoError(
                ErrorKind.TIMEOUT, "the request timed out waiting in the queue"
            ) from None
        if self.closed:  # handed a slot just before the shutdown ended the queue
            self.release(ticket)
            raise _shutting_down()

    def settle(self, ticket: Ticket, used: int) -> None:
        """A request admitted with ``ticket`` ended having used ``used`` tokens: its key's
        share is corrected by the difference from the estimate."""
        if ticket.admitted and ticket.tenant and used != ticket.tokens:
            self._waiting.charge(ticket.tenant, used - ticket.tokens, time.monotonic())
            ticket.tokens = used

    def release(self, ticket: Ticket = OPEN) -> None:
        """A slot taken with ``ticket`` is free again."""
        self.inflight -= 1
        tenant = ticket.tenant
        if tenant:
            held = self._held[tenant] - 1
            if held:
                self._held[tenant] = held
            else:
                del self._held[tenant]
        self.wake()

    def fail_waiters(self, error: NeutrinoError) -> int:
        """Refuse every queued request with ``error`` (a shutdown); how many there were."""
        waiting = self._waiting.drain()
        for w in waiting:
            if not w.item[0].done():
                w.item[0].set_exception(error.fresh())
        return len(waiting)

    def wake(self) -> None:
        """Hand free slots to waiters (also called when capacity grows)."""
        queue = self._waiting
        while queue and (free := self._free()) > 0:
            allow = None if free > self.reserved else self._holds_none
            waiter = queue.pop(time.monotonic(), allow)
            if waiter is None:
                break
            fut, ticket = waiter.item
            if not fut.done():
                self._admit(ticket)
                fut.set_result(None)

    def usage(self) -> dict[str, float]:
        """Each key's attained tokens, as the fair shares weigh them."""
        return self._waiting.usage(time.monotonic())
