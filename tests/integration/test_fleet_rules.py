"""The control plane's rules with fast engines: node agents running mock_ie on TCP (a
command template) and a real Neutrino in front. A failed load tries the next node,
replicas.min is kept, a long queue adds a replica, a model that fits nowhere is a clear
error, a busy model is not evicted under its request, every protocol and the cancel
frame reach a placed engine, a node comes back, a restarted front server adopts what
the nodes hold, and agents are found through etcd."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import grpc
import openai
import pytest

from mocks.mock_ie.events import read_events
from neutrino.v1 import inference_pb2_grpc
from tests.support.grpc_parity import grpc_request
from tests.support.node import NodeAgent
from tests.support.procs import NeutrinoProc, free_port, wait_for
from tests.support.registration import ETCD, NO_ETCD, Etcd

pytestmark = pytest.mark.timeout(180)


def harness(events: Path, itl_ms: int = 5) -> str:
    """mock_ie as an engine on TCP, its events in ``events``/MODEL.jsonl."""
    return f"""
[[harness]]
name = "mock"
kind = "engine"
command = ["python", "-m", "mocks.mock_ie", "--listen", "{{host}}:{{port}}",
           "--token-env", "{{token_env}}", "--model", "{{model}}:qwen2:4096",
           "--capacity", "64", "--itl-ms", "{itl_ms}",
           "--events", "{events}/{{model}}.jsonl"]
"""


def entry(model: str, memory_mb: int = 100, file: str = "mock.bin", **extra: Any) -> str:
    lines = [f'[[catalogue]]\nid = "{model}"\nharness = "mock"\nfile = "{file}"',
             f"memory_mb = {memory_mb}"]  # fmt: skip
    lines += [f"{k} = {_toml(v)}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def nodes(agents: list[NodeAgent]) -> str:
    return "".join(
        f'[[nodes]]\nname = "{a.name}"\nendpoint = "{a.endpoint}"\ntoken_file = "{a.token_file}"\n'
        for a in agents
    )


FLEET = "[fleet]\npoll_s = 0.3\ndown_after = 2\nscale_up_after_s = 0.5\n"


class Stack:
    def __init__(self, agents: list[NodeAgent], server: NeutrinoProc, events: Path) -> None:
        self.agents = {a.name: a for a in agents}
        self.server = server
        self.events = events

    def catalogue(self) -> dict[str, Any]:
        return {c["id"]: c for c in self.server.get_json("/neutrino/v1/nodes")["catalogue"]}

    def nodes(self) -> dict[str, Any]:
        return {n["name"]: n for n in self.server.get_json("/neutrino/v1/nodes")["nodes"]}

    def engine_events(self, model: str, kind: str) -> list[dict[str, Any]]:
        path = self.events / f"{model}.jsonl"
        return [e for e in read_events(path) if e["event"] == kind] if path.exists() else []


CATALOGUE = (
    entry("m-min", replicas={"min": 1, "max": 1})
    + entry("m-scale", slots=1, replicas={"min": 0, "max": 2})
    + entry("m-only-b", file="only-b.bin")
    + entry("m-big", memory_mb=5000)
    + entry("m-proto")
)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("fleet_rules")
    events = work / "events"
    events.mkdir()
    agents = [
        NodeAgent(work, "127.0.0.5", name="node-a", budget="1000M", extra_config=harness(events)),
        NodeAgent(work, "127.0.0.6", name="node-b", budget="600M", extra_config=harness(events)),
    ]
    for a in agents:
        (a.models_dir / "mock.bin").write_bytes(b"")
    (agents[1].models_dir / "only-b.bin").write_bytes(b"")
    grpc_port = free_port()
    server = NeutrinoProc(
        work, "--grpc-address", f"127.0.0.1:{grpc_port}", config=nodes(agents) + CATALOGUE + FLEET
    )
    try:
        for a in agents:
            a.start()
        server.start(timeout=60)
        server.grpc_port = grpc_port  # type: ignore[attr-defined]
        yield Stack(agents, server, events)
    finally:
        server.stop()
        for a in agents:
            a.stop()


def _chat(stack: Stack, model: str, **extra: Any) -> Any:
    client = openai.OpenAI(base_url=stack.server.base_url + "/v1", api_key="x", max_retries=0)
    return client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=4, **extra
    )


def test_replicas_min_are_kept_loaded_without_a_request(stack: Stack) -> None:
    assert wait_for(lambda: len(stack.catalogue()["m-min"]["placed_on"]) == 1, 20)
    assert stack.catalogue()["m-min"]["loads"] == 1


def test_a_failed_load_tries_the_next_node(stack: Stack) -> None:
    # node-a has the most room, so it is asked first; its folder lacks the file.
    r = _chat(stack, "m-only-b")
    assert r.choices[0].message.content
    c = stack.catalogue()["m-only-b"]
    assert c["placed_on"] == ["node-b"] and c["load_failures"] == 1 and c["loads"] == 1
    assert "m-only-b" not in stack.agents["node-a"].models()


def test_a_model_that_fits_nowhere_is_a_clear_error_in_each_protocol(stack: Stack) -> None:
    with pytest.raises(openai.APIStatusError) as exc:
        _chat(stack, "m-big")
    assert exc.value.status_code == 503
    message = str(exc.value.body)
    assert "no node can hold the model 'm-big'" in message and "5000 MB" in message
    client = anthropic.Anthropic(base_url=stack.server.base_url, api_key="x", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as aexc:
        client.messages.create(
            model="m-big", max_tokens=4, messages=[{"role": "user", "content": "hi"}]
        )
    assert aexc.value.status_code == 503 and "no node can hold" in str(aexc.value.body)
    assert stack.catalogue()["m-big"]["placed_on"] == []


def test_every_protocol_and_the_cancel_reach_a_placed_engine(stack: Stack) -> None:
    client = openai.OpenAI(base_url=stack.server.base_url + "/v1", api_key="x", max_retries=0)
    stream = client.chat.completions.create(
        model="m-proto", messages=[{"role": "user", "content": "hi"}], max_tokens=6,
        stream=True, stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6
    a = anthropic.Anthropic(base_url=stack.server.base_url, api_key="x", max_retries=0)
    msg = a.messages.create(
        model="m-proto", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
    )
    assert msg.usage.output_tokens == 5 and msg.content[0].type == "text"
    responses = client.responses.create(model="m-proto", input="hi", max_output_tokens=5)
    assert responses.output_text

    async def grpc_calls() -> None:
        port = stack.server.grpc_port  # type: ignore[attr-defined]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = inference_pb2_grpc.InferenceStub(channel)
            body = {"model": "m-proto", "messages": [{"role": "user", "content": "hi"}],
                    "max_tokens": 3}  # fmt: skip
            unary = await stub.Generate(grpc_request(body), timeout=20)
            assert unary.usage.completion_tokens == 3
            streamed = [m async for m in stub.GenerateStream(grpc_request(body), timeout=20)]
            assert streamed

    asyncio.run(grpc_calls())
    # A client that leaves a stream: exactly one cancel frame reaches the remote engine.
    before = len(stack.engine_events("m-proto", "cancel"))
    long = client.chat.completions.create(
        model="m-proto",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=2000,
        stream=True,
        extra_body={"ignore_eos": True},
    )
    next(iter(long))
    long.close()
    assert wait_for(lambda: len(stack.engine_events("m-proto", "cancel")) == before + 1, 10)
    time.sleep(0.3)
    assert len(stack.engine_events("m-proto", "cancel")) == before + 1


def test_a_long_queue_adds_a_replica(stack: Stack) -> None:
    async def run() -> list[int]:
        client = openai.AsyncOpenAI(base_url=stack.server.base_url + "/v1", api_key="x",
                                    max_retries=0)  # fmt: skip

        async def one() -> int:
            r = await client.chat.completions.create(
                model="m-scale",
                messages=[{"role": "user", "content": "hi"}],
                max_tokens=300,
                extra_body={"ignore_eos": True},
            )
            return r.usage.completion_tokens if r.usage else 0

        try:
            return list(await asyncio.gather(*(one() for _ in range(4))))
        finally:
            await client.close()

    assert asyncio.run(run()) == [300] * 4  # one slot, ~1.5 s each: the queue stays long
    assert wait_for(lambda: len(stack.catalogue()["m-scale"]["placed_on"]) == 2, 10)
    assert set(stack.catalogue()["m-scale"]["placed_on"]) == {"node-a", "node-b"}


def test_a_node_that_comes_back_is_used_again(stack: Stack) -> None:
    agent = stack.agents["node-b"]
    agent.kill()
    assert wait_for(lambda: not stack.nodes()["node-b"]["up"], 10)
    assert "node-b" not in stack.catalogue()["m-only-b"]["placed_on"]
    agent.start()  # same address and port: its engines died with it
    assert wait_for(lambda: stack.nodes()["node-b"]["up"], 10)
    assert stack.nodes()["node-b"]["downs"] == 1
    assert _chat(stack, "m-only-b").choices[0].message.content  # placed there again
    assert stack.catalogue()["m-only-b"]["placed_on"] == ["node-b"]


def test_a_restarted_front_server_adopts_what_the_nodes_hold(stack: Stack, tmp_path: Path) -> None:
    held = {m: set(c["placed_on"]) for m, c in stack.catalogue().items() if c["placed_on"]}
    assert held
    agents = list(stack.agents.values())
    second = NeutrinoProc(tmp_path, config=nodes(agents) + CATALOGUE + FLEET).start(timeout=60)
    try:

        def adopted() -> bool:
            cat = {c["id"]: c for c in second.get_json("/neutrino/v1/nodes")["catalogue"]}
            return all(set(cat[m]["placed_on"]) >= on for m, on in held.items())

        assert wait_for(adopted, 10)
        cat = {c["id"]: c for c in second.get_json("/neutrino/v1/nodes")["catalogue"]}
        assert all(c["loads"] == 0 for c in cat.values())  # nothing loaded again
        client = openai.OpenAI(base_url=second.base_url + "/v1", api_key="x", max_retries=0)
        r = client.chat.completions.create(
            model="m-proto", messages=[{"role": "user", "content": "hi"}], max_tokens=3
        )
        assert r.usage is not None and r.usage.completion_tokens == 3
    finally:
        second.stop()


def test_a_busy_model_is_not_evicted_under_its_request(tmp_path: Path) -> None:
    events = tmp_path / "events"
    events.mkdir()
    agent = NodeAgent(tmp_path, "127.0.0.7", name="small", budget="250M",
                      extra_config=harness(events, itl_ms=10))  # fmt: skip
    (agent.models_dir / "mock.bin").write_bytes(b"")
    config = nodes([agent]) + entry("p1", memory_mb=150) + entry("p2", memory_mb=150) + FLEET
    agent.start()
    server = NeutrinoProc(tmp_path, config=config)
    try:
        server.start(timeout=60)

        async def run() -> tuple[int, int]:
            client = openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="x",
                                        max_retries=0)  # fmt: skip
            try:
                ask = client.chat.completions.create(
                    model="p1",
                    messages=[{"role": "user", "content": "hi"}],
                    max_tokens=150,
                    extra_body={"ignore_eos": True},
                )
                first = asyncio.ensure_future(ask)
                await asyncio.sleep(0.8)  # p1 is placed and answering (~1.5 s)
                second = await client.chat.completions.create(
                    model="p2", messages=[{"role": "user", "content": "hi"}], max_tokens=3
                )
                one = await first
                assert one.usage is not None and second.usage is not None
                return one.usage.completion_tokens, second.usage.completion_tokens
            finally:
                await client.close()

        assert asyncio.run(run()) == (150, 3)  # p1 ended whole before p2 took its place
        finishes = [e for e in read_events(events / "p1.jsonl") if e["event"] == "finish"]
        assert [e["finish_reason"] for e in finishes] == ["length"]
        cat = {c["id"]: c for c in server.get_json("/neutrino/v1/nodes")["catalogue"]}
        assert cat["p1"]["evictions"] == 1 and cat["p2"]["placed_on"] == ["small"]
    finally:
        server.stop()
        agent.stop()


@pytest.mark.skipif(ETCD is None, reason=NO_ETCD)
def test_agents_are_found_through_etcd(tmp_path: Path) -> None:
    etcd = Etcd(tmp_path).start()
    events = tmp_path / "events"
    events.mkdir()
    agent = NodeAgent(tmp_path, "127.0.0.8", name="from-etcd", budget="500M",
                      extra_config=harness(events),
                      args=("--etcd", etcd.url, "--advertise", "127.0.0.8"))  # fmt: skip
    (agent.models_dir / "mock.bin").write_bytes(b"")
    config = (
        entry("e1")
        + f'[fleet]\npoll_s = 0.3\netcd = ["{etcd.url}"]\ntoken_file = "{agent.token_file}"\n'
    )
    server = NeutrinoProc(tmp_path, config=config)
    try:
        agent.start()
        assert wait_for(lambda: bool(etcd.records("/neutrino/nodes/")), 10)
        server.start(timeout=60)
        assert wait_for(lambda: bool(server.get_json("/neutrino/v1/nodes")["nodes"]), 10)
        (node,) = server.get_json("/neutrino/v1/nodes")["nodes"]
        assert node["name"] == "from-etcd" and node["endpoint"] == agent.endpoint
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
        r = client.chat.completions.create(
            model="e1", messages=[{"role": "user", "content": "hi"}], max_tokens=3
        )
        assert r.usage is not None and r.usage.completion_tokens == 3
        agent.stop()  # SIGTERM: it leaves etcd
        assert wait_for(lambda: not server.get_json("/neutrino/v1/nodes")["nodes"], 10)
    finally:
        server.stop()
        agent.stop()
        etcd.stop()


def test_agents_are_found_by_a_dns_name(tmp_path: Path) -> None:
    """As a Kubernetes headless Service names a DaemonSet's pods: every address of the name
    is an agent, known by the name it gives itself."""
    agent = NodeAgent(tmp_path, "127.0.0.1", name="by-dns", budget="500M",
                      extra_config=harness(tmp_path))  # fmt: skip
    (agent.models_dir / "mock.bin").write_bytes(b"")
    config = entry("d1") + (
        f'[fleet]\npoll_s = 0.3\ndns = ["localhost:{agent.port}"]\n'
        f'token_file = "{agent.token_file}"\n'
    )
    server = NeutrinoProc(tmp_path, config=config)
    try:
        agent.start()
        server.start(timeout=60)
        assert wait_for(lambda: bool(server.get_json("/neutrino/v1/nodes")["nodes"]), 10)
        (node,) = server.get_json("/neutrino/v1/nodes")["nodes"]
        assert node["name"] == "by-dns" and node["up"]
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
        r = client.chat.completions.create(
            model="d1", messages=[{"role": "user", "content": "hi"}], max_tokens=3
        )
        assert r.usage is not None and r.usage.completion_tokens == 3
    finally:
        server.stop()
        agent.stop()
