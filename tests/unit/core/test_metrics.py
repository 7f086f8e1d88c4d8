"""The metrics module's tallies, merge and exposition, without a server."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from neutrino.observability.metrics import (
    ITL_BUCKETS,
    Gaps,
    Histogram,
    Metrics,
    Raw,
    exposition,
    merge,
)
from neutrino.pipeline.state import State

MS = 1_000_000


def _times(queued: int, admitted: int, first: int | None) -> dict[str, int]:
    times: dict[str, int] = {
        State.START: 0,
        State.QUEUED: queued * MS,
        State.PROCESSING: admitted * MS,
    }
    if first is not None:
        times[State.GENERATING] = first * MS
    return times


def _samples(raw: Raw) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = exposition(raw).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_histogram_buckets_are_upper_bounds() -> None:
    h = Histogram((0.1, 1.0))
    for v in (0.1, 0.5, 1.0, 5.0):
        h.observe(v)
    assert h.counts == [1, 2, 1]
    assert h.sum == 6.6


def test_one_request_gives_each_phase_once() -> None:
    m = Metrics(lambda: {"m"})
    # received at 0, queued 2 ms, admitted 12 ms, first token 40 ms, ended 140 ms, 11 tokens
    gaps = Gaps(40 * MS)
    for k in range(1, 11):  # ten more deliveries, 10 ms apart
        gaps.add((40 + 10 * k) * MS)
    m.ended("http", "chat", "m", "ok", _times(2, 12, 40), 0, 140 * MS, (30, 11, 4, 2), gaps)
    s = _samples(m.raw())
    assert s[("neutrino_time_to_first_token_seconds_sum", (("model", "m"),))] == 0.04
    assert s[("neutrino_request_queue_time_seconds_sum", (("model", "m"),))] == 0.01
    assert s[("neutrino_request_prefill_time_seconds_sum", (("model", "m"),))] == 0.028
    assert s[("neutrino_request_decode_time_seconds_sum", (("model", "m"),))] == 0.1
    assert abs(s[("neutrino_inter_token_latency_seconds_sum", (("model", "m"),))] - 0.1) < 1e-12
    assert s[("neutrino_inter_token_latency_seconds_count", (("model", "m"),))] == 10
    assert s[("neutrino_e2e_request_latency_seconds_sum", (("model", "m"),))] == 0.14
    assert s[("neutrino_cached_tokens_total", (("model", "m"),))] == 4
    assert s[("neutrino_reasoning_tokens_total", (("model", "m"),))] == 2
    labels = (("model", "m"), ("outcome", "ok"), ("protocol", "http"), ("route", "chat"))
    assert s[("neutrino_requests_total", labels)] == 1
    assert len(ITL_BUCKETS) + 1 == sum(
        1 for k in s if k[0] == "neutrino_inter_token_latency_seconds_bucket"
    )


def test_a_model_not_served_is_no_label() -> None:
    m = Metrics(lambda: {"m"})
    m.ended("grpc", "chat", "evil-" + "x" * 50, "model_not_found", {State.START: 0}, 0, MS)
    m.ended("http", "chat", "other", "cancelled", _times(1, 2, None), 0, 3 * MS)
    assert not m.models  # no histograms for names that are not served
    keys = set(m.requests)
    assert ("grpc", "chat", "", "model_not_found") in keys
    assert ("http", "chat", "", "cancelled") in keys
    assert all(k[2] in ("", "m") for k in keys)


def test_merge_adds_up_workers() -> None:
    a, b = Metrics(lambda: {"m"}), Metrics(lambda: {"m"})
    a.ended("http", "chat", "m", "ok", _times(0, 0, 10), 0, 20 * MS, (5, 3, 0, 0))
    b.ended("http", "chat", "m", "ok", _times(0, 0, 30), 0, 40 * MS, (7, 2, 0, 0))
    b.refused("http", "chat", "bad_request")
    raws = []
    for i, m in enumerate((a, b)):
        raw = m.raw()
        raw["live"] = {"running": i + 1, "waiting": 2}
        raw["engines"] = {"e": {"connections": 2, "cancels_sent": i}}
        raws.append(raw)
    s = _samples(merge(raws))
    labels = (("model", "m"), ("outcome", "ok"), ("protocol", "http"), ("route", "chat"))
    assert s[("neutrino_requests_total", labels)] == 2
    assert s[("neutrino_prompt_tokens_total", (("model", "m"),))] == 12
    assert s[("neutrino_time_to_first_token_seconds_count", (("model", "m"),))] == 2
    assert abs(s[("neutrino_time_to_first_token_seconds_sum", (("model", "m"),))] - 0.04) < 1e-12
    assert s[("neutrino_num_requests_running", ())] == 3
    assert s[("neutrino_engine_connections", (("engine", "e"),))] == 4
    assert s[("neutrino_engine_cancel_frames_total", (("engine", "e"),))] == 1


def test_every_gap_is_observed_so_a_stall_shows() -> None:
    """A 2 s pause among 100 tokens 10 ms apart: one gap of 2 s in its bucket, 98 of
    10 ms, where one mean per request (30 ms) would have hidden it."""
    m = Metrics(lambda: {"m"})
    gaps, t = Gaps(0), 0
    for k in range(1, 100):
        t += 2000 * MS if k == 50 else 10 * MS
        gaps.add(t)
    m.ended("http", "chat", "m", "ok", _times(1, 2, 3), 0, t + 3 * MS, (5, 100, 0, 0), gaps)
    s = _samples(m.raw())

    def bucket(le: str) -> float:
        return s[("neutrino_inter_token_latency_seconds_bucket", (("le", le), ("model", "m")))]

    assert s[("neutrino_inter_token_latency_seconds_count", (("model", "m"),))] == 99
    assert bucket("0.01") == 98 and bucket("1.0") == 98
    assert bucket("2.5") == 99 and bucket("+Inf") == 99
    total = s[("neutrino_inter_token_latency_seconds_sum", (("model", "m"),))]
    assert abs(total - (2.0 + 98 * 0.01)) < 1e-9


def test_a_request_with_one_delivery_observes_no_gap() -> None:
    m = Metrics(lambda: {"m"})
    m.ended("http", "chat", "m", "ok", _times(1, 2, 3), 0, 5 * MS, (5, 1, 0, 0), None)
    s = _samples(m.raw())
    assert s[("neutrino_inter_token_latency_seconds_count", (("model", "m"),))] == 0
