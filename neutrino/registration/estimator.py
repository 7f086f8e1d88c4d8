"""How long would a request sent now wait before it starts? A queue estimator for the
load report (``estimated_wait_s``), learned from the requests that finished recently.

The model: ``slots`` requests run at once and the others wait in FIFO order. A new request
starts when ``ahead = queued + inflight - slots + 1`` requests have finished (0 or less: a
slot is free, the wait is 0). While every slot is busy, requests finish at
``slots / E[S]`` per second whatever the distribution of the service time ``S`` (Little's
law over the slots), so the estimate is ``ahead * E[S] / slots``. E[S] is learned from the
service times of finished requests (admitted to end, which already includes the slowdown
of a full batch): a plain mean of the first ``window`` completions, then an exponentially
weighted mean over about the last ``window``; a completion after a long quiet spell
weighs more (the old mean is stale), by ``1 - exp(-gap / horizon_s)``.

Why not the measured completion rate: below saturation it is the arrival rate, not what
the slots can do, so it would overestimate the first waits of a burst; slots over the mean
service time is the saturated rate at once. What it cannot know is how long the running
requests have already run, so the first completion after an arrival comes sooner or later
than ``E[S] / slots``: short waits are estimated loosely (at load 0.8 the median of
estimate / actual is 1.1-1.25, its 10th-90th percentiles 0.55-3.6), a queue of some
length well (load 0.95: median 1.05-1.07, 0.6-1.9), and the growing queue of an overload
closely (median 0.97-1.0, 0.76-1.28): ``python -m bench.estimator``.

Also a tokens-per-second meter: ``tokens(now, n)`` once per request (or per batch), and
``tokens_per_s(now)`` an exponentially decaying rate over ``tokens_tau_s``.

Every call is O(1) and the state is a few floats.
"""

from __future__ import annotations

import math

__all__ = ["QueueEstimator"]


class QueueEstimator:
    __slots__ = (
        "_alpha",
        "_count",
        "_horizon",
        "_last",
        "_mean",
        "_rate",
        "_rate_t",
        "_tau",
        "_window",
    )

    def __init__(
        self,
        window: int = 64,
        initial_service_s: float = 1.0,
        horizon_s: float = 60.0,
        tokens_tau_s: float = 10.0,
    ) -> None:
        if window < 1 or initial_service_s <= 0 or horizon_s <= 0 or tokens_tau_s <= 0:
            raise ValueError("window, initial_service_s, horizon_s, tokens_tau_s must be > 0")
        self._window = window
        self._alpha = 2.0 / (window + 1)  # an EWMA's weight for a span of `window` samples
        self._horizon = horizon_s
        self._mean = initial_service_s  # E[S]: the prior until a request finishes
        self._count = 0  # completions seen (up to `window`; then it no longer matters)
        self._last = -math.inf  # when the last one finished
        self._tau = tokens_tau_s
        self._rate = 0.0  # tokens per second, as of _rate_t
        self._rate_t = 0.0

    @property
    def mean_service_s(self) -> float:
        """The learned mean service time (the prior before any completion)."""
        return self._mean

    def finished(self, now: float, service_s: float) -> None:
        """A request finished at ``now`` after ``service_s`` seconds from admission."""
        if not service_s >= 0 or math.isinf(service_s):  # NaN, negative or infinite: ignore
            return
        if self._count < self._window:
            self._count += 1
            weight = 1.0 / self._count
        else:
            weight = self._alpha
        gap = now - self._last
        if gap > 0:
            weight = max(weight, -math.expm1(-gap / self._horizon))
        self._last = max(self._last, now)
        self._mean += weight * (service_s - self._mean)

    def estimate(self, now: float, queued: int, inflight: int, slots: int) -> float:
        """Seconds a request arriving at ``now`` would wait for a slot: 0 when one is free,
        else ``(queued + inflight - slots + 1) * E[S] / slots`` (``slots`` at least 1)."""
        slots = max(1, slots)
        ahead = queued + inflight - slots + 1
        return ahead * self._mean / slots if ahead > 0 else 0.0

    def tokens(self, now: float, n: int) -> None:
        """``n`` tokens were generated (counted at ``now``)."""
        self._rate = self.tokens_per_s(now) + n / self._tau
        self._rate_t = max(self._rate_t, now)

    def tokens_per_s(self, now: float) -> float:
        """Tokens per second, an exponentially decaying average over ``tokens_tau_s``."""
        age = now - self._rate_t
        return self._rate * math.exp(-age / self._tau) if age > 0 else self._rate
