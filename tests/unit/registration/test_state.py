"""Registration's sans-IO rules: backoff delays and what a registrar logs."""

from __future__ import annotations

import random

import pytest

from neutrino.backoff import Backoff
from neutrino.registration.state import Phase, Registration


def test_backoff_grows_to_its_maximum_within_the_upper_half() -> None:
    b = Backoff(0.2, 3.0, rng=random.Random(7))
    ceilings = []
    for _ in range(12):
        top = b.ceiling()
        delay = b.next()
        assert top / 2 <= delay <= top
        ceilings.append(top)
    assert ceilings[:5] == pytest.approx([0.2, 0.4, 0.8, 1.6, 3.0])
    assert set(ceilings[4:]) == {3.0}
    b.reset()
    assert b.ceiling() == 0.2 and b.tries == 0


def test_backoff_is_jittered_and_never_overflows() -> None:
    delays = {Backoff(1.0, 1.0, rng=random.Random(seed)).next() for seed in range(20)}
    assert len(delays) == 20  # a fleet that failed together spreads out
    b = Backoff(0.1, 5.0)
    for _ in range(5000):
        assert b.next() <= 5.0


@pytest.mark.parametrize(("initial", "maximum", "factor"), [(0, 1, 2), (2, 1, 2), (1, 2, 0.5)])
def test_backoff_refuses_nonsense(initial: float, maximum: float, factor: float) -> None:
    with pytest.raises(ValueError):
        Backoff(initial, maximum, factor)


def _registration() -> Registration:
    return Registration("Sombrero at b:1", Backoff(0.1, 1.0, rng=random.Random(1)))


def test_one_warning_per_change_not_per_retry() -> None:
    r = _registration()
    notes = []
    for _ in range(5):  # the balancer is down at start
        r.registering()
        delay, note = r.failed("UNAVAILABLE: connection refused")
        assert delay > 0
        notes.append(note)
    assert notes[0] is not None and notes[0].level == "warning"
    assert "cannot register with Sombrero at b:1" in notes[0].message
    assert notes[1:] == [None] * 4
    assert r.phase is Phase.REGISTERING and not r.registered and r.attempts == 5

    r.registering()
    ok = r.succeeded()
    assert (ok.level, ok.message) == ("info", "registered with Sombrero at b:1")
    assert r.registered and r.last_error == "UNAVAILABLE: connection refused"

    delay, lost = r.failed("report stream broke: UNAVAILABLE")
    assert lost is not None and lost.level == "warning" and "lost" in lost.message
    assert delay <= 0.1  # the backoff started again on success
    r.registering()
    assert r.failed("again")[1] is None
    r.registering()
    assert r.succeeded().message == "registered again with Sombrero at b:1"
    assert r.registrations == 2


def test_sequence_counts_across_registrations_and_the_snapshot() -> None:
    r = _registration()
    r.registering()
    r.succeeded()
    assert [r.next_sequence() for _ in range(3)] == [1, 2, 3]
    r.reported()
    r.failed("x")
    r.registering()
    r.succeeded()
    assert r.next_sequence() == 4
    snap = r.snapshot()
    assert snap == {
        "phase": "registered",
        "registered": True,
        "attempts": 2,
        "registrations": 2,
        "reports_sent": 1,
        "last_error": "x",
    }


def test_final_phases_stay_final() -> None:
    r = _registration()
    r.finish(deregistered=True)
    r.registering()
    r.failed("late")
    assert r.phase is Phase.DEREGISTERED and r.final and not r.registered
    r2 = _registration()
    r2.finish(deregistered=False)
    assert r2.snapshot()["phase"] == "stopped"


def test_errors_are_kept_short() -> None:
    r = _registration()
    r.registering()
    _, note = r.failed("x" * 5000)
    assert r.last_error is not None and len(r.last_error) == 300
    assert note is not None and len(note.message) < 400
