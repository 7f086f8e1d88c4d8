"""Prometheus metrics: every metric Neutrino exports, defined here once.

Nothing here runs per token. A request is tallied once, when it ends, from the times its
lifecycle already keeps (``pipeline/state.py``) and the counts its outcome already holds:
time to first token, end-to-end, queue, prompt-processing and decode times, token counts,
and the gaps between its deliveries of tokens, which the request tallied itself (``Gaps``:
a clock read and a bucket's count per delivery, merged here once).
Engine connections count their own events (``engine/stats.py``); gauges are read when
scraped.

Labels are bounded: protocols, routes and outcomes come from the fixed sets below; a model
label is a model an engine serves ("" for any other name, so a client cannot create
series by naming models). The values are plain numbers in plain containers: :meth:`raw`
gives them as JSON, :func:`merge` adds up several processes' raws (``--workers``) and
:func:`exposition` renders one in Prometheus' text format.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from typing import TypedDict

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from neutrino.errors import ErrorKind
from neutrino.observability.fleet_metrics import fleet_families
from neutrino.observability.jsonread import number, table

PREFIX = "neutrino_"
PROTOCOLS = ("http", "grpc", "quic")
# What a request asked for: the generation routes and each modality's.
ROUTES = (
    "chat", "completion", "messages", "responses", "embed", "rerank", "transcribe", "speak",
    "detect",
)  # fmt: skip
OUTCOMES = ("ok", "cancelled", *(k.spec.label for k in ErrorKind))

# Seconds. Time to first token spans a cached short prompt on an idle engine (ms) to a
# long prompt queued behind others (minutes); gaps between tokens span a fast small model
# (~1 ms) to a saturated large one (~1 s).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0)  # fmt: skip
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15,
               0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0)  # fmt: skip
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 20.0,
                   30.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0)  # fmt: skip
QUEUE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                 30.0, 60.0, 120.0, 300.0)  # fmt: skip
TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000,
                 50000, 100000, 200000)  # fmt: skip

# name (after the prefix), help, buckets: the per-model histograms, in ModelSeries order.
HISTOGRAMS: tuple[tuple[str, str, tuple[float, ...]], ...] = (
    ("time_to_first_token_seconds", "Time from receiving a request to its first token.",
     TTFT_BUCKETS),
    ("inter_token_latency_seconds",
     "Gaps between deliveries of a request's tokens (every gap, tallied when it ends).",
     ITL_BUCKETS),
    ("e2e_request_latency_seconds", "Time from receiving a request to its end.",
     LATENCY_BUCKETS),
    ("request_queue_time_seconds", "Time a request waited for an engine slot.",
     QUEUE_BUCKETS),
    ("request_prefill_time_seconds",
     "Prompt processing: from a request's admission to its first token.", LATENCY_BUCKETS),
    ("request_decode_time_seconds", "From a request's first token to its last.",
     LATENCY_BUCKETS),
    ("request_prompt_tokens", "Prompt tokens per request.", TOKEN_BUCKETS),
    ("request_generation_tokens", "Generated tokens per request.", TOKEN_BUCKETS),
)  # fmt: skip
TOKEN_COUNTERS = (
    ("prompt_tokens_total", "Prompt tokens of finished requests."),
    ("generation_tokens_total", "Tokens generated for finished requests."),
    ("cached_tokens_total", "Prompt tokens the engine found in its prefix cache."),
    ("reasoning_tokens_total", "Generated tokens that were reasoning."),
)
# The engine connections' own counts (engine/stats.py), per engine.
ENGINE_COUNTERS = (
    ("engine_reconnects_total", "Engine connections lost and opened again.", "reconnects"),
    ("engine_heartbeat_misses_total", "Engine connections dropped for missing heartbeats.",
     "heartbeat_misses"),
    ("engine_cancel_frames_total", "Cancel frames sent to the engine.", "cancels_sent"),
    ("tokens_after_disconnect_total",
     "Tokens the engine produced for a request after its client had gone.",
     "tokens_after_disconnect"),
)  # fmt: skip

# The request states (pipeline.state.State) whose times the histograms read.
_GEN = "generating"
_PROC = "processing"
_QUEUED = "queued"


class ModelRaw(TypedDict):
    """A served model's tallies in a raw: each histogram's bucket counts and sum, and
    the token counters."""

    hists: list[tuple[list[int], float]]
    tokens: list[int]


class ProcessRaw(TypedDict):
    state: str
    pid: int | None
    restarts: int


class Raw(TypedDict, total=False):
    """A process's metrics as JSON values (:meth:`Metrics.raw` and what the server adds
    to it), or several processes' merged (:func:`merge`)."""

    requests: list[tuple[str, str, str, str, int]]  # protocol, route, model, outcome, n
    models: dict[str, ModelRaw]
    live: dict[str, float]
    engines: dict[str, dict[str, float]]
    processes: dict[str, ProcessRaw]
    lifecycle: dict[str, dict[str, float]]
    routing: dict[str, dict[str, object]]  # counts, and picks: counts by engine
    failover: dict[str, object]  # counts, and counts by engine or by reason
    fleet: Mapping[str, object]  # the control plane's (fleet_metrics.py)


class Histogram:
    """Bucket counts (the last: above every bound) and a sum; cumulative when rendered."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value


ITL_NS = tuple(round(b * 1e9) for b in ITL_BUCKETS)


class Gaps:
    """The gaps between one request's deliveries of tokens, in inter-token latency's
    buckets (nanoseconds), merged into the histogram once, when the request ends: a stall
    inside an answer shows as the gap it was, not as a rise of the answer's mean."""

    __slots__ = ("counts", "last", "total")

    def __init__(self, first_ns: int) -> None:
        self.counts = [0] * (len(ITL_NS) + 1)
        self.last = first_ns
        self.total = 0  # ns

    def add(self, now_ns: int) -> None:
        gap = now_ns - self.last
        self.last = now_ns
        self.counts[bisect_left(ITL_NS, gap)] += 1
        self.total += gap


class ModelSeries:
    """One served model's histograms (in HISTOGRAMS' order) and token counters."""

    __slots__ = ("hists", "tokens")

    def __init__(self) -> None:
        self.hists = [Histogram(b) for _, _, b in HISTOGRAMS]
        self.tokens = [0, 0, 0, 0]  # prompt, generated, cached, reasoning


class Metrics:
    """This process's tallies. ``served`` says whether a model name may be a label."""

    def __init__(self, served: Callable[[], Container[str]]) -> None:
        self._served = served
        # Requests for a model no engine serves are counted from the start, at zero: a
        # client naming models it may not use adds no series.
        self.requests: dict[tuple[str, str, str, str], int] = {
            (protocol, route, "", "model_not_found"): 0
            for protocol in PROTOCOLS[:2]
            for route in ROUTES
        }
        self.models: dict[str, ModelSeries] = {}

    def refused(self, protocol: str, route: str, outcome: str) -> None:
        """A request refused before the pipeline took it (no key, bad JSON ...)."""
        key = (protocol, route, "", outcome)
        self.requests[key] = self.requests.get(key, 0) + 1

    def ended(
        self,
        protocol: str,
        route: str,
        model: str,
        outcome: str,
        times: Mapping[str, int],
        start_ns: int,
        end_ns: int,
        usage: tuple[int, int, int, int] = (0, 0, 0, 0),
        gaps: Gaps | None = None,
    ) -> None:
        """A request ended: ``times`` are its lifecycle's (monotonic ns), ``start_ns`` when
        it was received, ``usage`` its prompt, generated, cached and reasoning tokens,
        ``gaps`` those between its deliveries of tokens."""
        label = model if model in self._served() else ""
        key = (protocol, route, label, outcome)
        self.requests[key] = self.requests.get(key, 0) + 1
        if not label:
            return
        series = self.models.get(label)
        if series is None:
            series = self.models[label] = ModelSeries()
        _observe(series, times, start_ns, end_ns, usage)
        if gaps is not None:
            itl = series.hists[1]
            itl.counts = [a + b for a, b in zip(itl.counts, gaps.counts, strict=True)]
            itl.sum += gaps.total * 1e-9

    def raw(self) -> Raw:
        """The tallies as JSON values (see :func:`merge`)."""
        return {
            "requests": [(*k, n) for k, n in self.requests.items()],
            "models": {
                name: {
                    "hists": [(h.counts, h.sum) for h in s.hists],
                    "tokens": s.tokens,
                }
                for name, s in self.models.items()
            },
        }


def _observe(
    series: ModelSeries,
    times: Mapping[str, int],
    start: int,
    end: int,
    usage: tuple[int, int, int, int],
) -> None:
    """One request's observations: the only per-request work of the metrics, written out
    (a histogram's observe is two lines; calling it eight times costs more than them)."""
    ttft, _itl, e2e, queue, prefill, decode, n_prompt, n_gen = series.hists
    v = (end - start) * 1e-9
    e2e.counts[bisect_left(LATENCY_BUCKETS, v)] += 1
    e2e.sum += v
    admitted = times.get(_PROC)
    if admitted is None:  # refused before an engine slot: no other phase to observe
        return
    v = (admitted - times[_QUEUED]) * 1e-9
    queue.counts[bisect_left(QUEUE_BUCKETS, v)] += 1
    queue.sum += v
    prompt, generated, cached, reasoning = usage
    first = times.get(_GEN)
    if first is not None:
        v = (first - start) * 1e-9
        ttft.counts[bisect_left(TTFT_BUCKETS, v)] += 1
        ttft.sum += v
        v = (first - admitted) * 1e-9
        prefill.counts[bisect_left(LATENCY_BUCKETS, v)] += 1
        prefill.sum += v
        v = (end - first) * 1e-9
        decode.counts[bisect_left(LATENCY_BUCKETS, v)] += 1
        decode.sum += v
    n_prompt.counts[bisect_left(TOKEN_BUCKETS, prompt)] += 1
    n_prompt.sum += prompt
    n_gen.counts[bisect_left(TOKEN_BUCKETS, generated)] += 1
    n_gen.sum += generated
    tokens = series.tokens
    tokens[0] += prompt
    tokens[1] += generated
    tokens[2] += cached
    tokens[3] += reasoning


# ---------------------------------------------------------------------- several processes


def merge(raws: Iterable[Raw]) -> Raw:
    """Several processes' raws (``Metrics.raw`` and the live values of
    :class:`Exposition`) added up into one."""
    requests: dict[tuple[str, str, str, str], int] = {}
    models: dict[str, ModelRaw] = {}
    live: dict[str, float] = {}
    engines: dict[str, dict[str, float]] = {}
    processes: dict[str, ProcessRaw] = {}
    lifecycle: dict[str, dict[str, float]] = {}
    routing: dict[str, dict[str, object]] = {}
    failover: dict[str, object] = {"ejections": {}}
    fleet: Mapping[str, object] = {}
    for raw in raws:
        fleet = fleet or raw.get("fleet", {})  # one process runs the control plane
        for protocol, route, model, outcome, n in raw.get("requests", ()):
            key = (protocol, route, model, outcome)
            requests[key] = requests.get(key, 0) + n
        for name, m in raw.get("models", {}).items():
            got = models.get(name)
            if got is None:
                models[name] = {"hists": [(list(c), s) for c, s in m["hists"]],
                                "tokens": list(m["tokens"])}  # fmt: skip
                continue
            got["hists"] = [
                ([a + b for a, b in zip(mine, theirs, strict=True)], s + t)
                for (mine, s), (theirs, t) in zip(got["hists"], m["hists"], strict=True)
            ]
            got["tokens"] = [a + b for a, b in zip(got["tokens"], m["tokens"], strict=True)]
        for k, v in raw.get("live", {}).items():
            live[k] = live.get(k, 0) + v
        for name, stats in raw.get("engines", {}).items():
            _add(engines.setdefault(name, {}), stats)
        processes.update(raw.get("processes", {}))  # one process runs each
        for name, counts in raw.get("lifecycle", {}).items():
            _add(lifecycle.setdefault(name, {}), counts)
        for model, tallies in raw.get("routing", {}).items():
            _add_counts(routing.setdefault(model, {"picks": {}}), tallies)
        _add_counts(failover, raw.get("failover", {}))
    merged: Raw = {
        "requests": [(*k, n) for k, n in requests.items()],
        "models": models,
        "live": live,
        "engines": engines,
        "processes": processes,
        "lifecycle": lifecycle,
        "routing": routing,
        "failover": failover,
    }
    if fleet:
        merged["fleet"] = fleet
    return merged


def _add(into: dict[str, float], counts: Mapping[str, float]) -> None:
    for k, v in counts.items():
        into[k] = into.get(k, 0) + v


def _add_counts(into: dict[str, object], raw: Mapping[str, object]) -> None:
    """``raw``'s counts added into ``into``'s: numbers, and tables of numbers (by engine,
    by reason)."""
    for k, v in raw.items():
        if isinstance(v, Mapping):
            mine = into.setdefault(k, {})
            if isinstance(mine, dict):
                for name, n in v.items():
                    mine[name] = mine.get(name, 0) + n
        else:
            into[k] = number(into.get(k, 0)) + number(v)


# ---------------------------------------------------------------------- exposition

LIVE_GAUGES = (
    ("num_requests_running", "Requests at an engine now.", "running"),
    ("num_requests_waiting", "Requests waiting in the queue for an engine slot.", "waiting"),
)
EVENT_COUNTERS = (
    ("slow_readers_dropped_total", "Streams dropped because their client stopped reading.",
     "slow_readers_dropped"),
    ("connection_timeouts_total",
     "Connections closed because a request's head or body did not arrive in time (408).",
     "request_timeouts"),
    ("auth_refused_total", "Requests refused for their API key (401, 403, key limits).",
     "auth_refused"),
)  # fmt: skip


def families(raw: Raw) -> Iterator[Metric]:
    """The metric families of one (possibly merged) raw, in Prometheus' model."""
    req = CounterMetricFamily(
        PREFIX + "requests",
        "Requests that ended, by protocol, route, served model and outcome.",
        labels=("protocol", "route", "model", "outcome"),
    )
    for *labels, n in sorted(raw.get("requests", ()), key=lambda r: r[:4]):
        req.add_metric(labels, n)
    yield req
    models = sorted(raw.get("models", {}).items())
    for i, (name, help_text, bounds) in enumerate(HISTOGRAMS):
        fam = HistogramMetricFamily(PREFIX + name, help_text, labels=("model",))
        for model, m in models:
            counts, total = m["hists"][i]
            cumulative, buckets = 0, []
            for bound, n in zip((*bounds, float("inf")), counts, strict=True):
                cumulative += n
                buckets.append((_le(bound), cumulative))
            fam.add_metric([model], buckets, total)
        yield fam
    for i, (name, help_text) in enumerate(TOKEN_COUNTERS):
        tokens = CounterMetricFamily(
            PREFIX + name.removesuffix("_total"), help_text, labels=("model",)
        )
        for model, m in models:
            tokens.add_metric([model], m["tokens"][i])
        yield tokens
    yield from _live_families(raw)


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


def _live_families(raw: Raw) -> Iterator[Metric]:
    live = raw.get("live", {})
    for name, help_text, key in LIVE_GAUGES:
        yield GaugeMetricFamily(PREFIX + name, help_text, value=live.get(key, 0))
    for name, help_text, key in EVENT_COUNTERS:
        yield CounterMetricFamily(
            PREFIX + name.removesuffix("_total"), help_text, value=live.get(key, 0)
        )
    engines = sorted(raw.get("engines", {}).items())
    up = GaugeMetricFamily(
        PREFIX + "engine_connections", "Open connections to each engine.", labels=("engine",)
    )
    for engine, stats in engines:
        up.add_metric([engine], stats.get("connections", 0))
    yield up
    for name, help_text, key in ENGINE_COUNTERS:
        fam = CounterMetricFamily(
            PREFIX + name.removesuffix("_total"), help_text, labels=("engine",)
        )
        for engine, stats in engines:
            fam.add_metric([engine], stats.get(key, 0))
        yield fam
    yield from _process_families(raw)
    yield from _lifecycle_families(raw)
    yield from _routing_families(raw)
    yield from fleet_families(raw.get("fleet", {}))


# Models loaded on demand (engine/fleet/lifecycle.py): metric, help, key of its counts.
LIFECYCLE_COUNTERS = (
    ("model_loads_total", "Models loaded on demand (a request's, a pin's or an admin's).",
     "loads"),
    ("model_evictions_total", "Models unloaded to make room for another.", "evictions"),
    ("model_load_seconds_total", "Time spent loading each model.", "load_seconds"),
)  # fmt: skip


def _lifecycle_families(raw: Raw) -> Iterator[Metric]:
    yield from _per_model(sorted(raw.get("lifecycle", {}).items()), LIFECYCLE_COUNTERS)


def _per_model(
    models: Sequence[tuple[str, Mapping[str, object]]], rows: tuple[tuple[str, str, str], ...]
) -> Iterator[Metric]:
    """A counter family per row of ``rows`` (metric, help, key), a series per model."""
    for name, help_text, key in rows:
        fam = CounterMetricFamily(
            PREFIX + name.removesuffix("_total"), help_text, labels=("model",)
        )
        for model, counts in models:
            fam.add_metric([model], number(counts.get(key, 0)))
        yield fam


# Routing over replicas (engine/fleet/routing.py): metric, help, key of its counts.
ROUTING_COUNTERS = (
    ("routing_prefix_hits_total",
     "Requests routed to the replica that took their prompt's prefix before.", "prefix_hits"),
    ("routing_prefix_misses_total",
     "Requests of the prefix policy whose prefix had no replica that could take them.",
     "prefix_misses"),
    ("routing_fallbacks_total",
     "Times the routing self-check found a model's routing skewed and fell back to power of"
     " two choices.", "fallbacks"),
)  # fmt: skip


def _routing_families(raw: Raw) -> Iterator[Metric]:
    models = sorted(raw.get("routing", {}).items())
    yield from _per_model(models, ROUTING_COUNTERS)
    picks = CounterMetricFamily(
        PREFIX + "routing_decisions",
        "Requests of a model routed to each of its replicas (models served by two or more).",
        labels=("model", "engine"),
    )
    for model, counts in models:
        for engine, n in sorted(table(counts.get("picks")).items()):
            picks.add_metric([model, engine], number(n))
    yield picks
    failover = raw.get("failover", {})
    yield CounterMetricFamily(
        PREFIX + "routing_retries",
        "Requests sent to another replica after theirs failed before the first token.",
        value=number(failover.get("retries", 0)),
    )
    yield CounterMetricFamily(
        PREFIX + "routing_retries_refused",
        "Retries the retry budget did not allow (the request failed with its error).",
        value=number(failover.get("retries_refused", 0)),
    )
    ejections = CounterMetricFamily(
        PREFIX + "engine_ejections",
        "Times an engine was taken out of rotation for failing requests in a row.",
        labels=("engine",),
    )
    for engine, n in sorted(table(failover.get("ejections")).items()):
        ejections.add_metric([engine], number(n))
    yield ejections
    yield from _migration_families(failover)


_MIGRATION_FAMILIES = (
    ("migrations", "Answers that went on on another replica after their first token, by why"
     " they moved (lost: the engine connection; engine_error; drained)."),
    ("migrations_refused", "Answers that could not move and ended with their engine's error"
     " (limit: the migration limit reached; no_replica: none left that continues answers)."),
)  # fmt: skip


def _migration_families(failover: Mapping[str, object]) -> Iterator[Metric]:
    for key, help_text in _MIGRATION_FAMILIES:
        family = CounterMetricFamily(PREFIX + key, help_text, labels=("reason",))
        for reason, n in sorted(table(failover.get(key)).items()):
            family.add_metric([reason], number(n))
        yield family


PROCESS_STATES = ("starting", "ready", "restarting", "stopped")


def _process_families(raw: Raw) -> Iterator[Metric]:
    """Managed engine processes: state (one series per state, 1 for the current one),
    pid and restarts, per engine."""
    processes = sorted(raw.get("processes", {}).items())
    state = GaugeMetricFamily(
        PREFIX + "engine_process_state",
        "Managed engine processes: 1 for the state each is in.",
        labels=("engine", "state"),
    )
    pid = GaugeMetricFamily(
        PREFIX + "engine_process_pid", "Managed engine processes' pids (0: none).",
        labels=("engine",),
    )  # fmt: skip
    restarts = CounterMetricFamily(
        PREFIX + "engine_process_restarts",
        "Managed engine processes started again after they died or were not ready in time.",
        labels=("engine",),
    )
    for engine, p in processes:
        for s in PROCESS_STATES:
            state.add_metric([engine, s], 1.0 if p.get("state") == s else 0.0)
        pid.add_metric([engine], p.get("pid") or 0)
        restarts.add_metric([engine], p.get("restarts", 0))
    yield state
    yield pid
    yield restarts


class _Collector:
    def __init__(self, collect: Callable[[], Raw]) -> None:
        self._collect = collect

    def collect(self) -> Iterator[Metric]:
        return families(self._collect())


def exposition(raw: Raw, extra: Iterable[Collector] = ()) -> bytes:
    """``raw`` in Prometheus' text format (version 0.0.4); ``extra``: more collectors
    (the process's own: CPU, memory, file descriptors)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(lambda: raw))
    for collector in extra:
        registry.register(collector)
    return generate_latest(registry)
