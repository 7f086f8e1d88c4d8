"""Routing over replicas (``engine/fleet/routing.py``): the policies, prefix keys, consistent
hashing with bounded loads, the prefix memory's bound, and the self-check. Replicas here
are plain objects with a name, requests in flight and a capacity: all a policy reads."""

from __future__ import annotations

import random
import re
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from neutrino.config import ConfigError, from_mapping
from neutrino.config.routing import RoutingConfig
from neutrino.engine.fleet.routing import Routing, prefix_keys


@dataclass
class Rep:
    name: str
    inflight: int = 0
    capacity: int = 8
    reported: int = 0  # what its engine says it holds, from every client


def _reps(n: int = 3, capacity: int = 8) -> list[Rep]:
    return [Rep(f"r{i}", 0, capacity) for i in range(n)]


def _prompt(system: int, user: int, length: int = 400) -> list[int]:
    """A prompt whose first 256 ids are system prompt ``system``'s, the rest ``user``'s."""
    return [1000 + system] * 256 + [5000 + user + i for i in range(length - 256)]


def test_prefix_keys_cover_doubling_blocks_up_to_the_limit() -> None:
    ids = list(range(1000))
    keys = prefix_keys(ids, 64, 2048)
    assert len(keys) == 4  # 64, 128, 256, 512 ids (1024 > 1000)
    assert len(prefix_keys(ids, 64, 300)) == 3  # up to 256
    assert prefix_keys(ids[:63], 64, 2048) == []
    other = [*ids[:300], 7, *ids[301:]]
    assert prefix_keys(other, 64, 2048)[:3] == keys[:3]  # id 300 is in the fourth key only
    assert prefix_keys(other, 64, 2048)[3] != keys[3]
    assert prefix_keys(list(ids), 64, 2048) == keys  # the same ids, the same keys


def test_round_robin_takes_each_in_turn() -> None:
    routing = Routing(RoutingConfig(policy="round_robin"))
    reps = _reps()
    got = [routing.choose("m", reps, []).name for _ in range(9)]
    assert got == ["r0", "r1", "r2"] * 3


def test_least_outstanding_takes_the_least_loaded_for_its_capacity() -> None:
    routing = Routing(RoutingConfig(policy="least_outstanding"))
    reps = [Rep("small", 2, 4), Rep("big", 5, 16), Rep("busy", 3, 4)]
    assert routing.choose("m", reps, []).name == "big"  # 5/16 < 2/4 < 3/4


def test_power_of_two_takes_the_less_loaded_of_two() -> None:
    routing = Routing(RoutingConfig(policy="power_of_two"), rng=random.Random(7))
    reps = [Rep("a", 6), Rep("b", 0), Rep("c", 3)]
    got = Counter(routing.choose("m", reps, []).name for _ in range(300))
    assert got["a"] == 0  # the most loaded never wins a draw
    assert got["b"] > got["c"] > 0


def test_a_shared_prefix_sticks_to_one_replica_while_it_has_room() -> None:
    routing = Routing(RoutingConfig())
    reps = _reps()
    first = routing.choose("m", reps, _prompt(1, 0))
    for turn in range(1, 20):  # new user turns after the same system prompt
        assert routing.choose("m", reps, _prompt(1, turn * 1000)) is first
    state = routing.models["m"]
    assert state.hits == 19 and state.misses == 1


def test_a_holder_over_its_bound_passes_requests_on_and_keeps_its_prefix() -> None:
    routing = Routing(RoutingConfig(balance_factor=1.25))
    reps = _reps()
    holder = routing.choose("m", reps, _prompt(1, 0))
    holder.inflight = 3  # the others idle: 1.25 x (3 + 1) / 3 -> at most 2
    spill = routing.choose("m", reps, _prompt(1, 1))
    assert spill is not holder
    holder.inflight = 0
    assert routing.choose("m", reps, _prompt(1, 0)) is holder  # its own longest prefix


def test_new_prefixes_spread_over_the_ring() -> None:
    routing = Routing(RoutingConfig())
    reps = _reps()
    got = Counter(routing.choose("m", reps, _prompt(s, 0)).name for s in range(300))
    assert set(got) == {"r0", "r1", "r2"}
    assert min(got.values()) > 50  # 100 each, give or take the ring's unevenness


def test_the_ring_is_the_same_in_every_router() -> None:
    a, b = Routing(RoutingConfig()), Routing(RoutingConfig())
    reps = _reps()
    for s in range(40):
        assert a.choose("m", reps, _prompt(s, 0)).name == b.choose("m", reps, _prompt(s, 0)).name


def test_a_short_prompt_has_no_prefix_and_goes_to_the_less_loaded() -> None:
    routing = Routing(RoutingConfig(block_tokens=64), rng=random.Random(1))
    reps = [Rep("a", 4), Rep("b", 0)]
    assert routing.choose("m", reps, list(range(10))).name == "b"
    assert routing.prefix_count == 0


def test_the_prefix_memory_is_bounded() -> None:
    routing = Routing(RoutingConfig(max_prefixes=100))
    reps = _reps()
    for s in range(200):
        routing.choose("m", reps, _prompt(s, 0))
    assert routing.prefix_count == 100


def test_models_are_routed_apart_and_each_may_have_its_policy() -> None:
    cfg = RoutingConfig(policy="prefix", models={"rr": "round_robin"})
    routing = Routing(cfg)
    reps = _reps()
    assert [routing.choose("rr", reps, _prompt(1, 0)).name for _ in range(3)] == ["r0", "r1", "r2"]
    routing.choose("p", reps, _prompt(1, 0))
    snap = routing.snapshot()["models"]
    assert snap["rr"]["policy"] == "round_robin" and snap["p"]["policy"] == "prefix"  # type: ignore[index]


def test_the_self_check_falls_back_when_a_loaded_replica_takes_too_much() -> None:
    cfg = RoutingConfig(balance_factor=100, self_check_window=20)  # a bound that holds nothing
    routing = Routing(cfg, rng=random.Random(3))
    reps = _reps()
    holder = routing.choose("m", reps, _prompt(1, 0))
    for turn in range(30):
        holder.inflight = min(turn, 6)  # it fills up while the others stay idle
        routing.choose("m", reps, _prompt(1, turn))
    state = routing.models["m"]
    assert state.fallbacks == 1 and state.fallback_until > 0
    got = Counter(routing.choose("m", reps, _prompt(1, 99)).name for _ in range(30))
    assert got[holder.name] == 0  # power of two choices: the loaded one loses every draw
    assert routing.snapshot()["models"]["m"]["fallback"] is True  # type: ignore[index]


def test_the_self_check_leaves_a_quiet_prefix_alone() -> None:
    routing = Routing(RoutingConfig(self_check_window=20))
    reps = _reps()
    for turn in range(100):  # one at a time: the holder is never loaded
        routing.choose("m", reps, _prompt(1, turn))
    assert routing.models["m"].fallbacks == 0
    assert routing.models["m"].shares == {routing.choose("m", reps, _prompt(1, 0)).name: 20}


def test_the_routing_section() -> None:
    cfg = from_mapping(
        {
            "routing": {
                "policy": "power_of_two",
                "balance_factor": 2,
                "models": {"qwen": {"policy": "round_robin"}},
            }
        }
    ).routing
    assert cfg.policy_of("qwen") == "round_robin" and cfg.policy_of("other") == "power_of_two"
    assert cfg.balance_factor == 2.0
    for bad, message in [
        ({"policy": "random"}, "must be one of"),
        ({"balance_factor": 0.5}, "balance_factor must be >= 1"),
        ({"models": {"q": {"policy": "x"}}}, "policy must be one of"),
        ({"models": {"q": {"weight": 1}}}, "one key, policy"),
        ({"nope": 1}, "unknown key"),
    ]:
        with pytest.raises(ConfigError, match=message):
            from_mapping({"routing": bad})


def test_the_docs_routing_section_loads_as_written() -> None:
    readme = (Path(__file__).parents[3] / "docs" / "routing.md").read_text()
    at = readme.index("## Replicas: routing and failover")
    block = re.search(r"```toml\n(.*?)```", readme[at:], re.S)
    assert block is not None
    cfg = from_mapping(tomllib.loads(block.group(1))).routing
    assert cfg == RoutingConfig(models={"qwen2.5-7b": "round_robin"})  # the defaults, shown


def test_what_an_engine_reports_counts_when_it_is_more_than_ours() -> None:
    routing = Routing(RoutingConfig(policy="least_outstanding"))
    shared = Rep("shared", inflight=1, capacity=8, reported=7)  # other front ends use it
    quiet = Rep("quiet", inflight=3, capacity=8)
    assert routing.choose("m", [shared, quiet], []).name == "quiet"
    shared.reported = 0  # its engine says nothing: our own count stands
    assert routing.choose("m", [shared, quiet], []).name == "shared"
