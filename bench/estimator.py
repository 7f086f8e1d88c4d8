"""How good is the load report's estimated wait? ``python -m bench.estimator``.

The queue estimator (neutrino/registration/estimator.py) is driven by a simulated
M/G/c queue in virtual time: Poisson arrivals at ``load * slots / E[S]`` per second,
``slots`` requests served at once, the rest waiting in FIFO order, service times drawn
from one of several distributions of mean 1 s. Each arriving request asks the estimator
for its wait (the queue and slots as they are at that moment); the simulation then
measures the wait it really had. The estimator learns only from the completions, as in
the server. The report gives, per distribution and load, the share of requests that
waited, their mean wait, the mean absolute error of the estimate over all requests and
over those that waited, and, for those that waited, the median and the 10th and 90th
percentiles of estimate / actual. Loads above 1 are an overload that grows the queue
through the run (the estimate must follow it). The first tenth of each run (the
estimator's warm-up) is left out. Deterministic (seeded), a few seconds.
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from neutrino.registration.estimator import QueueEstimator

Draw = Callable[[random.Random], float]

# Service-time distributions, each of mean 1 s.
DISTRIBUTIONS: dict[str, Draw] = {
    "deterministic": lambda rng: 1.0,
    "exponential": lambda rng: rng.expovariate(1.0),
    # sigma 1: CV ~1.3, like generation lengths
    "lognormal": lambda rng: rng.lognormvariate(-0.5, 1.0),
    # most short, a few ten times longer (CV ~1.5)
    "bimodal": lambda rng: 0.5 if rng.random() < 0.9 else 5.5,
}
LOADS = (0.8, 0.95, 1.1)


@dataclass(frozen=True, slots=True)
class Outcome:
    requests: int
    waited: int
    mean_wait_s: float  # of those that waited
    mae_all_s: float
    mae_waited_s: float
    ratio_p10: float
    ratio_p50: float
    ratio_p90: float


def simulate(draw: Draw, load: float, slots: int, n: int, seed: int) -> Outcome:
    rng = random.Random(seed)
    est = QueueEstimator()
    departures: list[tuple[float, float]] = []  # (end time, service time), a heap
    queue: deque[tuple[int, float, float]] = deque()  # (request, arrival, service)
    estimates: list[float] = []
    waits: list[float] = [0.0] * n
    now = 0.0

    def admit(i: int, at: float, arrived: float, service: float) -> None:
        waits[i] = at - arrived
        heapq.heappush(departures, (at + service, service))

    for i in range(n):
        now += rng.expovariate(load * slots)
        while departures and departures[0][0] <= now:
            end, service = heapq.heappop(departures)
            est.finished(end, service)
            if queue:
                j, arrived, svc = queue.popleft()
                admit(j, end, arrived, svc)
        estimates.append(est.estimate(now, len(queue), len(departures), slots))
        service = draw(rng)
        if len(departures) < slots:
            admit(i, now, now, service)
        else:
            queue.append((i, now, service))
    while queue:  # the requests still waiting when arrivals stop get their slots
        end, service = heapq.heappop(departures)
        j, arrived, svc = queue.popleft()
        admit(j, end, arrived, svc)
    return _outcome(estimates[n // 10 :], waits[n // 10 :])


def _outcome(estimates: list[float], waits: list[float]) -> Outcome:
    pairs = list(zip(estimates, waits, strict=True))
    waited = [(e, w) for e, w in pairs if w > 0]
    ratios = sorted(e / w for e, w in waited) or [math.nan]

    def pct(q: float) -> float:
        return ratios[min(len(ratios) - 1, int(q * len(ratios)))]

    return Outcome(
        requests=len(pairs),
        waited=len(waited),
        mean_wait_s=statistics.fmean(w for _, w in waited) if waited else 0.0,
        mae_all_s=statistics.fmean(abs(e - w) for e, w in pairs),
        mae_waited_s=statistics.fmean(abs(e - w) for e, w in waited) if waited else 0.0,
        ratio_p10=pct(0.1),
        ratio_p50=statistics.median(ratios),
        ratio_p90=pct(0.9),
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--slots", type=int, default=16, help="requests served at once")
    p.add_argument("--requests", type=int, default=20_000, help="per distribution and load")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    print(
        f"M/G/{args.slots}, mean service 1 s, {args.requests} requests per row "
        "(first tenth left out); ratio = estimate / actual for requests that waited"
    )
    head = (
        f"{'service':>13} {'load':>5} {'waited':>7} {'mean wait':>10} "
        f"{'MAE all':>8} {'MAE waited':>11} {'ratio p10':>10} {'p50':>6} {'p90':>6}"
    )
    print(head)
    for name, draw in DISTRIBUTIONS.items():
        for load in LOADS:
            o = simulate(draw, load, args.slots, args.requests, args.seed)
            print(
                f"{name:>13} {load:>5.2f} {o.waited / o.requests:>7.1%} {o.mean_wait_s:>9.2f}s "
                f"{o.mae_all_s:>7.2f}s {o.mae_waited_s:>10.2f}s {o.ratio_p10:>10.2f} "
                f"{o.ratio_p50:>6.2f} {o.ratio_p90:>6.2f}"
            )


if __name__ == "__main__":
    main()
