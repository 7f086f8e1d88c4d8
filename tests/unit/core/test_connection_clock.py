"""The HTTP/1.1 connection clock: head, body and keep-alive deadlines (sans-IO)."""

from __future__ import annotations

import math

from neutrino.frontends.http.clock import ConnectionClock, Phase, Timeouts

T = Timeouts(head_s=15.0, body_s=30.0, keepalive_s=75.0)


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
