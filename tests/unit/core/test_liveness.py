"""The engine liveness rule: any read, or the engine reading ours, is a sign of life."""

from __future__ import annotations

from neutrino.engine.liveness import Liveness


def test_reads_keep_a_peer_alive_without_pongs() -> None:
    alive = Liveness(window_s=2.0, now=0.0)
    for t in range(1, 20):  # a read every second: tokens, not pongs
        assert alive.check(float(t), reads=t, pending_write=0)


def test_a_peer_working_through_our_backlog_is_alive() -> None:
    alive = Liveness(window_s=2.0, now=0.0)
    pending = 10_000_000
    for t in range(1, 20):  # it sends nothing, but what we wrote for it keeps shrinking
        pending -= 100_000
        assert alive.check(float(t), reads=0, pending_write=pending)


def test_a_peer_that_neither_sends_nor_reads_is_dead_after_the_window() -> None:
    alive = Liveness(window_s=2.0, now=0.0)
    assert alive.check(1.0, reads=5, pending_write=4096)
    assert alive.check(2.0, reads=5, pending_write=4096)
    assert alive.check(3.0, reads=5, pending_write=4096)  # 2 s since the last sign
    assert not alive.check(3.5, reads=5, pending_write=4096)
    assert not alive.check(4.0, reads=5, pending_write=8192)  # growing is no sign either
