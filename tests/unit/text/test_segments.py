"""The prompt segment cache stays within its character budget, oldest out first."""

from __future__ import annotations

import threading

from neutrino.text.segments import SegmentCache


def test_budget_and_eviction_order() -> None:
    cache = SegmentCache(max_chars=10, max_segment=6)
    cache.put("aaaa", [1])
    cache.put("bbbb", [2])
    assert cache.chars == 8 and len(cache) == 2
    cache.put("cccc", [3])  # over budget: "aaaa" leaves
    assert cache.get("aaaa") is None and cache.get("bbbb") == [2] and cache.get("cccc") == [3]
    assert cache.chars == 8
    cache.put("toolong", [4])  # longer than max_segment: never stored
    assert cache.get("toolong") is None and cache.chars == 8
    cache.put("bbbb", [9])  # already there: kept as is
    assert cache.get("bbbb") == [2] and cache.chars == 8


def test_concurrent_puts_keep_the_budget() -> None:
    cache = SegmentCache(max_chars=1000, max_segment=50)

    def fill(k: int) -> None:
        for i in range(2000):
            cache.put(f"{k}-{i:05d}-" + "x" * (i % 40), [i])

    threads = [threading.Thread(target=fill, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 0 < cache.chars <= 1000
    assert cache.chars == sum(len(k) for k in cache._map)
