"""The report's figures against values computed by hand."""

from __future__ import annotations

import random

import pytest

from neutrino.loadgen.stats import (
    MAX_ERROR_KINDS,
    Record,
    Recorder,
    Reservoir,
    distribution,
    percentile,
)


def test_percentile_interpolates_between_ranks() -> None:
    xs = [1.0, 2.0, 3.0, 4.0]
    assert percentile(xs, 0) == 1.0
    assert percentile(xs, 100) == 4.0
    assert percentile(xs, 50) == 2.5  # halfway between the 2nd and 3rd
    # rank (4 - 1) * 0.99 = 2.97: 3 + 0.97 * (4 - 3)
    assert percentile(xs, 99) == pytest.approx(3.97)
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_distribution_is_in_milliseconds() -> None:
    d = distribution([0.003, 0.001, 0.002], [90])
    assert d == pytest.approx({"mean": 2.0, "median": 2.0, "p90": 2.8})


def _ok(index: int, e2e: float, ttft: float | None, prompt: int, out: int) -> Record:
    return Record(index, 0.0, e2e, True, None, ttft, prompt, out, out)


def test_summary_by_hand() -> None:
    rec = Recorder()
    rec.success(_ok(0, 0.1, 0.01, 10, 11), gaps=[0.005, 0.015])
    rec.success(_ok(1, 0.2, 0.02, 20, 1), gaps=[])
    rec.success(_ok(2, 0.4, 0.04, 30, 21), gaps=[0.010])
    rec.failure(Record(3, 0.0, 0.05, False, "http 404 model_not_found"), "no such model")
    rec.failure(Record(4, 0.0, 0.05, False, "http 404 model_not_found"), "later message")
    rec.failure(Record(5, 0.0, 1.0, False, "timeout"), "too slow")
    s = rec.summary(duration=2.0, percentiles=[99])

    assert (s["completed"], s["failed"]) == (3, 3)
    assert (s["total_input_tokens"], s["total_output_tokens"]) == (60, 33)
    assert s["request_throughput"] == pytest.approx(1.5)
    assert s["output_throughput"] == pytest.approx(16.5)
    assert s["total_token_throughput"] == pytest.approx(46.5)
    # E2E over the successful requests only: 100, 200, 400 ms.
    assert s["e2el_ms"]["mean"] == pytest.approx(700 / 3)
    assert s["e2el_ms"]["median"] == pytest.approx(200)
    assert s["e2el_ms"]["p99"] == pytest.approx(200 + 0.98 * 200)  # rank 1.98
    assert s["ttft_ms"]["median"] == pytest.approx(20)
    # TPOT for requests of 2+ output tokens: (100-10)/10 = 9 ms, (400-40)/20 = 18 ms.
    assert s["tpot_ms"]["mean"] == pytest.approx(13.5)
    assert s["tpot_ms"]["p99"] == pytest.approx(9 + 0.99 * 9)
    # ITL pools every gap: 5, 15, 10 ms.
    assert s["itl_ms"] == pytest.approx({"mean": 10.0, "median": 10.0, "p99": 14.9})
    assert (s["itl_samples"], s["itl_sampled"]) == (3, False)
    assert s["errors"] == {
        "http 404 model_not_found": {"count": 2, "message": "no such model"},
        "timeout": {"count": 1, "message": "too slow"},
    }


def test_not_streamed_has_no_ttft_tpot_itl() -> None:
    rec = Recorder()
    rec.success(_ok(0, 0.5, None, 5, 50))
    s = rec.summary(1.0)
    assert s["ttft_ms"] is None and s["tpot_ms"] is None and s["itl_ms"] is None
    assert s["e2el_ms"]["mean"] == pytest.approx(500)


def test_answers_without_usage_are_counted_apart() -> None:
    rec = Recorder()
    rec.success(Record(0, 0.0, 0.1, True, None, 0.01, None, None, 3), gaps=[0.01, 0.02])
    s = rec.summary(1.0)
    assert s["requests_without_usage"] == 1
    assert s["total_output_tokens"] == 0
    assert s["tpot_ms"] is None  # no token count, no TPOT


def test_nothing_succeeded() -> None:
    rec = Recorder()
    rec.failure(Record(0, 0.0, 0.1, False, "connection"), "refused")
    s = rec.summary(0.0)
    assert s["completed"] == 0 and s["e2el_ms"] is None and s["request_throughput"] == 0


def test_error_kinds_are_bounded() -> None:
    rec = Recorder()
    for i in range(MAX_ERROR_KINDS + 5):
        rec.failure(Record(i, 0.0, 0.0, False, f"kind {i}"), "x" * 1000)
    s = rec.summary(1.0)
    assert len(s["errors"]) == MAX_ERROR_KINDS + 1
    assert s["errors"]["other"]["count"] == 5
    assert all(len(e["message"]) <= 300 for e in s["errors"].values())


def test_records_only_when_asked() -> None:
    off, on = Recorder(), Recorder(keep_records=True)
    for rec in (off, on):
        rec.success(_ok(0, 0.1, 0.01, 1, 2))
    assert off.record_dicts() == []
    assert on.record_dicts()[0]["output_tokens"] == 2


def test_reservoir_exact_until_full_then_a_bounded_sample() -> None:
    res = Reservoir(100, random.Random(1))
    res.add_all(float(i) for i in range(100))
    assert sorted(res.values) == [float(i) for i in range(100)] and not res.sampled
    res.add_all(float(i) for i in range(100, 10_000))
    assert len(res.values) == 100 and res.sampled
    assert res.count == 10_000
    assert res.total == sum(range(10_000))  # the mean stays exact
    # A uniform sample of 0..9999: its median is near the middle.
    assert 3000 < percentile(sorted(res.values), 50) < 7000
