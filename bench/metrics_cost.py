"""The metrics' own work per request, measured in process: what a request's end costs
the tallies (Observer.end with metrics on, against off), timed over many ended requests.
The end-to-end comparison in bench/run.py (Neutrino with and without metrics) is the
real figure, but its run-to-run spread (several %) is larger than this cost."""

from __future__ import annotations

import time

from neutrino.observability.metrics import Metrics
from neutrino.pipeline.history import Spent
from neutrino.pipeline.observe import Observed, Observer
from neutrino.pipeline.state import Lifecycle, State


def _ended(n: int) -> list[Lifecycle]:
    out = []
    for _ in range(n):
        lc = Lifecycle()
        for state in (State.QUEUED, State.PROCESSING, State.GENERATING, State.COMPLETE):
            lc.advance(state)
        out.append(lc)
    return out


SPENT = Spent(30, 20)


def _per_request_us(observer: Observer, ended: list[Lifecycle]) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for lc in ended:
            obs = Observed("http", "chat", lc.times[State.START])
            observer.end(obs, "m", lc, None, SPENT)
        best = min(best, (time.perf_counter() - t0) / len(ended) * 1e6)
    return best


def tally_us(n: int = 50_000) -> float:
    """Microseconds the metrics add to one request's end (best of five runs)."""
    served = {"m"}
    ended = _ended(n)
    on = _per_request_us(Observer(Metrics(lambda: served), None), ended)
    off = _per_request_us(Observer(None, None), ended)
    return on - off


if __name__ == "__main__":
    print(f"metrics per request: {tally_us():.2f} us")
