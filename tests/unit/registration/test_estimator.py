"""The queue estimator's arithmetic (its accuracy under load: python -m bench.estimator)."""

from __future__ import annotations

import math

import pytest

from neutrino.registration.estimator import QueueEstimator


def test_no_wait_while_a_slot_is_free() -> None:
    est = QueueEstimator(initial_service_s=2.0)
    assert est.estimate(0.0, queued=0, inflight=3, slots=4) == 0.0
    assert est.estimate(0.0, queued=1, inflight=2, slots=4) == 0.0  # a free slot takes it
    assert est.estimate(0.0, queued=0, inflight=0, slots=0) == 0.0  # slots at least 1


def test_wait_is_departures_ahead_over_the_saturated_rate() -> None:
    est = QueueEstimator(initial_service_s=2.0)  # the prior before any completion
    assert est.estimate(0.0, queued=0, inflight=4, slots=4) == pytest.approx(0.5)
    for t in range(10):
        est.finished(float(t), 4.0)
    assert est.mean_service_s == pytest.approx(4.0)
    # (queued + 1) departures at slots / E[S] = 1 per second
    assert est.estimate(10.0, queued=5, inflight=4, slots=4) == pytest.approx(6.0)
    assert est.estimate(10.0, queued=0, inflight=4, slots=4) == pytest.approx(1.0)


def test_plain_mean_then_a_window_wide_ewma() -> None:
    est = QueueEstimator(window=4, horizon_s=1e9)
    for t, s in enumerate([1.0, 2.0, 3.0, 6.0]):
        est.finished(float(t), s)
    assert est.mean_service_s == pytest.approx(3.0)  # the mean of the first window
    est.finished(4.0, 8.0)
    assert est.mean_service_s == pytest.approx(3.0 + 0.4 * 5.0)  # alpha = 2 / (4 + 1)
    for t in range(5, 200):
        est.finished(float(t), 1.0)
    assert est.mean_service_s == pytest.approx(1.0, abs=1e-6)  # old samples fade


def test_a_quiet_spell_makes_the_old_mean_stale() -> None:
    est = QueueEstimator(window=64, horizon_s=10.0)
    for t in range(64):
        est.finished(t * 0.01, 1.0)
    est.finished(1000.0, 5.0)  # long after: the new sample nearly replaces the mean
    assert est.mean_service_s == pytest.approx(5.0, rel=1e-3)
    est2 = QueueEstimator(window=64, horizon_s=10.0)
    for t in range(64):
        est2.finished(t * 0.01, 1.0)
    est2.finished(0.65, 5.0)  # right after: one sample of an EWMA
    assert est2.mean_service_s == pytest.approx(1.0 + 4.0 * 2 / 65, rel=1e-3)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_nonsense_service_times_are_ignored(bad: float) -> None:
    est = QueueEstimator(initial_service_s=1.5)
    est.finished(1.0, bad)
    assert est.mean_service_s == 1.5


def test_tokens_per_second_converges_and_decays() -> None:
    est = QueueEstimator(tokens_tau_s=5.0)
    assert est.tokens_per_s(0.0) == 0.0
    for i in range(1, 1001):  # 100 tokens every 0.1 s: 1000 tokens/s for 100 s
        est.tokens(i * 0.1, 100)
    assert est.tokens_per_s(100.0) == pytest.approx(1000.0, rel=0.02)
    assert est.tokens_per_s(105.0) == pytest.approx(est.tokens_per_s(100.0) / math.e)
    assert est.tokens_per_s(200.0) < 1.0


def test_bad_parameters() -> None:
    with pytest.raises(ValueError):
        QueueEstimator(window=0)
    with pytest.raises(ValueError):
        QueueEstimator(initial_service_s=0)
