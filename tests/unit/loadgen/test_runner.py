"""The runner's loops with a stand-in protocol driver: how many requests are in flight, which
ones are sent, and how failures are counted."""

from __future__ import annotations

import asyncio

import pytest

from neutrino.loadgen.api import Params
from neutrino.loadgen.errors import RequestFailed
from neutrino.loadgen.probe import Probe
from neutrino.loadgen.prompts import Lengths, Prompt, PromptSource
from neutrino.loadgen.runner import Plan, Runner
from neutrino.loadgen.stats import Recorder


class Driver:
    """Answers each request after ``delay`` seconds with two chunks; fails some."""

    def __init__(self, delay: float = 0.005, fail: set[int] | None = None) -> None:
        self.delay = delay
        self.fail = fail or set()
        self.inflight = 0
        self.most = 0
        self.sent: list[Prompt] = []

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def first_model(self) -> str | None:
        return "m"

    async def send(self, prompt: Prompt, params: Params, probe: Probe) -> None:
        index = len(self.sent)
        self.sent.append(prompt)
        self.inflight += 1
        self.most = max(self.most, self.inflight)
        try:
            await asyncio.sleep(self.delay)
            if index in self.fail:
                raise RequestFailed("http 500 boom", "boom")
            probe.chunk("a")
            await asyncio.sleep(self.delay)
            probe.chunk("b")
            probe.usage(3, 2)
        finally:
            self.inflight -= 1

    def classify(self, exc: BaseException) -> tuple[str, str] | None:
        return None


def runner(driver: Driver, plan: Plan) -> tuple[Runner, Recorder]:
    source = PromptSource(seed=0, output=Lengths(4), synthetic=Lengths(5))
    recorder = Recorder()
    return Runner(driver, Params("m"), source, recorder, plan), recorder


async def test_closed_loop_keeps_concurrency_requests_in_flight() -> None:
    driver = Driver(fail={3, 7})
    run, rec = runner(driver, Plan(requests=20, concurrency=4))
    duration = await run.run()
    assert driver.most == 4 and len(driver.sent) == 20
    assert (rec.ok, rec.failed) == (18, 2)
    assert rec.errors["http 500 boom"].count == 2
    assert rec.output_tokens == 36 and rec.input_tokens == 54
    assert len(rec.ttft) == 18 and rec.itl.count == 18
    assert duration > 0


async def test_fewer_requests_than_workers() -> None:
    driver = Driver()
    run, rec = runner(driver, Plan(requests=2, concurrency=10))
    await run.run()
    assert len(driver.sent) == 2 and rec.ok == 2


async def test_open_loop_cap_and_count() -> None:
    driver = Driver(delay=0.02)
    run, rec = runner(driver, Plan(requests=30, concurrency=3, rate=2000.0))
    await run.run()
    assert driver.most <= 3 and rec.ok == 30
    assert run.max_lag > 0  # arrivals outran the cap and waited


async def test_timeouts_are_counted_as_such() -> None:
    driver = Driver(delay=1.0)
    run, rec = runner(driver, Plan(requests=3, concurrency=3, timeout=0.01))
    await run.run()
    assert rec.failed == 3 and rec.errors["timeout"].count == 3


async def test_duration_ends_a_closed_loop() -> None:
    driver = Driver(delay=0.01)
    run, rec = runner(driver, Plan(requests=None, concurrency=2, duration=0.1))
    await run.run()
    assert 2 <= rec.ok < 100


async def test_stop_cancels_what_is_in_flight() -> None:
    driver = Driver(delay=10.0)
    run, rec = runner(driver, Plan(requests=None, concurrency=3, duration=60))
    task = asyncio.create_task(run.run())
    while driver.inflight < 3:
        await asyncio.sleep(0.001)
    run.stop()
    await asyncio.wait_for(task, 5)
    assert run.interrupted == 3 and rec.ok == rec.failed == 0


@pytest.mark.parametrize("rate", [None, 1000.0])
async def test_prompts_follow_the_request_index(rate: float | None) -> None:
    driver = Driver()
    run, _ = runner(driver, Plan(requests=8, concurrency=8, rate=rate))
    await run.run()
    expected = [run.source.get(i) for i in range(8)]
    assert sorted(driver.sent, key=expected.index) == expected
