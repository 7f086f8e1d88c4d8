"""Where the per-key counters of :mod:`neutrino.pipeline.quota` live.

:class:`LocalStore` counts in this process. :class:`RedisStore` counts in Redis
(``[limits] redis``), shared by every worker and instance: one round trip a request
(``INCRBY`` and ``EXPIRE`` of each window's counter in one transaction). When Redis
fails, counting falls back to the local store at once, says so in the log and in
``app_state``, and tries Redis again after a few seconds: requests are never refused
because Redis is down.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any, Protocol

log = logging.getLogger("neutrino.limits")

# (counter, amount, span_s): add ``amount`` to a window's counter that lives ``span_s``.
Item = tuple[str, int, int]
RETRY_S = 5.0  # after a failure, Redis is tried again this much later
MAX_PENDING = 1024  # corrections on their way to Redis at most (more are counted locally)


class Store(Protocol):
    async def add(self, items: Sequence[Item]) -> list[int]:
        """Add each amount; each counter's new total."""
        ...

    def add_soon(self, items: Sequence[Item]) -> None:
        """Add without waiting for the totals (a correction, a refund)."""
        ...

    def describe(self) -> dict[str, object]:
        """What app_state shows."""
        ...


class LocalStore:
    """Counters in this process; a window's counter is dropped once the window is over."""

    def __init__(self) -> None:
        self._counts: dict[str, tuple[int, float]] = {}  # counter -> (total, expires at)
        self._sweep_at = 0.0

    def add_now(self, items: Sequence[Item]) -> list[int]:
        now = time.monotonic()
        if now >= self._sweep_at:  # bounded: old windows go
            self._counts = {k: v for k, v in self._counts.items() if v[1] > now}
            self._sweep_at = now + 10.0
        out = []
        for counter, amount, span in items:
            total, expires = self._counts.get(counter, (0, now + span))
            total += amount
            self._counts[counter] = (total, expires)
            out.append(total)
        return out

    async def add(self, items: Sequence[Item]) -> list[int]:
        return self.add_now(items)

    def add_soon(self, items: Sequence[Item]) -> None:
        self.add_now(items)

    def describe(self) -> dict[str, object]:
        return {"store": "local", "counters": len(self._counts)}


class RedisStore:
    """Counters in Redis, with the local store in reserve."""

    PREFIX = "neutrino:quota:"

    def __init__(self, url: str, timeout_s: float = 0.5) -> None:
        import redis.asyncio as aioredis  # only where [limits] redis is set

        self.url = url
        self._client: Any = aioredis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )
        self.local = LocalStore()
        self.down_until = 0.0  # monotonic: counting locally until then
        self.fallbacks = 0  # times Redis failed and the local counters took over
        self._pending: set[asyncio.Task[None]] = set()

    @property
    def down(self) -> bool:
        return time.monotonic() < self.down_until

    def _failed(self, exc: BaseException) -> None:
        if not self.down:
            self.fallbacks += 1
            log.warning(
                "limits: Redis at %s failed (%s); counting in this process for %g s",
                self.url, type(exc).__name__, RETRY_S,
            )  # fmt: skip
        self.down_until = time.monotonic() + RETRY_S

    async def _send(self, items: Sequence[Item]) -> list[int]:
        pipe = self._client.pipeline(transaction=True)
        for counter, amount, span in items:
            key = self.PREFIX + counter
            pipe.incrby(key, amount)
            pipe.expire(key, span + 60)
        replies = await pipe.execute()
        return [int(r) for r in replies[0::2]]

    async def add(self, items: Sequence[Item]) -> list[int]:
        if not items:
            return []
        if not self.down:
            try:
                return await self._send(items)
            except Exception as exc:
                self._failed(exc)
        return self.local.add_now(items)

    def add_soon(self, items: Sequence[Item]) -> None:
        if not items:
            return
        if self.down or len(self._pending) >= MAX_PENDING:
            self.local.add_now(items)
            return
        task = asyncio.get_running_loop().create_task(self._later(items))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _later(self, items: Sequence[Item]) -> None:
        await self.add(items)

    def describe(self) -> dict[str, object]:
        return {
            "store": "local (Redis is down)" if self.down else "redis",
            "redis": self.url.rpartition("@")[2],  # never a password
            "fallbacks": self.fallbacks,
        }

    async def close(self) -> None:
        for task in list(self._pending):
            task.cancel()
        await self._client.aclose()


def store_for(url: str) -> LocalStore | RedisStore:
    return RedisStore(url) if url else LocalStore()
