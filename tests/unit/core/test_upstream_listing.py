"""An upstream's model listing (``engine/upstream/listing.py``): plain OpenAI lists, vLLM's
context lengths, llama.cpp's router with each model's state and failed loads."""

from __future__ import annotations

from typing import Any

import pytest

from neutrino.engine.messages import ModelState
from neutrino.engine.upstream import listing
from neutrino.engine.upstream.listing import Listed


def test_a_plain_list_has_no_states_and_vllm_says_its_context() -> None:
    doc = {"data": [{"id": "a"}, {"id": "b", "max_model_len": 8192}, {"id": 3}, "x"]}
    models = listing.models_of(doc)
    assert models == {"a": Listed(), "b": Listed(context=8192)}
    assert not listing.loads_on_demand(models)


@pytest.mark.parametrize("doc", [None, [], {"data": "x"}, {"object": "list"}])
def test_what_is_not_a_list_lists_nothing(doc: Any) -> None:
    assert listing.models_of(doc) == {}


def test_a_router_lists_each_model_with_its_state() -> None:
    doc = {
        "data": [
            {"id": "a", "status": {"value": "loaded", "args": ["llama-server"]}},
            {"id": "b", "status": {"value": "loading"}},
            {"id": "c", "status": {"value": "unloaded"}},
            {"id": "d", "status": {"value": "unloaded", "failed": True, "exit_code": 1}},
            {"id": "e", "status": {"value": "unloaded", "failed": True}},
            {"id": "f", "status": {"value": "sleeping"}},  # a state not known: no state
        ]
    }
    models = listing.models_of(doc)
    assert models["a"] == Listed(state=ModelState.LOADED)
    assert models["b"] == Listed(state=ModelState.LOADING)
    assert models["c"] == Listed(state=ModelState.UNLOADED)
    assert models["d"] == Listed(state=ModelState.UNLOADED, failed="its process exited with 1")
    assert models["e"].failed == "it failed"
    assert models["f"] == Listed()
    assert listing.loads_on_demand(models)


@pytest.mark.parametrize(
    ("doc", "most"),
    [
        ({"role": "router", "max_instances": 4}, 4),
        ({"role": "router", "max_instances": 0}, 0),  # no limit
        ({"role": "router"}, 0),
        ({"total_slots": 4}, None),  # one model's server
        (None, None),
    ],
)
def test_props_say_whether_it_is_a_router_and_how_many_it_holds(doc: Any, most: int | None) -> None:
    assert listing.router_max(doc) == most
