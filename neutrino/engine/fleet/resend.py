"""Where a failed attempt goes next: a retry on another replica before its first token
(engine/fleet/failover.py), a move after it (engine/fleet/migration.py), and the operator's drain.

The router hands every request it routes among replicas (or to an engine that may come
back) to :meth:`Resender.failover`; the replicas' health, the retry budget, the moves'
counts and the drained engines live here. The router is seen through :class:`View`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from neutrino.config import RoutingConfig
from neutrino.engine.client import RequestOwner, StreamSink
from neutrino.engine.fleet.failover import RETRYABLE, Failover, Holder, Outliers, RetryBudget
from neutrino.engine.fleet.migration import Migrations, reason_of
from neutrino.engine.messages import HelloAck, Query
from neutrino.errors import ErrorKind, NeutrinoError

log = logging.getLogger("neutrino.engine")


class Replica(Protocol):
    name: str
    hello: HelloAck | None

    @property
    def connected(self) -> bool: ...

    def pick(self) -> Any: ...

    def in_flight(self) -> list[tuple[RequestOwner, int, StreamSink]]: ...


class View(Protocol):
    """The router, as the resender sees it."""

    def replicas_of(self, model: str) -> Sequence[Replica]:
        """The connected engines that take ``model``'s queries now."""
        ...

    def served(self) -> Mapping[str, Sequence[Replica]]:
        """Every model's, by model."""
        ...

    def holder_of(self, replica: Replica) -> Holder | None: ...

    def coming(self, model: str) -> bool:
        """Whether an engine of ``model`` may connect soon (a managed engine, which is
        restarted when it dies; a catalogued model the fleet can place)."""
        ...

    def connects(self, name: str) -> int:
        """How many connections to the engine ``name`` have been opened so far."""
        ...

    async def arrival(self, model: str, timeout: float) -> None:
        """Wait, at most ``timeout``, for the engines to change (or place ``model`` if no
        engine serves it and the fleet can)."""
        ...

    def refresh(self) -> None: ...


class Resender:
    """The router's failover and migration (one per router)."""

    def __init__(self, cfg: RoutingConfig, view: View, load: Callable[[Any], float]) -> None:
        self.view = view
        self._load = load
        self.outliers = Outliers(cfg)
        self.budget = RetryBudget(cfg.retry_budget, cfg.retry_burst)
        self.migrations = Migrations(cfg.migration_limit, load)
        self.wait_s = cfg.migration_wait_s
        self.draining: set[str] = set()  # engines no request is sent to (their answers moved)
        self._tasks: set[asyncio.Task[None]] = set()

    def configure(self, cfg: RoutingConfig) -> None:
        """A reload's settings; what was learned is forgotten."""
        self.outliers = Outliers(cfg)
        self.budget = RetryBudget(cfg.retry_budget, cfg.retry_burst)
        self.migrations.limit = cfg.migration_limit
        self.wait_s = cfg.migration_wait_s

    @property
    def used(self) -> bool:
        """Whether anything was retried, moved, refused or drained (then it is shown)."""
        m = self.migrations
        return bool(
            self.budget.retries or self.budget.refused or self.draining
            or any(m.moved.values()) or any(m.refused.values())
        )  # fmt: skip

    @property
    def active(self) -> bool:
        """Whether requests are worth wrapping (retries or moves allowed)."""
        return bool(self.budget.ratio or self.migrations.limit)

    def in_rotation(self, pools: list[Any]) -> list[Any]:
        """The replicas not ejected nor skipped (all of them if none is left)."""
        outliers = self.outliers
        if not outliers.health:
            return pools
        now = time.monotonic()
        usable = [p for p in pools if outliers.usable(p.name, now)]
        return usable or pools

    def failover(self, query: Query, sink: StreamSink, replica: Replica) -> Failover:
        """Submit to ``replica`` a request that another replica takes if this one fails
        (before its first token: a retry; after: a move)."""
        self.budget.earn()
        record = self.migrations.limit > 0
        attempt = Failover(query, sink, self._resend, self.outliers.succeeded, record)
        self._send(attempt, replica)
        return attempt

    def _send(self, attempt: Failover, replica: Replica) -> None:
        conn = replica.pick()
        if conn is None:
            raise NeutrinoError(
                ErrorKind.NO_ENGINE, f"no engine serving {attempt.query.model!r} is connected"
            )
        n = attempt.begin(replica.name, self.view.holder_of(replica))
        attempt.bind(replica.name, conn, conn.submit(attempt.query, attempt), n)

    def _resend(self, attempt: Failover, error: NeutrinoError) -> bool:
        """An attempt failed: record it against its replica; send the request on (True)
        or let it end with ``error``."""
        name = attempt.pool_name
        self.outliers.failed(name, error.kind, lambda: self._others_in_rotation(name))
        if attempt.live:
            reason = reason_of(error, name in self.draining)
            return reason is not None and self._move(attempt, reason, error)
        return self._retry(attempt, error)

    def _retry(self, attempt: Failover, error: NeutrinoError) -> bool:
        """Before the first token: once, to a replica not tried, within the budget."""
        if error.kind not in RETRYABLE or len(attempt.tried) > 1 or not self.budget.ratio:
            return False
        others = [
            p for p in self.in_rotation(list(self.view.replicas_of(attempt.query.model)))
            if p.name not in attempt.tried and p.connected
        ]  # fmt: skip
        if not others or not self.budget.spend():
            return False
        target = min(others, key=self._load)
        try:
            self._send(attempt, target)
        except NeutrinoError:
            return False
        log.info("request for %s failed on %s (%s): sent to %s", attempt.query.model,
                 attempt.tried[-2], error.kind.name, target.name)  # fmt: skip
        return True

    # ------------------------------------------------------------------ moves

    def _move(self, attempt: Failover, reason: str, error: NeutrinoError) -> bool:
        """After its first token: to another replica now, or to one that starts or is
        placed (the answer waits, at most ``migration_wait_s``); True if it goes on."""
        query = self.migrations.allowed(attempt)
        if query is None:
            return False
        model = query.model
        target = self.migrations.pick(attempt, self.view.replicas_of(model))
        if target is not None:
            return self._go(attempt, query, target, reason)
        if not self.wait_s or not self.view.coming(model):
            self.migrations.refused["no_replica"] += 1
            return False
        attempt.waiting = True
        since = self.view.connects(attempt.pool_name)
        task = asyncio.get_running_loop().create_task(
            self._move_later(attempt, reason, error, since)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    def _go(self, attempt: Failover, query: Any, target: Replica, reason: str) -> bool:
        was, attempt.query = attempt.pool_name, query
        try:
            self._send(attempt, target)
        except NeutrinoError:
            return False
        self.migrations.moved[reason] += 1
        attempt.on_moved(target.name, reason)
        log.info("an answer of %s moved from %s to %s after %d tokens (%s)", query.model, was,
                 target.name, len(query.forced_tokens), reason)  # fmt: skip
        return True

    async def _move_later(
        self, attempt: Failover, reason: str, error: NeutrinoError, since: int
    ) -> None:
        """Wait for a replica (the failed engine itself once it connected again: ``since``
        its count of connections then), then move there; the request's deadline or its
        client may end it meanwhile (then nothing is sent)."""
        loop = asyncio.get_running_loop()
        model, failed = attempt.origin.model, attempt.pool_name
        deadline = loop.time() + self.wait_s
        try:
            while not attempt.ended and loop.time() < deadline:
                back = self.view.connects(failed) > since
                target = self.migrations.pick(attempt, self.view.replicas_of(model), back)
                if target is not None:
                    query = self.migrations.allowed(attempt)
                    if query is not None and self._go(attempt, query, target, reason):
                        return
                    break
                await self.view.arrival(model, deadline - loop.time())
        finally:
            attempt.waiting = False
        if not attempt.ended:
            self.migrations.refused["no_replica"] += 1
            attempt.sink.on_error(error)

    def drain(self, replica: Replica) -> int:
        """No more requests to ``replica``; the answers it is making move now (each
        cancelled there once): how many moved. Those that cannot move stay."""
        name = replica.name
        self.draining.add(name)
        self.view.refresh()
        moved = 0
        for owner, rid, sink in replica.in_flight():
            if not isinstance(sink, Failover) or sink.pool_name != name:
                continue
            query = self.migrations.allowed(sink)
            target = self.migrations.pick(sink, self.view.replicas_of(sink.origin.model))
            if query is None or target is None or not owner.cancel(rid, "drained"):
                continue
            if self._go(sink, query, target, "drained"):
                moved += 1
            else:  # pragma: no cover - a picked replica refused at once
                sink.sink.on_error(NeutrinoError(ErrorKind.ENGINE_DISCONNECTED, "drained"))
        return moved

    def resume(self, name: str) -> None:
        self.draining.discard(name)
        self.view.refresh()

    def _others_in_rotation(self, name: str) -> bool:
        """Whether every model the engine ``name`` serves has another replica in rotation."""
        now = time.monotonic()
        usable = self.outliers.usable
        for pools in self.view.served().values():
            if any(p.name == name for p in pools) and not any(
                p.name != name and usable(p.name, now) for p in pools
            ):
                return False
        return True

    def snapshot(self) -> dict[str, object]:
        return {
            "retries": self.budget.retries,
            "retries_refused": self.budget.refused,
            "migrations": self.migrations.snapshot(),
            "draining": sorted(self.draining),
            "engines": self.outliers.snapshot(),
        }

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
