"""When requests start: the open loop's Poisson arrivals (sans-IO, seeded).

An open loop sends requests at a rate chosen in advance, whatever the server's answers
take; the gaps between arrivals of a Poisson process of rate ``r`` are independent and
exponential with mean ``1/r``. The first request starts at once (offset 0).
"""

from __future__ import annotations

import random
from collections.abc import Iterator


def poisson_arrivals(
    rate: float, rng: random.Random, *, count: int | None = None, duration: float | None = None
) -> Iterator[float]:
    """Offsets in seconds from the start, ascending: at most ``count`` of them and none at
    or after ``duration`` (either may be None, not both: the schedule must end)."""
    if rate <= 0:
        raise ValueError("the rate must be above 0")
    if count is None and duration is None:
        raise ValueError("an open loop needs a request count or a duration")
    at = 0.0
    sent = 0
    while (count is None or sent < count) and (duration is None or at < duration):
        yield at
        sent += 1
        at += rng.expovariate(rate)
