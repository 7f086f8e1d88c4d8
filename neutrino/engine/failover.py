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
from collections.abc import Callable
from dataclasses import dataclass

from neutrino.config.routing import RoutingConfig
from neutrino.engine.client import RequestOwner, StreamSink
from neutrino.engine.messages import ModalResult, Query, TextResult
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


class Failover:
    """A request routed among replicas, as its current replica sees it (a StreamSink),
    and as the pipeline holds it (a Submission)."""

    __slots__ = (
        "_answered", "_live", "_owner", "_resend", "_rid", "attempt", "flush", "on_modal",
        "on_result", "on_tokens", "pool_name", "query", "sink", "tried",
    )  # fmt: skip

    def __init__(self, query: Query, sink: StreamSink, resend: Resend, answered: Answered) -> None:
        self.query = query
        self.sink = sink
        self._resend = resend
        self._answered = answered
        self.on_result: Callable[[TextResult], bool] = self._first_result
        self.on_tokens: Callable[[list[int]], bool] = self._first_tokens
        self.on_modal: Callable[[ModalResult], None] = self._first_modal
        self.flush: Callable[[], None] = sink.flush
        self._live = False  # the first output has passed
        self._owner: RequestOwner | None = None
        self._rid = 0
        self.attempt = 0
        self.pool_name = ""
        self.tried: list[str] = []

    def bind(self, pool_name: str, owner: RequestOwner, rid: int, attempt: int) -> None:
        """Attempt ``attempt`` went to ``owner`` as ``rid`` (unless a later one did)."""
        if attempt == self.attempt:
            self._owner, self._rid = owner, rid

    def begin(self, pool_name: str) -> int:
        """A new attempt, on ``pool_name``: its number."""
        self.attempt += 1
        self.pool_name = pool_name
        self.tried.append(pool_name)
        self._owner = None
        return self.attempt

    @property
    def live(self) -> bool:
        return self._live

    def _going(self) -> None:
        sink = self.sink
        self.on_result, self.on_tokens, self.on_modal = (
            sink.on_result,
            sink.on_tokens,
            sink.on_modal,
        )
        self._live = True
        self._answered(self.pool_name)

    def _first_result(self, result: TextResult) -> bool:
        self._going()
        return self.sink.on_result(result)

    def _first_tokens(self, tokens: list[int]) -> bool:
        self._going()
        return self.sink.on_tokens(tokens)

    def _first_modal(self, result: ModalResult) -> None:
        self._going()
        self.sink.on_modal(result)

    def on_error(self, error: NeutrinoError) -> None:
        """The attempt failed: the router records it, and sends the request elsewhere or
        lets it end with ``error``."""
        if not self._resend(self, error):
            self.sink.on_error(error)

    # Submission: what the pipeline does with it reaches the current attempt.

    def cancel(self, reason: str) -> bool:
        owner = self._owner
        return owner.cancel(self._rid, reason) if owner is not None else False

    def forget(self) -> None:
        owner = self._owner
        if owner is not None:
            owner.forget(self._rid)
