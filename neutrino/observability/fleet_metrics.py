"""The fleet's metric families: per node and per device of each node (what its agent
reported at the last poll), per catalogued model (loads, evictions, replicas).

Labels are bounded: the first ``MAX_NODES`` nodes by name get series of their own (the
``fleet_nodes`` gauge counts them all), ``MAX_DEVICES`` devices each; models are the
catalogue's, which the configuration bounds.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from neutrino.observability.jsonread import number, rows, table

PREFIX = "neutrino_"
MAX_NODES = 64
MAX_DEVICES = 16
MB = 1 << 20
_MEMORY = ("used", "free", "budget", "held", "budget_free")
_MODEL_COUNTERS = (
    ("fleet_model_loads_total", "Catalogued models loaded on a node for this server.", "loads"),
    ("fleet_model_load_failures_total", "Loads of a catalogued model that failed (the next node"
     " was tried).", "load_failures"),
    ("fleet_model_evictions_total", "Replicas unloaded to make room for another model.",
     "evictions"),
    ("fleet_model_load_seconds_total", "Time spent placing and loading each model.",
     "load_seconds"),
)  # fmt: skip


def fleet_families(fleet: Mapping[str, object]) -> Iterator[Metric]:
    """The families of the control plane's raw (``FleetPlane.raw``; none when empty)."""
    if not fleet:
        return
    nodes = _tables(fleet.get("nodes"))
    yield from _node_families(nodes)
    yield from _device_families(nodes[:MAX_NODES])
    models = _tables(fleet.get("models"))
    replicas = GaugeMetricFamily(
        PREFIX + "fleet_model_replicas",
        "Connected replicas of each catalogued model.",
        labels=("model",),
    )
    for model, counts in models:
        replicas.add_metric([model], number(counts.get("replicas", 0)))
    yield replicas
    for name, help_text, key in _MODEL_COUNTERS:
        fam = CounterMetricFamily(
            PREFIX + name.removesuffix("_total"), help_text, labels=("model",)
        )
        for model, counts in models:
            fam.add_metric([model], number(counts.get(key, 0)))
        yield fam


def _tables(value: object) -> list[tuple[str, Mapping[str, object]]]:
    """A JSON object's members, each a JSON object, by name."""
    return sorted(((k, table(v)) for k, v in table(value).items()), key=lambda kv: kv[0])


def _node_families(nodes: Sequence[tuple[str, Mapping[str, object]]]) -> Iterator[Metric]:
    count = GaugeMetricFamily(
        PREFIX + "fleet_nodes", "Node agents known, up or down.", labels=("state",)
    )
    ups = sum(1 for _, n in nodes if n.get("up"))
    count.add_metric(["up"], ups)
    count.add_metric(["down"], len(nodes) - ups)
    yield count
    up = GaugeMetricFamily(
        PREFIX + "fleet_node_up", "1 while a node agent answers its polls.", labels=("node",)
    )
    downs = CounterMetricFamily(
        PREFIX + "fleet_node_downs", "Times a node was marked down.", labels=("node",)
    )
    memory = GaugeMetricFamily(
        PREFIX + "fleet_node_memory_bytes",
        "A node's host memory: used, free, its agent's budget, what its models hold, and what"
        " the budget leaves for another.",
        labels=("node", "kind"),
    )
    models = GaugeMetricFamily(
        PREFIX + "fleet_node_models", "Models on a node, by their state there.",
        labels=("node", "state"),
    )  # fmt: skip
    for name, n in nodes[:MAX_NODES]:
        up.add_metric([name], 1.0 if n.get("up") else 0.0)
        downs.add_metric([name], number(n.get("downs", 0)))
        mem = table(n.get("memory"))
        for kind in _MEMORY:
            if f"{kind}_mb" in mem:
                memory.add_metric([name, kind], number(mem[f"{kind}_mb"]) * MB)
        counts = table(n.get("models"))
        for state in ("loading", "loaded", "failed", "unloaded"):
            models.add_metric([name, state], number(counts.get(state, 0)))
    yield up
    yield downs
    yield memory
    yield models


def _device_families(nodes: Sequence[tuple[str, Mapping[str, object]]]) -> Iterator[Metric]:
    labels = ("node", "device")
    vram = GaugeMetricFamily(
        PREFIX + "fleet_device_memory_bytes", "A GPU's memory: total, used and free.",
        labels=("node", "device", "kind"),
    )  # fmt: skip
    util = GaugeMetricFamily(
        PREFIX + "fleet_device_utilization_ratio",
        "A GPU's busy share over NVML's last sample period.",
        labels=labels,
    )
    temp = GaugeMetricFamily(
        PREFIX + "fleet_device_temperature_celsius", "A GPU's temperature.", labels=labels
    )
    for name, n in nodes:
        for d in map(table, rows(n.get("devices"))[:MAX_DEVICES]):
            device = str(d.get("index"))
            for kind in ("total", "used", "free"):
                value = d.get(f"vram_{kind}_mb")
                if value is not None:
                    vram.add_metric([name, device, kind], number(value) * MB)
            if d.get("utilization") is not None:
                util.add_metric([name, device], number(d["utilization"]))
            if d.get("temperature_c") is not None:
                temp.add_metric([name, device], number(d["temperature_c"]))
    yield vram
    yield util
    yield temp
