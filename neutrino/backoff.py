"""Delays between tries that grow with each failure in a row (sans-IO), one rule for
every retry loop: engine connections (``engine/pool.py``), worker restarts
(``restarts.py``) and registration (``registration/``)."""

from __future__ import annotations

import random


class Backoff:
    """Exponential backoff: try ``n`` (from 0) waits ``ceiling = min(maximum, initial *
    factor ** n)``, or with ``jitter`` a uniformly drawn time in ``[ceiling / 2, ceiling]``.

    The upper half keeps tries apart however the draw falls (full jitter, ``[0,
    ceiling]``, can retry at once), and the lower half spreads a fleet that lost its
    balancer at the same moment. ``reset()`` after a success starts again from ``initial``.
    """

    __slots__ = ("_factor", "_initial", "_jitter", "_maximum", "_rng", "_tries")

    def __init__(
        self,
        initial: float,
        maximum: float,
        factor: float = 2.0,
        rng: random.Random | None = None,
        *,
        jitter: bool = True,
    ) -> None:
        if not 0 < initial <= maximum or factor < 1:
            raise ValueError("need 0 < initial <= maximum and factor >= 1")
        self._initial = initial
        self._maximum = maximum
        self._factor = factor
        self._rng = rng or random.Random()
        self._jitter = jitter
        self._tries = 0

    @property
    def tries(self) -> int:
        return self._tries

    def ceiling(self) -> float:
        """The longest the next delay can be."""
        if self._tries > 64:  # factor ** tries would overflow long after reaching maximum
            return self._maximum
        return min(self._maximum, self._initial * self._factor**self._tries)

    def next(self) -> float:
        """The delay before the next try (and counts the try)."""
        top = self.ceiling()
        self._tries += 1
        return top * (0.5 + 0.5 * self._rng.random()) if self._jitter else top

    def reset(self) -> None:
        self._tries = 0
