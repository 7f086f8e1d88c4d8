"""The admission queue's order (pipeline/fairness.py, pipeline/admission.py): priorities
first, least attained service among keys, ageing, shedding the lowest priority."""

from __future__ import annotations

import asyncio

import pytest

from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.pipeline.admission import Admission, Ticket
from neutrino.pipeline.fairness import FairQueue


def test_higher_priorities_go_first_then_the_oldest() -> None:
    q: FairQueue[str] = FairQueue(age_s=0)
    for name, prio, at in (("low1", 0, 1.0), ("high", 5, 2.0), ("low2", 0, 3.0), ("mid", 2, 4.0)):
        q.push(name, "", prio, at)
    order = []
    while (w := q.pop(10.0)) is not None:
        order.append(w.item)
    assert order == ["high", "mid", "low1", "low2"]
    assert len(q) == 0


def test_the_key_that_used_fewer_tokens_goes_first() -> None:
    q: FairQueue[str] = FairQueue(age_s=0, decay_s=1e9)
    for i in range(3):
        q.push(f"heavy{i}", "heavy", 0, float(i))
    q.push("light0", "light", 0, 5.0)
    q.charge("heavy", 1000, 0.0)
    first = q.pop(6.0)
    assert first is not None and first.item == "light0"  # queued last, served first
    q.charge("light", 2000, 6.0)  # now it is the heavier
    second = q.pop(6.0)
    assert second is not None and second.item == "heavy0"


def test_attained_tokens_decay_by_half_per_decay_period() -> None:
    q: FairQueue[str] = FairQueue(decay_s=10.0)
    q.charge("a", 800, 0.0)
    assert q.attained("a", 10.0) == pytest.approx(400)
    assert q.attained("a", 30.0) == pytest.approx(100)
    q.charge("a", -1000, 30.0)  # a correction never leaves it below nothing
    assert q.attained("a", 30.0) == 0


def test_ageing_lifts_a_waiting_request_above_newer_higher_ones() -> None:
    q: FairQueue[str] = FairQueue(age_s=1.0)
    q.push("old-low", "", 0, 0.0)
    q.push("new-high", "", 2, 2.5)
    w = q.pop(2.5)  # waited 2.5 s: two levels, equal to 2; the older goes first
    assert w is not None and w.item == "old-low"
    q.push("old-low2", "", 0, 2.5)
    q.push("newer-high", "", 2, 2.5)
    w = q.pop(3.0)
    assert w is not None and w.item == "new-high"  # now fresh low waits its turn


def test_a_full_queue_sheds_the_heaviest_keys_newest_at_the_lowest_priority() -> None:
    q: FairQueue[str] = FairQueue(age_s=0, decay_s=1e9)
    q.push("a-old", "a", 0, 0.0)
    q.push("a-new", "a", 0, 1.0)
    q.push("b", "b", 0, 2.0)
    q.push("vip", "c", 3, 3.0)
    q.charge("a", 500, 0.0)
    assert q.shed_for(0, 4.0) is None  # nothing lower than the newcomer's own
    shed = q.shed_for(1, 4.0)
    assert shed is not None and shed.item == "a-new" and len(q) == 3


async def test_admission_serves_waiters_in_the_fair_order() -> None:
    adm = Admission(max_queue=8, limit=lambda: 1, age_s=0, decay_s=1e9)
    first = Ticket("heavy", 0, 100)
    assert adm.try_acquire(first)
    served: list[str] = []

    async def one(name: str, ticket: Ticket) -> None:
        await adm.enter(5.0, None, ticket)
        served.append(name)
        adm.release(ticket)

    tasks = [asyncio.create_task(one(f"h{i}", Ticket("heavy", 0, 100))) for i in range(3)]
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(one("l0", Ticket("light", 0, 100))))
    tasks.append(asyncio.create_task(one("p0", Ticket("heavy", 4, 100))))
    await asyncio.sleep(0)
    adm.release(first)
    await asyncio.gather(*tasks)
    # the priority first; then light (nothing used) before heavy's second; heavy's after
    assert served == ["p0", "l0", "h0", "h1", "h2"]
    assert adm.inflight == 0 and adm.queued == 0
    assert adm.usage()["light"] == pytest.approx(100)


async def test_a_full_queue_sheds_a_lower_waiter_for_a_higher_one() -> None:
    adm = Admission(max_queue=1, limit=lambda: 1, age_s=0)
    assert adm.try_acquire()
    low = asyncio.create_task(adm.enter(5.0, None, Ticket("a", 0, 1)))
    await asyncio.sleep(0)
    with pytest.raises(NeutrinoError) as full:  # equal priority: the newcomer is refused
        await adm.enter(5.0, None, Ticket("b", 0, 1))
    assert full.value.kind is ErrorKind.QUEUE_FULL
    high = asyncio.create_task(adm.enter(5.0, None, Ticket("b", 1, 1)))
    await asyncio.sleep(0)
    with pytest.raises(NeutrinoError, match="higher priority") as shed:
        await low
    assert shed.value.kind is ErrorKind.QUEUE_FULL and adm.shed == 1
    adm.release()  # the first slot's (no key)
    await high
    assert adm.inflight == 1 and adm.queued == 0


async def test_settle_corrects_the_estimate_and_a_cancelled_waiter_leaves() -> None:
    adm = Admission(max_queue=4, limit=lambda: 1, decay_s=1e9)
    ticket = Ticket("k", 0, 300)
    assert adm.try_acquire(ticket)
    adm.settle(ticket, 120)  # it used less than estimated
    assert adm.usage()["k"] == pytest.approx(120)
    waiting = asyncio.create_task(adm.enter(5.0, None, Ticket("k", 0, 5)))
    await asyncio.sleep(0)
    assert adm.queued == 1
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert adm.queued == 0
    adm.release(ticket)
    assert adm.inflight == 0 and adm.usage()["k"] == pytest.approx(120)


async def test_reserved_slots_go_only_to_keys_that_hold_none() -> None:
    adm = Admission(max_queue=8, limit=lambda: 3, age_s=0, reserved=1)
    heavy = [Ticket("heavy", 0, 10) for _ in range(4)]
    assert adm.try_acquire(heavy[0]) and adm.try_acquire(heavy[1])
    assert not adm.try_acquire(heavy[2])  # the last free slot is kept
    waiting = asyncio.create_task(adm.enter(5.0, None, heavy[2]))
    await asyncio.sleep(0)
    assert adm.queued == 1 and adm.inflight == 2
    light = Ticket("light", 0, 10)
    assert adm.try_acquire(light)  # a key holding none takes it past the waiting heavy
    assert adm.inflight == 3
    again = Ticket("light", 0, 10)
    second = asyncio.create_task(adm.enter(5.0, None, again))
    await asyncio.sleep(0)
    adm.release(light)  # free again: kept from heavy; light holds none now, and waits
    await second
    assert adm.queued == 1 and not waiting.done()
    adm.release(heavy[0])  # one free, reserved: heavy still holds one
    await asyncio.sleep(0)
    assert adm.queued == 1 and adm.inflight == 2
    adm.release(again)  # two free: the one beyond the reserve goes to heavy
    await waiting
    assert adm.inflight == 2 and adm.queued == 0
    assert adm.try_acquire(Ticket("other", 0, 1))  # a third key, holding none
    assert not adm.try_acquire(heavy[3])  # full


async def test_reserved_slots_do_not_apply_without_keys() -> None:
    adm = Admission(max_queue=8, limit=lambda: 2, age_s=0, reserved=1)
    assert adm.try_acquire() and adm.try_acquire()
    assert adm.inflight == 2


async def test_a_reload_sets_the_reserve() -> None:
    adm = Admission(max_queue=8, limit=lambda: 2, age_s=0)
    a = Ticket("a", 0, 1)
    assert adm.try_acquire(a)
    waiting = asyncio.create_task(adm.enter(5.0, None, Ticket("a", 0, 1)))
    adm.tune(8, 0, 60.0, reserved=1)  # the one free slot is now kept from a
    await asyncio.sleep(0)
    assert adm.queued == 1
    adm.tune(8, 0, 60.0, reserved=0)  # and given back: the waiter takes it
    await waiting
    assert adm.inflight == 2
