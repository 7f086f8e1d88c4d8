"""Counts of events that are not requests (a request's end is counted by its state):
clients dropped for not reading, connections closed for being too slow to send, ...
Shown in ``/neutrino/v1/app_state``; plain integers, bumped on the event loop."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(slots=True)
class Counters:
    # Streams whose client stopped reading: the connection was aborted.
    slow_readers_dropped: int = 0
    # Connections closed because a request's head or body did not arrive in time (408).
    request_timeouts: int = 0
    # Requests refused for their API key: missing or wrong (401), a model or admin route
    # it may not use (403), more choices than it may have (400), past its limit (429).
    auth_refused: int = 0

    def snapshot(self) -> dict[str, int]:
        return asdict(self)
