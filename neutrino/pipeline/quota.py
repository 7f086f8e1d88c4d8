"""Per-key rate limits: requests and tokens per minute, tokens per day.

Each limit counts in fixed windows of wall-clock time (the minute, the UTC day), in
counters a :class:`~neutrino.pipeline.quota_store.Store` keeps: the process's own, or
Redis shared by every worker and instance. A request adds its one request and its
tokens (its prompt and an estimate of its answer) to every window of its key; past a
limit it takes them back and is refused (429, ``Retry-After`` the window's end); at its
end the tokens are corrected to what it used. Each choice of ``n`` is one request, as
in the key's ``max_concurrency``.

What a request learns (:class:`QuotaState`: each window's limit, what is left, when it
resets) is what the front ends render as each protocol's headers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from neutrino.config import KeyConfig
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.pipeline.quota_store import Store

MINUTE = 60
DAY = 86400


@dataclass(frozen=True, slots=True)
class Window:
    """One limit as a request left it: its limit, what is left, seconds to its reset."""

    limit: int
    remaining: int
    reset_s: float


@dataclass(frozen=True, slots=True)
class QuotaState:
    requests: Window | None = None  # per minute
    tokens: Window | None = None  # per minute
    day: Window | None = None  # tokens per UTC day

    @property
    def retry_after_s(self) -> int:
        """Whole seconds until every exhausted window has reset (at least 1)."""
        waits = [
            w.reset_s for w in (self.requests, self.tokens, self.day) if w and w.remaining <= 0
        ]
        return max(1, math.ceil(max(waits, default=1.0)))


class Rates:
    """Where a front end finds its request's quota once the pipeline decided it (the
    last choice admitted, or the refusal's)."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: QuotaState | None = None


def _share(limit: int, window_s: int) -> int:
    """A per-minute limit's share of a window of ``window_s``."""
    if not limit or window_s == MINUTE:
        return limit
    return max(1, math.ceil(limit * window_s / MINUTE))


def _windows(
    key: KeyConfig, cost: int, now: float, window_s: int
) -> list[tuple[str, int, int, int]]:
    """(counter, limit, amount, span) of each of ``key``'s limits for one request."""
    name = key.name
    at, day = int(now // window_s), int(now // DAY)
    out = []
    if key.requests_per_minute:
        limit = _share(key.requests_per_minute, window_s)
        out.append((f"{name}:rpm:{window_s}:{at}:rpm", limit, 1, window_s))
    if key.tokens_per_minute:
        limit = _share(key.tokens_per_minute, window_s)
        out.append((f"{name}:tpm:{window_s}:{at}:tpm", limit, cost, window_s))
    if key.tokens_per_day:
        out.append((f"{name}:tpd:{day}:tpd", key.tokens_per_day, cost, DAY))
    return out


def _state(key: KeyConfig, counts: dict[str, int], now: float, window_s: int) -> QuotaState:
    def window(kind: str, limit: int, span: int) -> Window | None:
        if not limit:
            return None
        used = counts.get(kind, 0)
        return Window(limit, max(0, limit - used), span - now % span)

    return QuotaState(
        window("rpm", _share(key.requests_per_minute, window_s), window_s),
        window("tpm", _share(key.tokens_per_minute, window_s), window_s),
        window("tpd", key.tokens_per_day, DAY),
    )


class Quotas:
    """Every key's limits, counted in ``store``."""

    def __init__(self, store: Store, window_s: int = MINUTE) -> None:
        self.store = store
        self.window_s = window_s  # the per-minute limits count in windows this long

    def _too_large(self, key: KeyConfig, cost: int) -> NeutrinoError | None:
        minute = _share(key.tokens_per_minute, self.window_s) if key.tokens_per_minute else 0
        for limit, what in ((minute, f"{self.window_s} s"), (key.tokens_per_day, "day")):
            if limit and cost > limit:  # a 429 would invite retries that cannot succeed
                return NeutrinoError(
                    ErrorKind.BAD_REQUEST,
                    f"this request needs about {cost} tokens (its prompt and max_tokens), more "
                    f"than this API key's {limit} tokens per {what}; send less or lower "
                    "max_tokens",
                    code="tokens_exceed_limit",
                )
        return None

    async def admit(self, key: KeyConfig, cost: int, rates: Rates | None) -> None:
        """Count one request of ``key`` costing ``cost`` tokens, or refuse it (429 with
        the time to wait; 400 for one that no window could ever hold)."""
        too_large = self._too_large(key, cost)
        if too_large is not None:
            raise too_large
        now = time.time()
        windows = _windows(key, cost, now, self.window_s)
        totals = await self.store.add([(c, amount, span) for c, _, amount, span in windows])
        counts = {
            c.rpartition(":")[2]: total for (c, *_), total in zip(windows, totals, strict=True)
        }
        over = [c for (c, limit, _, _), total in zip(windows, totals, strict=True) if total > limit]
        if over:
            self.store.add_soon([(c, -amount, span) for c, _, amount, span in windows])
            for c, _, amount, _ in windows:  # what is left, without this request
                counts[c.rpartition(":")[2]] -= amount
            exhausted = {c.rpartition(":")[2] for c in over}
            for c, limit, _, _ in windows:  # an exhausted window has nothing left
                kind = c.rpartition(":")[2]
                if kind in exhausted:
                    counts[kind] = max(counts[kind], limit)
            state = _state(key, counts, now, self.window_s)
            if rates is not None:
                rates.state = state
            raise NeutrinoError(
                ErrorKind.RATE_LIMITED,
                f"this API key is over its {_named(exhausted)}; retry in {state.retry_after_s} s",
                retry_after_s=state.retry_after_s,
            )
        if rates is not None:
            rates.state = _state(key, counts, now, self.window_s)

    def settle(self, key: KeyConfig, delta: int) -> None:
        """A request of ``key`` used ``delta`` tokens more (or fewer) than it was charged."""
        if delta and (key.tokens_per_minute or key.tokens_per_day):
            now = time.time()
            windows = _windows(key, delta, now, self.window_s)
            self.store.add_soon(
                [(c, amount, span) for c, _, amount, span in windows if ":rpm:" not in c]
            )


_NAMES = {"rpm": "requests per minute", "tpm": "tokens per minute", "tpd": "tokens per day"}


def _named(kinds: set[str]) -> str:
    return " and ".join(_NAMES[k] for k in ("rpm", "tpm", "tpd") if k in kinds)
