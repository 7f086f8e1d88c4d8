"""The run's figures (sans-IO): per-request numbers in, vLLM ``bench serve``'s figures out.

Definitions (all from the client's side, as vLLM's benchmark measures them):

* **E2E latency**: from sending a request to its last byte.
* **TTFT**: from sending to the first chunk that carries output (streamed only).
* **ITL**: the gaps between consecutive output chunks, pooled over all successful requests
  (streamed only; a chunk may hold more than one token).
* **TPOT**: per request, ``(e2e - ttft) / (output_tokens - 1)``, for requests of two or more
  output tokens (streamed only).
* **Throughputs**: successful requests, their output tokens, and their input plus output
  tokens, each divided by the run's duration (first send to last end).

Percentiles interpolate linearly between order statistics (numpy's default). Memory is
bounded: per request a few numbers; ITL gaps go into a uniform reservoir (exact until it
fills, then a seeded sample; the mean stays exact).
"""

from __future__ import annotations

import math
import random
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

ITL_RESERVOIR = 200_000
MAX_ERROR_KINDS = 32
MAX_RECORDS = 1_000_000
MAX_MESSAGE = 300


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) of ascending ``sorted_values`` (not empty), with linear
    interpolation between the two nearest ranks."""
    if not sorted_values:
        raise ValueError("no values")
    h = (len(sorted_values) - 1) * p / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (h - lo) * (sorted_values[hi] - sorted_values[lo])


def distribution(values: Iterable[float], percentiles: Sequence[float]) -> dict[str, float]:
    """Mean, median and the asked percentiles, in milliseconds, of values in seconds."""
    xs = sorted(values)
    out = {"mean": 1000.0 * math.fsum(xs) / len(xs), "median": 1000.0 * percentile(xs, 50)}
    for p in percentiles:
        out[f"p{p:g}"] = 1000.0 * percentile(xs, p)
    return out


class Reservoir:
    """A uniform sample of at most ``size`` values (Algorithm R), with the exact count and
    sum of all of them."""

    def __init__(self, size: int, rng: random.Random) -> None:
        self.size = size
        self.values = array("d")
        self.count = 0
        self.total = 0.0
        self._rng = rng

    def add_all(self, values: Iterable[float]) -> None:
        for v in values:
            self.count += 1
            self.total += v
            if len(self.values) < self.size:
                self.values.append(v)
            else:
                j = self._rng.randrange(self.count)
                if j < self.size:
                    self.values[j] = v

    @property
    def sampled(self) -> bool:
        return self.count > len(self.values)


@dataclass(frozen=True, slots=True)
class Record:
    """One request, numbers only (times in seconds from the run's start or of the request)."""

    index: int
    start: float
    e2e: float
    ok: bool
    error: str | None = None
    ttft: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    chunks: int = 0


@dataclass(slots=True)
class ErrorTally:
    count: int
    message: str  # the first one seen


class Recorder:
    """Collects every finished request and makes the summary."""

    def __init__(self, *, seed: int = 0, keep_records: bool = False) -> None:
        self.e2e = array("d")
        self.ttft = array("d")
        self.tpot = array("d")
        self.itl = Reservoir(ITL_RESERVOIR, random.Random(seed))
        self.ok = 0
        self.failed = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.without_usage = 0
        self.errors: dict[str, ErrorTally] = {}
        self.records: list[Record] | None = [] if keep_records else None
        self.records_dropped = 0

    def success(self, record: Record, gaps: Iterable[float] = ()) -> None:
        self.ok += 1
        self.e2e.append(record.e2e)
        if record.prompt_tokens is None or record.output_tokens is None:
            self.without_usage += 1
        self.input_tokens += record.prompt_tokens or 0
        out = record.output_tokens or 0
        self.output_tokens += out
        if record.ttft is not None:
            self.ttft.append(record.ttft)
            if out > 1:
                self.tpot.append((record.e2e - record.ttft) / (out - 1))
            self.itl.add_all(gaps)
        self._keep(record)

    def failure(self, record: Record, message: str) -> None:
        self.failed += 1
        kind = record.error or "error"
        tally = self.errors.get(kind)
        if tally is None and len(self.errors) >= MAX_ERROR_KINDS:
            kind = "other"
            tally = self.errors.get(kind)
        if tally is None:
            self.errors[kind] = ErrorTally(1, message[:MAX_MESSAGE])
        else:
            tally.count += 1
        self._keep(record)

    def _keep(self, record: Record) -> None:
        if self.records is None:
            return
        if len(self.records) < MAX_RECORDS:
            self.records.append(record)
        else:
            self.records_dropped += 1

    def summary(self, duration: float, percentiles: Sequence[float] = (99,)) -> dict[str, Any]:
        """The run's figures: counts, throughputs, and the latency distributions (None
        where nothing was measured: TTFT, TPOT and ITL need streamed answers)."""
        per_s = 1.0 / duration if duration > 0 else 0.0

        def dist(values: Sequence[float]) -> dict[str, float] | None:
            return distribution(values, percentiles) if values else None

        itl = dist(self.itl.values)
        if itl is not None:
            itl["mean"] = 1000.0 * self.itl.total / self.itl.count  # exact, not sampled
        return {
            "completed": self.ok,
            "failed": self.failed,
            "duration_s": duration,
            "total_input_tokens": self.input_tokens,
            "total_output_tokens": self.output_tokens,
            "requests_without_usage": self.without_usage,
            "request_throughput": self.ok * per_s,
            "output_throughput": self.output_tokens * per_s,
            "total_token_throughput": (self.input_tokens + self.output_tokens) * per_s,
            "ttft_ms": dist(self.ttft),
            "tpot_ms": dist(self.tpot),
            "itl_ms": itl,
            "e2el_ms": dist(self.e2e),
            "itl_samples": self.itl.count,
            "itl_sampled": self.itl.sampled,
            "errors": {k: {"count": t.count, "message": t.message} for k, t in self.errors.items()},
        }

    def record_dicts(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.records or ()]
