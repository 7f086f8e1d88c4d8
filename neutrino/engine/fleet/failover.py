"""Failing replicas kept out of the way, and requests that failed before their first token
sent to another replica.

- **Outlier detection** (passive): a replica whose requests fail ``eject_after`` times in a
  row (its connection lost, or the engine's own failure) is ejected: no request is routed
  to it for ``eject_base_s``, doubled at each ejection that follows without a success
  between, at most ``eject_max_s``. A replica is never ejected while it is the last one of
  one of its models that is not; its first success after an ejection clears it. A replica
  that answers "overloaded" is skipped for ``overload_skip_s``.
- **Failover**: a request whose replica fails before the first token (lost, failed,
  overloaded) is sent once more, to a replica it has not tried, within a **retry budget**
  (a token bucket: each request routed among replicas earns ``retry_budget`` of a retry, a
  retry spends one, at most ``retry_burst`` saved up), so that retries stay near that
  fraction of the requests however many replicas fail. After its first token a request
  fails cleanly; a request past its budget fails with its replica's error.

``Failover`` is the sink a request's replica sees; once the first output has passed, the
replica calls the request's own sink straight (its methods are taken over), so the
token path costs nothing more.
"""

from __future__ import annotations

import logging
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from neutrino.config.routing import RoutingConfig
from neutrino.engine.client import RequestOwner, StreamSink
from neutrino.engine.messages import ModalResult, Query, TextQuery, TextResult
from neutrino.errors import ErrorKind, NeutrinoError

log = logging.getLogger("neutrino.engine")

# Errors of the replica, not of the request: another replica may well answer it.
RETRYABLE = frozenset(
    {ErrorKind.ENGINE_DISCONNECTED, ErrorKind.ENGINE_ERROR, ErrorKind.ENGINE_OVERLOADED}
)
FAILURES = frozenset({ErrorKind.ENGINE_DISCONNECTED, ErrorKind.ENGINE_ERROR})


@dataclass(slots=True)
class Health:
    """One replica's recent record."""

    failures: int = 0  # in a row
    ejections: int = 0  # in a row, without a success between (the next lasts longer)
    ejected_until: float = 0.0  # monotonic
    skipped_until: float = 0.0  # overloaded: passed by until then
    ejected_total: int = 0

    def usable(self, now: float) -> bool:
        return self.ejected_until <= now and self.skipped_until <= now


class Outliers:
    """Every replica's health, by engine name."""

    def __init__(self, cfg: RoutingConfig) -> None:
        self.cfg = cfg
        self.health: dict[str, Health] = {}

    def of(self, name: str) -> Health:
        h = self.health.get(name)
        if h is None:
            h = self.health[name] = Health()
        return h

    def usable(self, name: str, now: float) -> bool:
        h = self.health.get(name)
        return h is None or h.usable(now)

    def succeeded(self, name: str) -> None:
        h = self.health.get(name)
        if h is not None and (h.failures or h.ejections):
            if h.ejections:
                log.info("engine %s answers again: back in rotation", name)
            h.failures = h.ejections = 0

    def failed(self, name: str, kind: ErrorKind, others_usable: Callable[[], bool]) -> None:
        """A request on ``name`` failed with ``kind``; ``others_usable``: whether every
        model it serves has another replica in rotation (else it is not ejected)."""
        cfg = self.cfg
        h = self.of(name)
        now = time.monotonic()
        if kind is ErrorKind.ENGINE_OVERLOADED:
            h.skipped_until = now + cfg.overload_skip_s
            return
        if kind not in FAILURES:
            return
        h.failures += 1
        if h.failures < cfg.eject_after or h.ejected_until > now or not others_usable():
            return
        seconds = min(cfg.eject_max_s, cfg.eject_base_s * 2**h.ejections)
        h.ejected_until = now + seconds
        h.ejections += 1
        h.ejected_total += 1
        h.failures = 0
        log.warning(
            "engine %s failed %d requests in a row: out of rotation for %g s",
            name, cfg.eject_after, seconds,
        )  # fmt: skip

    def snapshot(self) -> dict[str, object]:
        now = time.monotonic()
        return {
            name: {
                "ejected": h.ejected_until > now,
                "ejected_for_s": round(max(0.0, h.ejected_until - now), 3),
                "failures_in_a_row": h.failures,
                "ejections": h.ejected_total,
            }
            for name, h in sorted(self.health.items())
        }


class RetryBudget:
    """A token bucket of retries (see the module docstring)."""

    def __init__(self, ratio: float, burst: int) -> None:
        self.ratio = ratio
        self.burst = float(burst)
        self.tokens = float(burst)
        self.retries = 0
        self.refused = 0  # retries the budget did not allow

    def earn(self) -> None:
        tokens = self.tokens + self.ratio
        self.tokens = tokens if tokens < self.burst else self.burst

    def spend(self) -> bool:
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            self.retries += 1
            return True
        self.refused += 1
        return False


# What the router does with a failed attempt: sends it elsewhere (True), or not.
Resend = Callable[["Failover", NeutrinoError], bool]
# What it does when an attempt's first output arrives (its replica answers: healthy).
Answered = Callable[[str], None]


class Holder(Protocol):
    """Counts a model's requests on one engine while they run (a fleet's engine: what
    may not be unloaded under them)."""

    def used(self, model: str) -> None: ...

    def released(self, model: str) -> None: ...


class Failover:
    """A request routed among replicas, as its current replica sees it (a StreamSink),
    and as the pipeline holds it (a Submission).

    With ``record`` (migration allowed), the token ids of its answer are kept as they
    pass (packed, 4 bytes each: at most its ``max_tokens``), so that the answer can go on
    on another replica if this one is lost after its first token (engine/fleet/migration.py).
    """

    __slots__ = (
        "_answered", "_held", "_live", "_owner", "_record", "_resend", "_rid",
        "_sink_result", "_sink_tokens", "attempt", "ended", "flush", "generated", "moves",
        "on_modal", "on_result", "on_tokens", "origin", "pool_name", "query", "sink", "tried",
        "waiting",
    )  # fmt: skip

    def __init__(
        self,
        query: Query,
        sink: StreamSink,
        resend: Resend,
        answered: Answered,
        record: bool = False,
    ) -> None:
        self.origin = query  # as the pipeline sent it
        self.query = query  # as the current attempt was sent (forced tokens after a move)
        self.sink = sink
        self._resend = resend
        self._answered = answered
        self._record = record and type(query) is TextQuery
        self.on_result: Callable[[TextResult], bool] = self._first_result
        self.on_tokens: Callable[[list[int]], bool] = self._first_tokens
        self.on_modal: Callable[[ModalResult], None] = self._first_modal
        self.flush: Callable[[], None] = sink.flush
        self._sink_tokens = sink.on_tokens
        self._sink_result = sink.on_result
        self._live = False  # the first output has passed
        self._owner: RequestOwner | None = None
        self._held: Holder | None = None
        self._rid = 0
        self.attempt = 0
        self.moves = 0  # times its answer went on on another replica
        self.waiting = False  # its answer waits for a replica to move to
        self.ended = False  # cancelled or forgotten: the request is over
        self.generated = array("I")  # the answer's ids so far (with ``record``)
        self.pool_name = ""
        self.tried: list[str] = []

    def bind(self, pool_name: str, owner: RequestOwner, rid: int, attempt: int) -> None:
        """Attempt ``attempt`` went to ``owner`` as ``rid`` (unless a later one did)."""
        if attempt == self.attempt:
            self._owner, self._rid = owner, rid

    def begin(self, pool_name: str, holder: Holder | None = None) -> int:
        """A new attempt, on ``pool_name`` (whose ``holder`` counts the model in use
        there until the request ends or moves on): its number."""
        self.attempt += 1
        self.pool_name = pool_name
        self.tried.append(pool_name)
        self._owner = None
        self._hold(holder)
        return self.attempt

    def _hold(self, holder: Holder | None) -> None:
        held = self._held
        if held is holder:
            return
        model = self.origin.model
        if holder is not None:
            holder.used(model)
        self._held = holder
        if held is not None:
            held.released(model)

    @property
    def live(self) -> bool:
        return self._live

    def _going(self) -> None:
        sink = self.sink
        if self._record:
            self.on_result, self.on_tokens = self._kept_result, self._kept_tokens
        else:
            self.on_result, self.on_tokens = sink.on_result, sink.on_tokens
        self.on_modal = sink.on_modal
        self._live = True
        self._answered(self.pool_name)

    def _kept_tokens(self, tokens: list[int]) -> bool:
        self.generated.extend(tokens)
        return self._sink_tokens(tokens)

    def _kept_result(self, result: TextResult) -> bool:
        if result.tokens:
            self.generated.extend(result.tokens)
        return self._sink_result(result)

    def _first_result(self, result: TextResult) -> bool:
        self._going()
        return self.on_result(result)

    def _first_tokens(self, tokens: list[int]) -> bool:
        self._going()
        return self.on_tokens(tokens)

    def _first_modal(self, result: ModalResult) -> None:
        self._going()
        self.sink.on_modal(result)

    def on_error(self, error: NeutrinoError) -> None:
        """The attempt failed: the router records it, and sends the request elsewhere
        (before its first token a retry, after it a move) or lets it end with ``error``."""
        if not self._resend(self, error):
            self.sink.on_error(error)

    def on_moved(self, engine: str, reason: str) -> None:
        """Its answer goes on on ``engine`` (the sink is told where it went, and why)."""
        self.moves += 1
        self.sink.on_moved(engine, reason)

    # Submission: what the pipeline does with it reaches the current attempt.

    def cancel(self, reason: str) -> bool:
        self.ended = True
        owner = self._owner
        sent = owner.cancel(self._rid, reason) if owner is not None else False
        self._hold(None)
        return sent

    def forget(self) -> None:
        self.ended = True
        owner = self._owner
        if owner is not None:
            owner.forget(self._rid)
        self._hold(None)
