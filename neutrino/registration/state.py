"""Sans-IO parts of registration: the retry delays and what a registrar knows.

Both registrars (Sombrero over gRPC, etcd over HTTP) run the same loop: register until it
succeeds, then keep the registration alive (load reports, lease keep-alives) until that
fails, then register again. :class:`Registration` holds the loop's state and decides what
is worth a log line: one warning when registration is lost or first fails, one info line
when it succeeds, never one per retry; :class:`neutrino.backoff.Backoff` gives the delays
between tries.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Any

from neutrino.backoff import Backoff

__all__ = ["Note", "Phase", "Registration", "emit"]

MAX_ERROR = 300  # characters of an error kept (and logged)


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
