"""The open loop's Poisson arrivals: seeded, bounded, and exponential gaps of mean 1/rate."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from neutrino.loadgen.schedule import poisson_arrivals


def test_same_seed_same_schedule() -> None:
    a = list(poisson_arrivals(5.0, random.Random(7), count=100))
    b = list(poisson_arrivals(5.0, random.Random(7), count=100))
    c = list(poisson_arrivals(5.0, random.Random(8), count=100))
    assert a == b and a != c


def test_bounded_by_count_and_duration() -> None:
    times = list(poisson_arrivals(10.0, random.Random(0), count=50))
    assert len(times) == 50 and times[0] == 0.0
    assert all(x < y for x, y in itertools.pairwise(times))
    timed = list(poisson_arrivals(10.0, random.Random(0), duration=3.0))
    assert timed and all(t < 3.0 for t in timed)
    both = list(poisson_arrivals(10.0, random.Random(0), count=5, duration=100.0))
    assert len(both) == 5
    with pytest.raises(ValueError):
        next(poisson_arrivals(10.0, random.Random(0)))
    with pytest.raises(ValueError):
        next(poisson_arrivals(0.0, random.Random(0), count=1))


def test_gaps_are_exponential_with_mean_one_over_rate() -> None:
    rate, n = 20.0, 20_000
    times = list(poisson_arrivals(rate, random.Random(3), count=n))
    gaps = [b - a for a, b in itertools.pairwise(times)]
    mean = sum(gaps) / len(gaps)
    assert mean == pytest.approx(1 / rate, rel=0.03)
    # An exponential's coefficient of variation is 1 and P(gap < mean) = 1 - 1/e.
    sd = math.sqrt(sum((g - mean) ** 2 for g in gaps) / len(gaps))
    assert sd / mean == pytest.approx(1.0, rel=0.05)
    below = sum(g < 1 / rate for g in gaps) / len(gaps)
    assert below == pytest.approx(1 - math.exp(-1), abs=0.015)
    # Over a long window the count is about rate * duration.
    window = list(poisson_arrivals(rate, random.Random(4), duration=500.0))
    assert len(window) == pytest.approx(rate * 500.0, rel=0.03)
