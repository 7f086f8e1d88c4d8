"""Answers that go on elsewhere: the rules of a request's move to another replica after
its first token (sans-IO; the router does the sending).

A text query whose replica is lost, fails it with the engine's own error or is drained
after its answer began is sent to another replica of its model with every token id
generated so far as ``forced_tokens``: the engine takes them as its own output after the
prompt and goes on (``schemas/ie.capnp``), so the client sees one answer, its text, counts
and id unbroken. Only engines whose hello says ``continues`` are moved to, and a guided
answer only to those that also say ``continuesGuided`` (its constraint advanced over the
tokens so far; vLLM's structured outputs cannot be). A request moves
at most ``[routing] migration_limit`` times; with no replica left, past the limit, or with
its answer already at ``max_tokens``, it ends with its replica's error, as before. With
no replica now but one coming (a managed engine restarting, a model the fleet places
again), the answer waits for it, at most ``migration_wait_s``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from neutrino.engine.fleet.failover import FAILURES, Failover
from neutrino.engine.messages import GuidedMode, HelloAck, TextQuery
from neutrino.errors import ErrorKind, NeutrinoError

# Why an answer moved, as the metric's label says it (a bounded set).
REASONS = ("lost", "engine_error", "drained")
# Why one that might have moved did not.
REFUSALS = ("limit", "no_replica")


class Replica(Protocol):
    name: str
    hello: HelloAck | None

    @property
    def connected(self) -> bool: ...


def reason_of(error: NeutrinoError, drained: bool) -> str | None:
    """The move's reason for a live request that failed with ``error`` (None: the error
    is the request's own, and it ends with it)."""
    if error.kind not in FAILURES:
        return None
    if drained:
        return "drained"
    return "lost" if error.kind is ErrorKind.ENGINE_DISCONNECTED else "engine_error"


def _guided(query: Any) -> bool:
    g = getattr(query, "guided", None)
    return g is not None and g.mode is not GuidedMode.NONE


class Migrations:
    """Where answers move, and how many moved or could not, by reason (the metric's
    counts). ``load``: a replica's load (the least loaded of those that can take it)."""

    def __init__(self, limit: int, load: Callable[[Any], float]) -> None:
        self.limit = limit
        self._load = load
        self.moved = dict.fromkeys(REASONS, 0)
        self.refused = dict.fromkeys(REFUSALS, 0)

    def allowed(self, attempt: Failover) -> TextQuery | None:
        """The query that takes ``attempt``'s answer on, or None when it may not move (not
        a text query, past the limit, nothing left to generate)."""
        query = attempt.origin
        if type(query) is not TextQuery:
            return None
        if attempt.moves >= self.limit:
            self.refused["limit"] += 1
            return None
        done = attempt.generated
        if len(done) >= query.sampling.max_tokens:
            return None
        return dataclasses.replace(query, forced_tokens=done.tolist())

    def pick(self, attempt: Failover, replicas: Iterable[Replica], anew: bool = False) -> Any:
        """The least loaded connected replica that continues answers, not the one that
        failed (unless ``anew``: it connected again since), one not tried before where
        there is such; None if there is none."""
        guided = _guided(attempt.origin)
        able = [
            r for r in replicas
            if (anew or r.name != attempt.pool_name) and r.connected and r.hello is not None
            and r.hello.continues and (r.hello.continues_guided or not guided)
        ]  # fmt: skip
        if not able:
            return None
        fresh = [r for r in able if r.name not in attempt.tried]
        return min(fresh or able, key=self._load)

    def snapshot(self) -> dict[str, object]:
        return {"limit": self.limit, "moved": dict(self.moved), "refused": dict(self.refused)}
