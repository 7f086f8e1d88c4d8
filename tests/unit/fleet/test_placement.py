"""The placement rules, sans-IO: what fits where, which node is chosen, what is evicted."""

from __future__ import annotations

from typing import Any

from neutrino.config import CatalogueEntry
from neutrino.config.fleet import Replicas
from neutrino.fleet import placement
from neutrino.fleet.topology import NodeState, Topology


def node(
    name: str,
    free_mb: int = 0,
    models: dict[str, dict[str, Any]] | None = None,
    devices: list[tuple[int, int]] = (),  # type: ignore[assignment]
    harnesses: tuple[str, ...] = ("llamacpp",),
) -> NodeState:
    """A node as its polls would describe it: budget room, models, GPUs (total, free)."""
    n = NodeState(name, f"http://{name}:1", up=True)
    n.discovery = {
        "harnesses": [{"name": h, "available": True} for h in harnesses],
        "devices": [{"index": i, "vram_total_mb": t} for i, (t, _) in enumerate(devices)],
    }
    n.health = {
        "memory": {"budget_free_mb": free_mb},
        "devices": [{"index": i, "vram_free_mb": f} for i, (_, f) in enumerate(devices)],
    }
    n.models = {m: {"id": m, "state": "loaded", **e} for m, e in (models or {}).items()}
    return n


CPU = CatalogueEntry("m", "m.gguf", memory_mb=400)
GPU = CatalogueEntry("g", "g", harness="llamacpp", vram_mb=30000, min_devices=2,
                     min_device_vram_mb=20000)  # fmt: skip


def test_a_cpu_model_fits_the_budget_left_beside_loads_in_progress() -> None:
    n = node("a", free_mb=500)
    assert placement.fit(CPU, n) == placement.Spot("a", (), 100)
    assert placement.fit(CPU, n, reserved_mb=200) is None
    assert placement.fit(CPU, n, reserved_mb=200, freed_mb=150) == placement.Spot("a", (), 50)


def test_a_gpu_model_takes_the_devices_with_most_room_above_its_minimum() -> None:
    n = node("g1", devices=[(24000, 16000), (16000, 16000), (24000, 20000), (80000, 1000)])
    spot = placement.fit(GPU, n)
    assert spot is not None and spot.devices == (0, 2)  # device 1 is too small, 3 too full
    assert placement.fit(GPU, node("g2", devices=[(24000, 14000), (24000, 20000)])) is None
    assert placement.fit(GPU, node("g3", devices=[(24000, 24000)])) is None  # one device


def test_the_node_chosen_is_a_pinned_one_then_the_roomiest_and_never_one_that_holds_it() -> None:
    nodes = [node("a", 1000), node("b", 2000), node("c", 300), node("d", 5000, harnesses=())]
    assert placement.choose(CPU, nodes, set(), set(), {}).node == "b"  # type: ignore[union-attr]
    pinned = CatalogueEntry("m", "m.gguf", memory_mb=400, pinned_on=("a",),
                            replicas=Replicas(0, 2))  # fmt: skip
    assert placement.choose(pinned, nodes, set(), set(), {}).node == "a"  # type: ignore[union-attr]
    assert placement.choose(CPU, nodes, {"b"}, {"a"}, {}) is None  # c is too small, d can't run it
    down = node("e", 9000)
    down.up = False
    assert placement.choose(CPU, [down], set(), set(), {}) is None


def test_eviction_takes_the_least_recently_used_models_that_may_go() -> None:
    a = node("a", 100, {"old": {"memory_mb": 400}, "new": {"memory_mb": 400}})
    b = node("b", 0, {"older": {"memory_mb": 300, "memory_used_mb": 350},
                       "pinned": {"memory_mb": 400}})  # fmt: skip
    used = {("a", "old"): 10.0, ("a", "new"): 50.0, ("b", "older"): 5.0, ("b", "pinned"): 1.0}

    def last(n: str, m: str) -> float:
        return used[(n, m)]

    plan = placement.evict(CPU, [a, b], set(), set(), {}, lambda n, m: m != "pinned", last)
    # b: "older" frees 350 (measured above its 300): 350 < 400, and "pinned" may not go;
    # a: "old" frees 400: 100 + 400 >= 400.
    assert plan == placement.Plan(placement.Spot("a", (), 100), ("old",), 10.0)
    busy = {"old"}
    plan = placement.evict(CPU, [a, b], set(), set(), {},
                           lambda n, m: m != "pinned" and m not in busy, last)  # fmt: skip
    assert plan is not None and plan.victims == ("new",)
    assert placement.evict(CPU, [a, b], set(), set(), {}, lambda n, m: False, last) is None


def test_a_node_is_marked_down_after_failed_polls_and_up_at_its_answer() -> None:
    t = Topology()
    t.add("a", "http://a:1", "tok")
    assert t.answered("a", 1.0, {"memory": {}}, [{"id": "m", "state": "loaded"}])
    assert not t.failed("a", 2.0, "refused", down_after=2)
    assert t.nodes["a"].up and t.failed("a", 3.0, "refused", down_after=2)
    n = t.nodes["a"]
    assert not n.up and n.downs == 1 and n.models == {} and n.error == "refused"
    assert t.answered("a", 4.0, {"memory": {}}, []) and n.up and n.failures == 0
