"""The connection clock's body rules (sans-IO): a pause between reads, and a minimum rate."""

from __future__ import annotations

from neutrino.frontends.http.clock import ConnectionClock, Timeouts


def _body(clock: ConnectionClock) -> None:
    clock.begin()
    clock.head_done()


def test_a_dribbled_body_is_due_when_its_rate_falls_short() -> None:
    clock = ConnectionClock(Timeouts(body_s=30, min_body_rate=100, body_grace_s=2), now=0)
    _body(clock)
    clock.body_bytes = 10
    clock.read_ended(0.0)
    assert clock.deadline == 2.1  # the grace, and 10 bytes' worth at 100 a second
    for t in (1, 2):  # ten bytes a second: each read well within body_s
        clock.body_bytes += 10
        clock.read_ended(float(t))
        assert not clock.expired(float(t))
    clock.body_bytes += 10
    clock.read_ended(3.0)  # 40 bytes by 3 s: it was due at 2.4, so at once
    assert clock.expired(3.01)


def test_a_fast_body_meets_only_the_pause_between_reads() -> None:
    clock = ConnectionClock(Timeouts(body_s=30, min_body_rate=100, body_grace_s=2), now=0)
    _body(clock)
    clock.body_bytes = 100_000
    clock.read_ended(1.0)
    assert clock.deadline == 31.0
    off = ConnectionClock(Timeouts(body_s=30, min_body_rate=0), now=0)
    _body(off)
    off.read_ended(1.0)
    assert off.deadline == 31.0  # no minimum


def test_the_next_request_starts_its_own_count() -> None:
    clock = ConnectionClock(Timeouts(body_s=30, min_body_rate=100, body_grace_s=2), now=0)
    _body(clock)
    clock.body_bytes = 10
    clock.read_ended(0.0)
    clock.message_done()
    clock.served(5.0)
    _body(clock)
    assert clock.body_bytes == 0
    clock.read_ended(50.0)
    assert clock.deadline == 52.0
