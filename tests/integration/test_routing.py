"""Routing over three ``mock_ie`` replicas of the same models, each counted by the
replica's own event log (the queries it received).

- prefix (model ``alpha``): conversations that share a system prompt stay on one
  replica one at a time, spread once that replica is over its bound, and new system
  prompts spread over the ring;
- round robin (``beta``) and power of two choices (``gamma``) spread evenly;
- a bound that holds nothing (``balance_factor = 100``) makes one replica take every
  request of a shared prefix while the others idle: the self-check falls back to power
  of two choices, says so in ``app_state`` and the metrics, and the load spreads.
"""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.support.procs import MockIE, NeutrinoProc, free_port, wait_for

MODELS = ("alpha", "beta", "gamma")
WORDS = [
    "river",
    "stone",
    "cloud",
    "market",
    "garden",
    "lantern",
    "engine",
    "harbor",
    "meadow",
    "copper",
    "violin",
]


def _system(n: int) -> str:
    """A system prompt of a few hundred tokens, its own for each ``n``."""
    return f"System prompt {n}. " + " ".join(WORDS[(n + i) % len(WORDS)] for i in range(300))


def _config(mocks: list[MockIE], routing: str = "") -> str:
    engines = "".join(f'[[engines]]\nname = "{m.socket.rsplit("/", 1)[1]}"\nsocket = "{m.socket}"\n'
                      for m in mocks)  # fmt: skip
    models = (
        '[routing.models.beta]\npolicy = "round_robin"\n'
        '[routing.models.gamma]\npolicy = "power_of_two"\n'
    )
    return engines + "[routing]\n" + routing + models


@pytest.fixture(scope="module")
def mocks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[MockIE]]:
    work = tmp_path_factory.mktemp("replicas")
    args = [a for m in MODELS for a in ("--model", f"{m}:qwen2:32768")]
    started = [
        MockIE(work, *args, "--ttft-ms", "150", "--reply-tokens", "2", name=f"replica{i}").start()
        for i in range(3)
    ]
    try:
        yield started
    finally:
        for m in started:
            m.stop()


@pytest.fixture(scope="module")
def server(mocks: list[MockIE], tmp_path_factory: pytest.TempPathFactory) -> Iterator[NeutrinoProc]:
    proc = NeutrinoProc(tmp_path_factory.mktemp("router"), config=_config(mocks))
    proc.start(timeout=30)
    try:
        yield proc
    finally:
        proc.stop()


def _ask_all(
    base_url: str, model: str, prompts: list[tuple[str, str]], max_tokens: int = 2
) -> None:
    """Send every (system, user) chat at once; each must be answered."""

    async def run() -> None:
        async with openai.AsyncOpenAI(
            base_url=base_url + "/v1", api_key="x", max_retries=0
        ) as client:

            async def one(system: str, user: str) -> None:
                r = await client.chat.completions.create(
                    model=model, max_tokens=max_tokens,
                    messages=[{"role": "system", "content": system},
                              {"role": "user", "content": user}],
                )  # fmt: skip
                assert r.choices[0].message.content is not None

            await asyncio.gather(*(one(s, u) for s, u in prompts))

    asyncio.run(run())


def _spread(mocks: list[MockIE], model: str, before: list[int]) -> list[int]:
    """Queries for ``model`` each replica got since ``before`` (a previous _count)."""
    return [a - b for a, b in zip(_count(mocks, model), before, strict=True)]


def _count(mocks: list[MockIE], model: str) -> list[int]:
    return [sum(1 for e in m.events("query") if e["model"] == model) for m in mocks]


def test_a_shared_prefix_sticks_to_one_replica_then_spreads(
    server: NeutrinoProc, mocks: list[MockIE]
) -> None:
    before = _count(mocks, "alpha")
    for turn in range(10):  # one at a time: a conversation's turns, the same system prompt
        _ask_all(server.base_url, "alpha", [(_system(1), f"Question {turn}?")])
    spread = _spread(mocks, "alpha", before)
    assert sorted(spread) == [0, 0, 10], spread  # all on one replica
    holder = spread.index(10)
    before = _count(mocks, "alpha")
    _ask_all(server.base_url, "alpha", [(_system(1), f"At once {i}?") for i in range(15)])
    burst = _spread(mocks, "alpha", before)
    assert sum(1 for n in burst if n) >= 2, burst  # past its bound, the others take some
    assert burst[holder] == max(burst) and burst[holder] < 15, burst
    before = _count(mocks, "alpha")
    for n in range(2, 32):  # thirty new system prompts, one at a time
        _ask_all(server.base_url, "alpha", [(_system(n), "Hello?")])
    fresh = _spread(mocks, "alpha", before)
    assert min(fresh) >= 4, fresh  # the ring spreads new prefixes over all three
    routing = server.get_json("/neutrino/v1/app_state")["routing"]["models"]["alpha"]
    assert routing["policy"] == "prefix" and routing["fallback"] is False
    assert routing["prefix_hits"] >= 9 and routing["prefix_misses"] >= 30


def test_round_robin_and_power_of_two_spread_evenly(
    server: NeutrinoProc, mocks: list[MockIE]
) -> None:
    before = _count(mocks, "beta")
    for i in range(30):
        _ask_all(server.base_url, "beta", [(_system(1), f"Turn {i}?")])
    assert _spread(mocks, "beta", before) == [10, 10, 10]
    before = _count(mocks, "gamma")
    for wave in range(5):
        _ask_all(server.base_url, "gamma", [(_system(1), f"Wave {wave}, {i}?") for i in range(9)])
    spread = _spread(mocks, "gamma", before)
    assert sum(spread) == 45 and min(spread) >= 9, spread
    models = server.get_json("/neutrino/v1/app_state")["routing"]["models"]
    assert models["beta"]["policy"] == "round_robin"
    assert models["gamma"]["policy"] == "power_of_two"


def test_a_rigged_imbalance_fires_the_self_check(mocks: list[MockIE], tmp_path: Path) -> None:
    metrics_port = free_port()
    rigged = "balance_factor = 100\nself_check_window = 20\nself_check_cooldown_s = 600\n"
    server = NeutrinoProc(
        tmp_path,
        "--metrics-address",
        f"127.0.0.1:{metrics_port}",
        config=_config(mocks, rigged),
    )
    server.start(timeout=30)
    try:
        _ask_all(server.base_url, "alpha", [(_system(77), "First?")])
        before = _count(mocks, "alpha")
        _ask_all(server.base_url, "alpha", [(_system(77), f"Rigged {i}?") for i in range(24)])
        rigged_spread = _spread(mocks, "alpha", before)
        assert max(rigged_spread) >= 16, rigged_spread  # the bound held nothing back
        routing = server.get_json("/neutrino/v1/app_state")["routing"]["models"]["alpha"]
        assert routing["fallback"] is True and routing["fallbacks"] == 1, routing
        before = _count(mocks, "alpha")
        _ask_all(server.base_url, "alpha", [(_system(77), f"After {i}?") for i in range(24)])
        after = _spread(mocks, "alpha", before)
        assert max(after) <= 16 and min(after) >= 2, after  # power of two choices now
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
            text = r.read().decode()
        assert 'neutrino_routing_fallbacks_total{model="alpha"} 1.0' in text
        assert "skewed" in server.log()
    finally:
        server.stop()


def test_an_engine_shared_with_another_front_end_reports_its_load(tmp_path: Path) -> None:
    """Another Neutrino keeps replica 0 busy with long streams; this one, which has
    nothing in flight itself, reads the load in replica 0's pongs and sends its requests
    to replica 1 (least outstanding: without the pongs, the tie goes to replica 0)."""
    args = ["--model", "alpha:qwen2:32768", "--itl-ms", "50", "--reply-tokens", "400"]
    busy, idle = (MockIE(tmp_path, *args, name=f"shared{i}").start() for i in range(2))
    other = NeutrinoProc(tmp_path, config=_config([busy]))
    ours = NeutrinoProc(
        tmp_path,
        config=_config([busy, idle], 'policy = "least_outstanding"\n')
        + "[engine_link]\nheartbeat_interval_s = 0.2\n",
    )
    stop = threading.Event()
    try:
        other.start(timeout=30)
        ours.start(timeout=30)
        streams = [threading.Thread(target=_long_stream, args=(other, stop)) for _ in range(6)]
        for t in streams:
            t.start()
        assert wait_for(lambda: len(busy.events("query")) >= 6, timeout=10)
        time.sleep(0.5)  # a pong or two reports them
        before = _count([busy, idle], "alpha")
        for i in range(10):
            _ask_all(ours.base_url, "alpha", [(_system(1), f"Short {i}?")], max_tokens=2)
        assert _spread([busy, idle], "alpha", before) == [0, 10]
    finally:
        stop.set()
        ours.stop()
        other.stop()
        busy.stop()
        idle.stop()


def _long_stream(server: NeutrinoProc, stop: threading.Event) -> None:
    """A long stream on ``server``, read until ``stop``."""
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    stream = client.chat.completions.create(
        model="alpha", stream=True, messages=[{"role": "user", "content": "A long story."}]
    )
    for _ in stream:
        if stop.is_set():
            break
    stream.close()
