"""The prompt segment cache stays within its memory budget, oldest out first."""

from __future__ import annotations

import threading

from neutrino.text.segments import SegmentCache, entry_bytes


def test_budget_and_eviction_order() -> None:
    one = entry_bytes("aaaa", [1])
    cache = SegmentCache(max_bytes=2 * one + 1, max_segment=6)
    cache.put("aaaa", [1])
    cache.put("bbbb", [2])
    assert cache.nbytes == 2 * one and len(cache) == 2
    cache.put("cccc", [3])  # over budget: "aaaa" leaves
    assert cache.get("aaaa") is None and cache.get("bbbb") == [2] and cache.get("cccc") == [3]
    assert cache.nbytes == 2 * one
    cache.put("toolong", [4])  # longer than max_segment: never stored
    assert cache.get("toolong") is None and cache.nbytes == 2 * one
    cache.put("bbbb", [9])  # already there: kept as is
    assert cache.get("bbbb") == [2] and cache.nbytes == 2 * one


def test_many_short_unique_segments_cost_their_overhead() -> None:
    """Each request's own turn is a short new segment: its entry's overhead and ids, not
    its few characters, are what it holds (counting characters let 200,000 requests grow
    the cache past 30 MB)."""
    cache = SegmentCache(max_bytes=100_000)
    for i in range(10_000):
        cache.put(f"user\nTell me about {i}", [872, 198, 40451, 752, 911, 220, i])
    assert cache.nbytes <= 100_000 and len(cache) < 400


def test_concurrent_puts_keep_the_budget() -> None:
    cache = SegmentCache(max_bytes=10_000, max_segment=50)

    def fill(k: int) -> None:
        for i in range(2000):
            cache.put(f"{k}-{i:05d}-" + "x" * (i % 40), [i])

    threads = [threading.Thread(target=fill, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 0 < cache.nbytes <= 10_000
    assert cache.nbytes == sum(entry_bytes(k, v) for k, v in cache._map.items())
