"""When a dead worker starts again, and when the supervisor gives up (no I/O here).

A worker that dies is started again after a delay that doubles with each death in a
row that came soon after its start (``quick_s``), up to ``max_s``; a worker that ran
longer starts again after ``initial_s``. When every worker has died soon after its start
``give_up_after`` times in a row, something is wrong with the start itself (a port, the
engine, the machine): the supervisor stops and says so instead of trying forever.
"""

from __future__ import annotations

from dataclasses import dataclass

from neutrino.backoff import Backoff


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    initial_s: float = 0.1
    max_s: float = 5.0
    quick_s: float = 5.0  # a death this soon after the start counts towards giving up
    give_up_after: int = 3


@dataclass(slots=True)
class _Slot:
    backoff: Backoff  # the delay before the next start
    started_at: float = 0.0
    streak: int = 0  # deaths in a row, each soon after its start
    delay_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Death:
    """What to do after a worker died: start it again after ``delay_s``, or give up."""

    lived_s: float
    quick: bool
    delay_s: float
    give_up: bool


class Restarts:
    """The restart state of ``workers`` slots; times are the caller's clock (seconds)."""

    def __init__(self, workers: int, policy: RestartPolicy | None = None) -> None:
        self.policy = policy or RestartPolicy()
        p = self.policy
        self._slots = [
            _Slot(Backoff(p.initial_s, max(p.initial_s, p.max_s), jitter=False))
            for _ in range(workers)
        ]
        self.total = 0  # restarts so far

    def started(self, index: int, now: float) -> None:
        self._slots[index].started_at = now

    def died(self, index: int, now: float) -> Death:
        policy, slot = self.policy, self._slots[index]
        lived = max(0.0, now - slot.started_at)
        quick = lived < policy.quick_s
        if quick:
            slot.streak += 1
        else:
            slot.streak = 0
            slot.backoff.reset()
        slot.delay_s = slot.backoff.next()
        give_up = all(s.streak >= policy.give_up_after for s in self._slots)
        if not give_up:
            self.total += 1
        return Death(lived, quick, slot.delay_s, give_up)

    def streak(self, index: int) -> int:
        return self._slots[index].streak
