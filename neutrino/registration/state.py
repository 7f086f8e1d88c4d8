"""Sans-IO parts of registration: the retry delays and what a registrar knows.

Both registrars (Sombrero over gRPC, etcd over HTTP) run the same loop: register until it
succeeds, then keep the registration alive (load reports, lease keep-alives) until that
fails, then register again. :class:`Registration` holds the loop's state and decides what
is worth a log line: one warning when registration is lost or first fails, one info line
when it succeeds, never one per retry. :class:`Backoff` gives the delays between tries.
"""

from __future__ import annotations

import enum
import logging
import random
from dataclasses import dataclass
from typing import Any

__all__ = ["Backoff", "Note", "Phase", "Registration", "emit"]

MAX_ERROR = 300  # characters of an error kept (and logged)


class Backoff:
    """Exponential backoff with jitter: try ``n`` (from 0) waits a uniformly drawn time in
    ``[ceiling / 2, ceiling]`` where ``ceiling = min(maximum, initial * factor ** n)``.

    The upper half keeps tries apart however the draw falls (full jitter, ``[0,
    ceiling]``, can retry at once), and the lower half spreads a fleet that lost its
    balancer at the same moment. ``reset()`` after a success starts again from ``initial``.
    """

    __slots__ = ("_factor", "_initial", "_maximum", "_rng", "_tries")

    def __init__(
        self,
        initial: float,
        maximum: float,
        factor: float = 2.0,
        rng: random.Random | None = None,
    ) -> None:
        if not 0 < initial <= maximum or factor < 1:
            raise ValueError("need 0 < initial <= maximum and factor >= 1")
        self._initial = initial
        self._maximum = maximum
        self._factor = factor
        self._rng = rng or random.Random()
        self._tries = 0

    @property
    def tries(self) -> int:
        return self._tries

    def ceiling(self) -> float:
        """The longest the next delay can be."""
        if self._tries > 64:  # factor ** tries would overflow long after reaching maximum
            return self._maximum
        return min(self._maximum, self._initial * self._factor**self._tries)

    def next(self) -> float:
        """The delay before the next try (and counts the try)."""
        top = self.ceiling()
        self._tries += 1
        return top * (0.5 + 0.5 * self._rng.random())

    def reset(self) -> None:
        self._tries = 0


class Phase(enum.Enum):
    IDLE = "idle"  # not started
    REGISTERING = "registering"  # trying to register (first time or after a loss)
    REGISTERED = "registered"  # registered, keeping it alive
    DEREGISTERED = "deregistered"  # deregistered on drain (final)
    STOPPED = "stopped"  # stopped without deregistering (final)


@dataclass(frozen=True, slots=True)
class Note:
    """A log line the registrar should write: ``warning`` or ``info`` level."""

    level: str
    message: str


def emit(
    logger: logging.Logger, prefix: str, note: Note | None, exc_info: BaseException | None = None
) -> None:
    """Write ``note`` (if any) to ``logger``; ``exc_info`` for a failure that is a bug."""
    if note is not None:
        level = logging.WARNING if note.level == "warning" else logging.INFO
        logger.log(level, "%s: %s", prefix, note.message, exc_info=exc_info, stacklevel=2)


class Registration:
    """The state of one registration: phase, counters, the last error, and the retry
    delays. Every method is pure bookkeeping; the asyncio registrar calls them around its
    IO and writes the returned :class:`Note`, if any."""

    __slots__ = (
        "_backoff",
        "_target",
        "attempts",
        "failing",
        "last_error",
        "phase",
        "registrations",
        "reports_sent",
        "sequence",
    )

    def __init__(self, target: str, backoff: Backoff) -> None:
        self._target = target  # what we register with, for log lines
        self._backoff = backoff
        self.phase = Phase.IDLE
        self.attempts = 0  # register tries, all told
        self.registrations = 0  # successful registrations
        self.reports_sent = 0  # load reports or keep-alives sent
        self.sequence = 0  # the last report's sequence number
        self.last_error: str | None = None
        self.failing = False  # the last try (or the registration) failed

    @property
    def registered(self) -> bool:
        return self.phase is Phase.REGISTERED

    @property
    def final(self) -> bool:
        return self.phase in (Phase.DEREGISTERED, Phase.STOPPED)

    def registering(self) -> None:
        """A register try begins."""
        if not self.final:
            self.phase = Phase.REGISTERING
            self.attempts += 1

    def succeeded(self) -> Note:
        """The register try succeeded."""
        self._backoff.reset()
        again = self.registrations > 0
        self.registrations += 1
        self.phase = Phase.REGISTERED
        self.failing = False
        what = "registered again" if again else "registered"
        return Note("info", f"{what} with {self._target}")

    def failed(self, error: str) -> tuple[float, Note | None]:
        """A register try, or the registration, failed with ``error``: the delay before
        the next try, and a warning on the change from working (or from the start) to
        failing; further failures in a row are not news."""
        was_registered = self.phase is Phase.REGISTERED
        first = not self.failing
        error = error if len(error) <= MAX_ERROR else error[: MAX_ERROR - 3] + "..."
        self.last_error = error
        self.failing = True
        if not self.final:
            self.phase = Phase.REGISTERING
        note = None
        if was_registered:
            note = Note("warning", f"registration with {self._target} lost ({error}); retrying")
        elif first:
            note = Note("warning", f"cannot register with {self._target} ({error}); retrying")
        return self._backoff.next(), note

    def next_sequence(self) -> int:
        """The sequence number of a report about to be sent: one more than the last, across
        streams and registrations (the balancer can tell a gap from a restart)."""
        self.sequence += 1
        return self.sequence

    def reported(self) -> None:
        """A load report (or keep-alive) went out."""
        self.reports_sent += 1

    def finish(self, deregistered: bool) -> None:
        self.phase = Phase.DEREGISTERED if deregistered else Phase.STOPPED

    def snapshot(self) -> dict[str, Any]:
        return {
            "phase": self.phase.value,
            "registered": self.registered,
            "attempts": self.attempts,
            "registrations": self.registrations,
            "reports_sent": self.reports_sent,
            "last_error": self.last_error,
        }
