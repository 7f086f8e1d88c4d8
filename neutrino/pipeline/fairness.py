"""The admission queue's order: priorities first, then fair shares among keys, with ageing.

A sans-IO core (no clock, no futures of its own: callers pass ``now`` and hold what each
:class:`Waiter` stands for). Waiters wait in one FIFO per (priority, tenant). The next
served is the head of the queue with the highest *effective* priority: its own plus one
level for every ``age_s`` its head has waited (ageing: no request starves behind a
stream of higher ones). Among equals, the tenant that has used the fewest tokens lately
goes first (least attained service: each tenant's tokens, decaying by half every
``decay_s``, charged at admission with an estimate and corrected at the end), then the
one that waited longest. A full queue sheds its lowest priority first: the newest
waiter of the heaviest tenant at the lowest level, when that level is below the
newcomer's.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(slots=True, eq=False)
class Waiter(Generic[T]):
    """One queued request: what it stands for (``item``), whose, how urgent, since when."""

    item: T
    tenant: str
    priority: int
    since: float


@dataclass(slots=True)
class _Usage:
    tokens: float = 0.0
    at: float = 0.0


@dataclass(slots=True)
class FairQueue(Generic[T]):
    age_s: float = 30.0  # a level gained per this long waited (0: no ageing)
    decay_s: float = 60.0  # a tenant's attained tokens halve in this long
    _queues: dict[tuple[int, str], deque[Waiter[T]]] = field(default_factory=dict)
    _usage: dict[str, _Usage] = field(default_factory=dict)
    _size: int = 0

    def __len__(self) -> int:
        return self._size

    def push(self, item: T, tenant: str, priority: int, now: float) -> Waiter[T]:
        waiter = Waiter(item, tenant, priority, now)
        queue = self._queues.get((priority, tenant))
        if queue is None:
            queue = self._queues[(priority, tenant)] = deque()
        queue.append(waiter)
        self._size += 1
        return waiter

    def remove(self, waiter: Waiter[T]) -> bool:
        """Take ``waiter`` out (cancelled, timed out); False when it was not queued."""
        key = (waiter.priority, waiter.tenant)
        queue = self._queues.get(key)
        if queue is None:
            return False
        try:
            queue.remove(waiter)
        except ValueError:
            return False
        self._size -= 1
        if not queue:
            del self._queues[key]
        return True

    def _effective(self, priority: int, head: Waiter[T], now: float) -> int:
        if self.age_s <= 0:
            return priority
        return priority + int((now - head.since) / self.age_s)

    def pop(self, now: float, allow: Callable[[str], bool] | None = None) -> Waiter[T] | None:
        """The next to serve (taken out), or None when the queue is empty; with ``allow``,
        the next of a tenant it allows (None: it allows none that waits)."""
        best: tuple[int, float, float] | None = None
        best_key: tuple[int, str] | None = None
        for key, queue in self._queues.items():
            if allow is not None and not allow(key[1]):
                continue
            head = queue[0]
            rank = (-self._effective(key[0], head, now), self.attained(key[1], now), head.since)
            if best is None or rank < best:
                best, best_key = rank, key
        if best_key is None:
            return None
        queue = self._queues[best_key]
        waiter = queue.popleft()
        if not queue:
            del self._queues[best_key]
        self._size -= 1
        return waiter

    def has(self, allow: Callable[[str], bool]) -> bool:
        """Whether a tenant ``allow`` allows waits."""
        return any(allow(tenant) for _, tenant in self._queues)

    def lowest(self) -> int | None:
        """The lowest priority waiting (None: nobody waits)."""
        return min((p for p, _ in self._queues), default=None)

    def shed_for(self, priority: int, now: float) -> Waiter[T] | None:
        """The waiter to drop so that one of ``priority`` may queue in a full queue (taken
        out), or None when none waits at a lower priority."""
        lowest = self.lowest()
        if lowest is None or lowest >= priority:
            return None
        tenants = [t for p, t in self._queues if p == lowest]
        heaviest = max(tenants, key=lambda t: self.attained(t, now))
        queue = self._queues[(lowest, heaviest)]
        waiter = queue.pop()
        if not queue:
            del self._queues[(lowest, heaviest)]
        self._size -= 1
        return waiter

    def drain(self) -> list[Waiter[T]]:
        """Every waiter, taken out (a shutdown)."""
        out = [w for q in self._queues.values() for w in q]
        self._queues.clear()
        self._size = 0
        return out

    # ------------------------------------------------------------------ usage

    def attained(self, tenant: str, now: float) -> float:
        """``tenant``'s tokens lately (decayed to ``now``)."""
        usage = self._usage.get(tenant)
        if usage is None:
            return 0.0
        if usage.at < now and self.decay_s > 0:
            usage.tokens *= math.exp2(-(now - usage.at) / self.decay_s)
            usage.at = now
        return usage.tokens

    def charge(self, tenant: str, tokens: float, now: float) -> None:
        """Count ``tokens`` (negative: a correction) to ``tenant``'s attained service."""
        usage = self._usage.get(tenant)
        if usage is None:
            usage = self._usage[tenant] = _Usage(0.0, now)
        usage.tokens = max(0.0, self.attained(tenant, now) + tokens)

    def usage(self, now: float) -> dict[str, float]:
        """Every tenant's attained tokens (for app_state)."""
        return {t: round(self.attained(t, now), 1) for t in sorted(self._usage)}
