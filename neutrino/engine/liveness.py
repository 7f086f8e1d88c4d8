"""Sans-IO: whether an engine connection's peer still shows signs of life.

Any byte the engine sends is proof of life, not only the pong to our ping: a saturated
engine streaming tokens is alive even when its pongs queue behind them. So is an engine
that reads what we send it (our pending writes to it shrink): its pong may wait behind a
backlog of our queries and cancels that it is working through. Only a peer that neither
sends nor reads for the whole window is taken for dead.
"""

from __future__ import annotations


class Liveness:
    __slots__ = ("_pending", "_reads", "last", "window_s")

    def __init__(self, window_s: float, now: float) -> None:
        self.window_s = window_s
        self.last = now  # when the peer last showed life
        self._reads = 0
        self._pending = 0

    def check(self, now: float, reads: int, pending_write: int) -> bool:
        """True while the peer is alive. ``reads``: a count that grows with every read
        from the peer; ``pending_write``: bytes we still hold for it."""
        if reads != self._reads or pending_write < self._pending:
            self.last = now
        self._reads = reads
        self._pending = pending_write
        return now - self.last <= self.window_s
