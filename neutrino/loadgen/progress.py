"""A one-line progress bar on a terminal (stderr), redrawn at most ten times a second."""

from __future__ import annotations

import time
from typing import TextIO

WIDTH = 30


class Progress:
    """Requests done out of ``total`` (or seconds out of ``duration`` when the run is timed
    rather than counted); nothing is drawn unless ``enabled``."""

    def __init__(
        self, stream: TextIO, *, total: int | None, duration: float | None, enabled: bool
    ) -> None:
        self.stream = stream
        self.total = total
        self.duration = duration
        self.enabled = enabled
        self.ok = 0
        self.failed = 0
        self._start = time.monotonic()
        self._drawn = 0.0

    def done(self, ok: bool) -> None:
        if ok:
            self.ok += 1
        else:
            self.failed += 1
        now = time.monotonic()
        if self.enabled and now - self._drawn >= 0.1:
            self._drawn = now
            self._draw(now - self._start)

    def _draw(self, elapsed: float) -> None:
        n = self.ok + self.failed
        if self.total:
            share, count = n / self.total, f"{n}/{self.total}"
        elif self.duration:
            share, count = elapsed / self.duration, f"{n}"
        else:
            share, count = 0.0, f"{n}"
        filled = round(WIDTH * min(1.0, share))
        rate = n / elapsed if elapsed > 0 else 0.0
        line = (
            f"\r[{'#' * filled}{'.' * (WIDTH - filled)}] {count} "
            f"failed {self.failed}  {rate:.1f} req/s  {elapsed:.0f}s "
        )
        self.stream.write(line)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.monotonic() - self._start)
            self.stream.write("\n")
            self.stream.flush()
