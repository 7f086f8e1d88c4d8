"""Answers that go on elsewhere: the rules of a request's move to another replica after
its first token (sans-IO; the router does the sending).

A text query whose replica is lost, fails it with the engine's own error or is drained
after its answer began is sent to another replica of its model with every token id
generated so far as ``forced_tokens``: the engine takes them as its own output after the
prompt and goes on (``schemas/ie.capnp``), so the client sees one answer, its text, counts
and id unbroken. Only engines whose hello says ``continues`` are moved to. A request moves
at most ``[routing] migration_limit`` times; with no replica left, past the limit, or with
its answer already at ``max_tokens``, it ends with its replica's error, as before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from neutrino.engine.failover import FAILURES, Failover
from neutrino.engine.messages import HelloAck, TextQuery
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


@dataclass(frozen=True, slots=True)
class Plan:
    query: TextQuery  # the original, with the answer so far as its forced tokens
    target: Any  # the replica (a router's Pool) it goes to


class Migrations:
    """Where answers move, and how many moved or could not, by reason (the metric's
    counts). ``load``: a replica's load (the least loaded of those that can take it)."""

    def __init__(self, limit: int, load: Callable[[Any], float]) -> None:
        self.limit = limit
        self._load = load
        self.moved = dict.fromkeys(REASONS, 0)
        self.refused = dict.fromkeys(REFUSALS, 0)

    def plan(self, attempt: Failover, replicas: Iterable[Replica]) -> Plan | None:
        """Where ``attempt``'s answer goes on, and the query that takes it there; None when
        it may not move (not a text query, past the limit, nothing left to generate, no
        replica that continues answers), and it ends with its error."""
        query = attempt.origin
        if type(query) is not TextQuery:
            return None
        if attempt.moves >= self.limit:
            self.refused["limit"] += 1
            return None
        done = attempt.generated
        if len(done) >= query.sampling.max_tokens:
            return None
        able = [
            r for r in replicas
            if r.name != attempt.pool_name and r.connected and r.hello is not None
            and r.hello.continues
        ]  # fmt: skip
        if not able:
            self.refused["no_replica"] += 1
            return None
        fresh = [r for r in able if r.name not in attempt.tried]
        target = min(fresh or able, key=self._load)
        return Plan(dataclasses.replace(query, forced_tokens=done.tolist()), target)

    def snapshot(self) -> dict[str, object]:
        return {"limit": self.limit, "moved": dict(self.moved), "refused": dict(self.refused)}
