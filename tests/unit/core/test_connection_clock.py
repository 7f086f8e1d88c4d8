"""The HTTP/1.1 connection clock: head, body and keep-alive deadlines (sans-IO)."""

from __future__ import annotations

import math

from neutrino.frontends.http.h1.clock import ConnectionClock, Phase, Timeouts

T = Timeouts(head_s=15.0, body_s=30.0, keepalive_s=75.0, min_body_rate=0)


def test_a_new_connection_must_speak_within_the_head_timeout() -> None:
    c = ConnectionClock(T, now=100.0)
    assert c.phase is Phase.IDLE and not c.heard and not c.waiting
    assert not c.expired(114.9) and c.expired(115.0)


def test_a_dribbled_head_runs_out_from_its_first_read() -> None:
    c = ConnectionClock(T, now=0.0)
    c.begin()
    assert c.waiting and c.heard and c.deadline == math.inf
    c.read_ended(now=10.0)  # first byte at 10 s
    c.read_ended(now=20.0)  # more header bytes do not extend the head's deadline
    assert c.deadline == 25.0 and c.expired(25.0)


def test_the_body_may_pause_only_so_long_between_reads() -> None:
    c = ConnectionClock(T, now=0.0)
    c.begin()
    c.head_done()
    c.read_ended(now=1.0)
    c.read_ended(now=20.0)  # progress: the pause starts again
    assert c.phase is Phase.BODY and c.deadline == 50.0


def test_no_deadline_while_answering_then_keepalive() -> None:
    c = ConnectionClock(T, now=0.0)
    c.begin()
    c.head_done()
    c.message_done()  # the whole request came in one read: no clock read at all
    assert c.phase is Phase.BUSY and not c.waiting and not c.expired(1e9)
    c.served(now=5.0)
    phase: Phase = c.phase  # (mypy keeps the narrowing of the assert above)
    assert phase is Phase.IDLE and not c.heard and c.deadline == 80.0


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
