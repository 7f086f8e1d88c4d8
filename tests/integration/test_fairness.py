"""Priorities and fair shares through a real server and ``mock_ie``: one engine slot
(``max_inflight = 1``), so the engine's own log of the queries it received is the order
the queue served them in. Three keys: ``heavy`` (long prompts, ten times the load),
``light`` and ``vip`` (may ask for priority 5)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from tests.support.procs import MockIE, NeutrinoProc

MODEL = "qwen2.5-mock"
CONFIG = """
[[engines]]
socket = "{socket}"
[limits]
max_inflight = 1
max_queue = 12
priority_age_s = 1.0
[auth]
admin_keys = ["sk-admin"]
[[auth.keys]]
key = "sk-heavy"
name = "heavy"
[[auth.keys]]
key = "sk-light"
name = "light"
[[auth.keys]]
key = "sk-vip"
name = "vip"
max_priority = 5
"""
LONG = " ".join(["lantern"] * 400)  # a heavy request's prompt: ten times a light one's


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MockIE, NeutrinoProc]]:
    work = tmp_path_factory.mktemp("fairness")
    script = work / "hold.json"  # a request tagged "-hold" holds the slot while others queue
    script.write_text(json.dumps({"rules": [{"match": "-hold", "pause_ms": 1500}]}))
    mock = MockIE(work, "--ttft-ms", "100", "--reply-tokens", "2", "--script", str(script)).start()
    server = NeutrinoProc(work, config=CONFIG.format(socket=mock.socket))
    try:
        server.start()
        yield mock, server
    finally:
        server.stop()
        mock.stop()


def _state(server: NeutrinoProc) -> Any:
    req = urllib.request.Request(
        server.base_url + "/neutrino/v1/app_state", headers={"Authorization": "Bearer sk-admin"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


async def _queued(server: NeutrinoProc, depth: int) -> None:
    for _ in range(500):
        if (await asyncio.to_thread(_state, server))["queue_depth"] >= depth:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the queue never held {depth}")


def _served(server: NeutrinoProc, prefix: str) -> list[str]:
    """The requests tagged ``prefix`` (their x-request-id) that were served, in the order
    they were served: with one engine slot, the order they ended in (the history's)."""
    req = urllib.request.Request(
        server.base_url + "/neutrino/v1/history?limit=500",
        headers={"Authorization": "Bearer sk-admin"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        entries = json.loads(r.read())["data"]
    tags = [e["id"].partition(prefix)[2] for e in reversed(entries) if e["state"] == "complete"]
    return [prefix + t for t in tags if t]


class Sender:
    def __init__(self, session: aiohttp.ClientSession, server: NeutrinoProc) -> None:
        self.session, self.server = session, server

    async def one(
        self, key: str, tag: str, priority: str = "", long: bool = False
    ) -> tuple[int, dict[str, Any]]:
        headers = {"Authorization": f"Bearer {key}", "x-request-id": tag}
        if priority:
            headers["x-neutrino-priority"] = priority
        text = f"{tag} {LONG}" if long else tag
        body = {"model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": text}]}
        async with self.session.post(
            self.server.base_url + "/v1/chat/completions", json=body, headers=headers
        ) as r:
            return r.status, await r.json()


async def test_the_light_key_is_served_in_its_fair_turn(stack: tuple[MockIE, NeutrinoProc]) -> None:
    _, server = stack
    async with aiohttp.ClientSession() as session:
        send = Sender(session, server)
        heavy = [
            asyncio.create_task(send.one("sk-heavy", f"fair-h{i}", long=True)) for i in range(10)
        ]
        await _queued(server, 9)  # one at the engine, nine waiting
        light = [asyncio.create_task(send.one("sk-light", "fair-l0"))]
        await _queued(server, 10)
        light.append(asyncio.create_task(send.one("sk-light", "fair-l1")))
        results = await asyncio.gather(*heavy, *light)
    assert all(status == 200 for status, _ in results), results
    order = _served(server, "fair-")
    # The light key used little lately: each of its requests goes next, ahead of the nine
    # heavy ones that queued before it; the heavy key's go on after.
    assert len(order) == 12 and order[1:3] == ["fair-l0", "fair-l1"], order
    assert sorted(order[3:]) == sorted(f"fair-h{i}" for i in range(10) if order[0] != f"fair-h{i}")
    shares = _state(server)["fair_shares"]
    assert shares["heavy"] > 10 * shares["light"] > 0, shares


async def test_priorities_preempt_the_queue_and_the_ceiling_caps_them(
    stack: tuple[MockIE, NeutrinoProc],
) -> None:
    mock, server = stack
    since = len(mock.events("query"))
    async with aiohttp.ClientSession() as session:
        send = Sender(session, server)
        first = asyncio.create_task(send.one("sk-light", "prio-hold"))
        await asyncio.to_thread(mock.wait_event, "query", since + 1)
        waiting = []
        for i in range(3):
            waiting.append(asyncio.create_task(send.one("sk-light", f"prio-low{i}")))
            await _queued(server, i + 1)
        capped = asyncio.create_task(send.one("sk-heavy", "prio-capped", priority="9"))
        await _queued(server, 4)
        vip = asyncio.create_task(send.one("sk-vip", "prio-vip", priority="5"))
        results = await asyncio.gather(first, *waiting, capped, vip)
        bad = await send.one("sk-vip", "prio-bad", priority="high")
    assert all(status == 200 for status, _ in results), results
    order = _served(server, "prio-")
    assert order[:2] == ["prio-hold", "prio-vip"], order  # asked 5, allowed 5: ahead of all
    assert order.index("prio-capped") > order.index("prio-low0"), order  # 9, capped to 0
    assert bad[0] == 400 and bad[1]["error"]["param"] == "x-neutrino-priority"


async def test_ageing_lets_a_low_priority_request_through(
    stack: tuple[MockIE, NeutrinoProc],
) -> None:
    mock, server = stack
    since = len(mock.events("query"))
    async with aiohttp.ClientSession() as session:
        send = Sender(session, server)
        first = asyncio.create_task(send.one("sk-vip", "age-hold", priority="1"))
        await asyncio.to_thread(mock.wait_event, "query", since + 1)
        low = asyncio.create_task(send.one("sk-light", "age-low"))
        await _queued(server, 1)
        vips: list[asyncio.Task[tuple[int, dict[str, Any]]]] = []
        t0 = time.monotonic()
        while not low.done() and time.monotonic() - t0 < 8:  # always two vips waiting
            if (await asyncio.to_thread(_state, server))["queue_depth"] < 3:
                vips.append(asyncio.create_task(send.one("sk-vip", f"age-vip{len(vips)}", "1")))
            await asyncio.sleep(0.02)
        results = await asyncio.gather(first, low, *vips)
    assert all(status == 200 for status, _ in results), results
    order = _served(server, "age-")
    at = order.index("age-low")
    # Priority 1 kept coming, yet once it had aged a level or two (one a second) the
    # waiting priority-0 request went ahead of those still queued.
    assert at >= 5 and any(o.startswith("age-vip") for o in order[at + 1 :]), order


async def test_a_full_queue_sheds_the_lowest_priority_first(
    stack: tuple[MockIE, NeutrinoProc],
) -> None:
    mock, server = stack
    since = len(mock.events("query"))
    async with aiohttp.ClientSession() as session:
        send = Sender(session, server)
        first = asyncio.create_task(send.one("sk-heavy", "shed-hold"))
        await asyncio.to_thread(mock.wait_event, "query", since + 1)
        low = []
        for i in range(12):
            low.append(asyncio.create_task(send.one("sk-heavy", f"shed-low{i}")))
            await _queued(server, i + 1)  # the queue fills, in this order
        refused = await send.one("sk-light", "shed-refused")  # the same priority: refused
        results = await asyncio.gather(send.one("sk-vip", "shed-vip", "5"), *low, first)
    assert refused[0] == 429 and refused[1]["error"]["code"] == "queue_full"
    statuses = [status for status, _ in results]
    assert statuses[0] == 200 and statuses.count(429) == 1, statuses
    assert results[12][0] == 429, statuses  # the newest of the heaviest key's went
    assert "higher priority" in results[12][1]["error"]["message"]
    assert _state(server)["queue_shed"] >= 1


async def test_a_reserved_slot_serves_a_key_holding_none_at_once(
    stack: tuple[MockIE, NeutrinoProc], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Two slots, one reserved: the heavy key runs one answer and queues the rest; the
    light key's request takes the reserved slot at once, ending before the heavy answer
    that held the other (the only engine slot a key holding none may wait for is none)."""
    mock, _ = stack
    config = CONFIG.format(socket=mock.socket).replace(
        "max_inflight = 1\n", "max_inflight = 2\nreserved_slots = 1\n"
    )
    server = NeutrinoProc(tmp_path_factory.mktemp("reserved"), config=config).start()
    try:
        since = len(mock.events("query"))
        async with aiohttp.ClientSession() as session:
            send = Sender(session, server)
            hold = asyncio.create_task(send.one("sk-heavy", "res-hold"))
            await asyncio.to_thread(mock.wait_event, "query", since + 1)
            heavy = []
            for i in range(3):
                heavy.append(asyncio.create_task(send.one("sk-heavy", f"res-h{i}")))
                await _queued(server, i + 1)  # the free slot is kept from the heavy key
            light = await send.one("sk-light", "res-l0")
            assert light[0] == 200 and not hold.done()
            results = await asyncio.gather(hold, *heavy)
        order = _served(server, "res-")
    finally:
        server.stop()
    assert all(status == 200 for status, _ in results), results
    assert order == ["res-l0", "res-hold", "res-h0", "res-h1", "res-h2"], order
