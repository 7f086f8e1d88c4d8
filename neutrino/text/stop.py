"""Sans-IO stop-string matcher for streamed text."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["StopMatcher"]


class StopMatcher:
    """Cuts a text stream at the earliest occurrence of any stop string.

    ``feed`` returns the text that is safe to emit now: never any part of a stop string and
    never anything after one. It holds back only the longest suffix that is a proper prefix
    of some stop string (and, while an earlier-starting stop could still complete, a stop that
    already matched later on), so the output does not depend on how the text is chunked:
    it is always ``text[:earliest match]``. Empty stop strings are ignored.
    """

    __slots__ = ("_buf", "_first_chars", "_max_hold", "_stops", "matched", "stopped")

    def __init__(self, stops: Sequence[str]) -> None:
        unique = tuple(dict.fromkeys(s for s in stops if s))
        self._stops = unique
        self._first_chars = tuple(dict.fromkeys(s[0] for s in unique))
        self._max_hold = max((len(s) for s in unique), default=1) - 1
        self._buf = ""
        self.stopped = False
        self.matched: str | None = None

    @property
    def stops(self) -> tuple[str, ...]:
        return self._stops

    @property
    def held(self) -> str:
        """Text currently held back."""
        return self._buf

    def feed(self, text: str) -> str:
        if not self._stops:
            return text
        if self.stopped:
            return ""
        data = self._buf + text if self._buf else text
        for char in self._first_chars:
            if char in data:
                break
        else:  # no stop can start anywhere in data: the common case
            self._buf = ""
            return data
        at, stop = self._earliest(data)
        hold = self._hold_start(data, len(data) if stop is None else at)
        if hold < 0:
            self._buf = ""
            if stop is None:
                return data
            self.stopped = True
            self.matched = stop
            return data[:at]
        self._buf = data[hold:]
        return data[:hold]

    def finish(self) -> str:
        """End of stream: release held-back text (nothing once stopped)."""
        if self.stopped or not self._buf:
            return ""
        data, self._buf = self._buf, ""
        at, stop = self._earliest(data)
        if stop is None:
            return data
        self.stopped = True
        self.matched = stop
        return data[:at]

    def _earliest(self, data: str) -> tuple[int, str | None]:
        """Start and stop string of the earliest complete match (shortest stop on a tie)."""
        best = -1
        found: str | None = None
        for stop in self._stops:
            i = data.find(stop)
            if i < 0:
                continue
            if found is None or i < best or (i == best and len(stop) < len(found)):
                best = i
                found = stop
        return best, found

    def _hold_start(self, data: str, limit: int) -> int:
        """Earliest q < limit such that data[q:] is a proper prefix of a stop, else -1."""
        n = len(data)
        start = n - self._max_hold
        if start < 0:
            start = 0
        if limit > n:
            limit = n
        stops = self._stops
        best = -1
        for char in self._first_chars:
            q = data.find(char, start, limit)
            while q >= 0:
                # Memory stays linear in the stops' length (a set of all their prefixes
                # would grow with its square); the window is at most the longest stop.
                tail = data[q:]
                size = n - q
                for stop in stops:
                    if len(stop) > size and stop.startswith(tail):
                        break
                else:
                    q = data.find(char, q + 1, limit)
                    continue
                if best < 0 or q < best:
                    best = q
                break
        return best
