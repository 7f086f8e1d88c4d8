"""The deadline wheel: never early, at most one bucket late, one loop timer per bucket."""

from __future__ import annotations

import asyncio

from neutrino.pipeline.deadlines import DeadlineWheel


async def test_fires_once_not_before_its_time() -> None:
    loop = asyncio.get_running_loop()
    wheel = DeadlineWheel(resolution_s=0.02)
    fired: list[float] = []
    start = loop.time()
    wheel.call_later(0.05, lambda: fired.append(loop.time()))
    await asyncio.sleep(0.2)
    assert len(fired) == 1 and fired[0] >= start + 0.05
    assert wheel.pending == 0 and wheel.timers == 0


async def test_cancel_prevents_firing_and_is_idempotent() -> None:
    wheel = DeadlineWheel(resolution_s=0.02)
    fired: list[int] = []
    keep = wheel.call_later(0.03, lambda: fired.append(1))
    drop = wheel.call_later(0.03, lambda: fired.append(2))
    drop.cancel()
    drop.cancel()
    assert drop.cancelled() and not keep.cancelled() and wheel.pending == 1
    await asyncio.sleep(0.15)
    assert fired == [1] and keep.cancelled()  # a fired deadline counts as done
    keep.cancel()  # after firing: nothing happens


async def test_deadlines_in_one_bucket_share_a_timer() -> None:
    wheel = DeadlineWheel(resolution_s=10.0)
    entries = [wheel.call_later(1.0 + i * 1e-3, lambda: None) for i in range(100)]
    assert wheel.timers <= 2 and wheel.pending == 100  # a bucket edge may split them
    for e in entries:
        e.cancel()
    assert wheel.pending == 0
