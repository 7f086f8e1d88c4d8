"""Past one machine, with real engines: three node agents on three loopback addresses,
each with its own memory budget and models folder, and one front server placing the
catalogue's models on them. SmolLM2-135M-Instruct (its GGUF under four names) in our
llama.cpp engine, answered through the openai SDK.

The budgets (each SmolLM2 replica is catalogued at 400 MB; its engine holds ~340 MB):
node-a 300 MB holds none; node-b 1000 MB holds the pinned model and one more; node-c
500 MB holds one. So two models fit beside the pin, and a third evicts the least
recently used one.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.node import GGUF, NodeAgent, alive
from tests.support.procs import NeutrinoProc, free_port, wait_for

pytest.importorskip("llama_cpp", reason="the llamacpp extra is not installed")
pytestmark = [
    pytest.mark.skipif(not GGUF.is_file(), reason=f"{GGUF} is missing (make install)"),
    pytest.mark.timeout(300),
]

PINNED = "smollm2-pinned"
MODELS = ("smollm2-x", "smollm2-y", "smollm2-z")
BUDGETS = {"node-a": ("127.0.0.2", "300M"), "node-b": ("127.0.0.3", "1000M"),
           "node-c": ("127.0.0.4", "500M")}  # fmt: skip


class Fleet:
    def __init__(self, agents: dict[str, NodeAgent], server: NeutrinoProc, metrics: int) -> None:
        self.agents = agents
        self.server = server
        self.metrics_url = f"http://127.0.0.1:{metrics}/metrics"

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        """Every sample of a scrape: (name, labels) -> value."""
        with urllib.request.urlopen(self.metrics_url, timeout=10) as r:
            text = r.read().decode()
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def nodes(self) -> dict[str, Any]:
        return {n["name"]: n for n in self.server.get_json("/neutrino/v1/nodes")["nodes"]}

    def catalogue(self) -> dict[str, Any]:
        return {c["id"]: c for c in self.server.get_json("/neutrino/v1/nodes")["catalogue"]}

    def holder(self, model: str) -> list[str]:
        placed: list[str] = self.catalogue()[model]["placed_on"]
        return placed


def sample(
    scrape: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return scrape[(name, frozenset(labels.items()))]


def _config(agents: dict[str, NodeAgent]) -> str:
    out = []
    for name, agent in agents.items():
        out.append(f'[[nodes]]\nname = "{name}"\nendpoint = "{agent.endpoint}"\n'
                   f'token_file = "{agent.token_file}"\n')  # fmt: skip
    for model in (PINNED, *MODELS):
        out.append(f'[[catalogue]]\nid = "{model}"\nharness = "llamacpp"\nfile = "{model}.gguf"\n'
                   'memory_mb = 400\ncontext_length = 512\nslots = 2\n')  # fmt: skip
        if model == PINNED:
            out.append('pinned_on = ["node-b"]\n')
    out.append("[fleet]\npoll_s = 0.5\ndown_after = 2\n")
    return "\n".join(out)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    work = tmp_path_factory.mktemp("fleet")
    agents = {
        name: NodeAgent(work, host, name=name, budget=budget, token=f"token-of-{name}")
        for name, (host, budget) in BUDGETS.items()
    }
    try:
        for agent in agents.values():
            for model in (PINNED, *MODELS):
                agent.add_model(f"{model}.gguf")
            agent.start()
        metrics = free_port()
        server = NeutrinoProc(
            work, "--metrics-address", f"127.0.0.1:{metrics}", config=_config(agents)
        ).start(timeout=60)
        try:
            yield Fleet(agents, server, metrics)
        finally:
            server.stop()
    finally:
        for agent in agents.values():
            agent.stop()


def _ask(fleet: Fleet, model: str, n: int = 1) -> list[str]:
    client = openai.AsyncOpenAI(base_url=fleet.server.base_url + "/v1", api_key="x",
                                max_retries=0, timeout=120)  # fmt: skip

    async def one() -> str:
        r = await client.chat.completions.create(
            model=model, max_tokens=5, temperature=0,
            messages=[{"role": "user", "content": "Name a colour."}],
        )  # fmt: skip
        return r.choices[0].message.content or ""

    async def run() -> list[str]:
        try:
            return list(await asyncio.gather(*(one() for _ in range(n))))
        finally:
            await client.close()

    return asyncio.run(run())


def test_01_discovery_and_health_in_the_routes_and_metrics(fleet: Fleet) -> None:
    assert wait_for(lambda: all(n["up"] for n in fleet.nodes().values()), 10)
    nodes = fleet.nodes()
    assert set(nodes) == set(BUDGETS)
    for name, (host, budget) in BUDGETS.items():
        node = nodes[name]
        assert node["endpoint"] == f"http://{host}:{fleet.agents[name].port}"
        assert node["host"]["cpu_cores"] >= 1 and node["host"]["kernel"]
        assert node["memory"]["budget_mb"] == int(budget.rstrip("M"))
        assert "llamacpp" in node["harnesses"]
    state = fleet.server.get_json("/neutrino/v1/app_state")
    assert {n["name"] for n in state["fleet"]["nodes"]} == set(BUDGETS)
    scrape = fleet.metrics()
    for name, (_, budget) in BUDGETS.items():
        assert sample(scrape, "neutrino_fleet_node_up", node=name) == 1
        budget_bytes = int(budget.rstrip("M")) << 20
        assert sample(scrape, "neutrino_fleet_node_memory_bytes", node=name, kind="budget") == (
            budget_bytes
        )
        assert sample(scrape, "neutrino_fleet_node_memory_bytes", node=name, kind="free") > 0
    assert sample(scrape, "neutrino_fleet_nodes", state="up") == 3


def test_02_a_pinned_model_is_kept_loaded_on_its_node(fleet: Fleet) -> None:
    assert wait_for(lambda: fleet.holder(PINNED) == ["node-b"], 60)
    assert _ask(fleet, PINNED)[0]
    listed = {m["id"]: m for m in fleet.server.get_json("/v1/models")["data"]}
    assert listed[PINNED]["status"] == "loaded"
    assert all(listed[m]["status"] == "unloaded" for m in MODELS)


def test_03_a_model_loaded_nowhere_is_placed_where_it_fits_and_concurrent_requests_share_a_load(
    fleet: Fleet,
) -> None:
    answers = _ask(fleet, "smollm2-x", n=4)
    assert all(answers) and len(set(answers)) == 1  # greedy: the same answer
    (node,) = fleet.holder("smollm2-x")
    assert node in ("node-b", "node-c")  # node-a's budget holds none
    assert fleet.catalogue()["smollm2-x"]["loads"] == 1
    assert fleet.agents[node].models()["smollm2-x"]["state"] == "loaded"
    time.sleep(0.05)
    _ask(fleet, "smollm2-y")
    (other,) = fleet.holder("smollm2-y")
    assert other in ("node-b", "node-c") and other != node


def test_04_a_model_that_fits_nowhere_evicts_the_least_recently_used(fleet: Fleet) -> None:
    x_node = fleet.holder("smollm2-x")[0]
    _ask(fleet, "smollm2-y")  # y is used after x: x is the least recently used
    assert _ask(fleet, "smollm2-z")[0]
    assert fleet.holder("smollm2-z") == [x_node]
    catalogue = fleet.catalogue()
    assert catalogue["smollm2-x"]["evictions"] == 1 and catalogue["smollm2-x"]["placed_on"] == []
    assert catalogue["smollm2-y"]["evictions"] == 0
    assert catalogue[PINNED]["evictions"] == 0 and catalogue[PINNED]["placed_on"] == ["node-b"]
    assert fleet.agents[x_node].models()["smollm2-x"]["state"] == "unloaded"


def test_05_the_pinned_model_is_never_evicted(fleet: Fleet) -> None:
    for model in ("smollm2-x", "smollm2-y", "smollm2-z", "smollm2-x"):
        assert _ask(fleet, model)[0]
    catalogue = fleet.catalogue()
    assert catalogue[PINNED]["evictions"] == 0 and catalogue[PINNED]["placed_on"] == ["node-b"]
    assert fleet.agents["node-b"].models()[PINNED]["state"] == "loaded"
    scrape = fleet.metrics()
    assert sample(scrape, "neutrino_fleet_model_evictions_total", model=PINNED) == 0
    assert sample(scrape, "neutrino_fleet_model_evictions_total", model="smollm2-x") >= 1
    assert sample(scrape, "neutrino_fleet_model_replicas", model=PINNED) == 1


def test_06_a_node_without_the_token_refuses(fleet: Fleet) -> None:
    agent = fleet.agents["node-c"]
    for token in ("", "token-of-node-b"):
        status, body = agent.call("GET", "/models", token=token)
        assert status == 401 and body["error"]["type"] == "unauthorized"
        load = {"model": "m", "harness": "llamacpp", "file": "smollm2-x.gguf"}
        status, _ = agent.call("POST", "/models/load", load, token=token)
        assert status == 401


def test_07_killing_a_node_fails_no_request_that_had_not_begun(fleet: Fleet) -> None:
    victim = next(n for n in ("node-c", "node-b") if fleet.holder("smollm2-x") == [n])
    engines = [m["pid"] for m in fleet.agents[victim].models().values() if m["state"] == "loaded"]
    assert engines and all(alive(pid) for pid in engines)
    fleet.agents[victim].kill()  # the agent and, with it, its engines
    assert wait_for(lambda: not any(alive(pid) for pid in engines), 10)
    answers = _ask(fleet, "smollm2-x", n=3)  # sent at once, none begun on the dead node
    assert all(answers)
    (now,) = fleet.holder("smollm2-x")
    assert now != victim and now != "node-a"
    nodes = fleet.nodes()
    assert not nodes[victim]["up"] and nodes[victim]["downs"] == 1
    state = fleet.server.get_json("/neutrino/v1/app_state")
    assert state["requests"]["finished"].get("failed", 0) == 0
    assert sample(fleet.metrics(), "neutrino_fleet_node_up", node=victim) == 0


def test_08_catalogued_models_are_listed_with_their_state(fleet: Fleet) -> None:
    listed = {m["id"]: m for m in fleet.server.get_json("/v1/models")["data"]}
    assert set(listed) == {PINNED, *MODELS}
    catalogue = fleet.catalogue()
    for model, card in listed.items():
        placed = bool(catalogue[model]["placed_on"])
        assert card["status"] == ("loaded" if placed else "unloaded"), (model, card)
