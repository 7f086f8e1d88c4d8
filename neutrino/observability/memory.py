"""Gives memory that Python has freed back to the system after a burst of large requests.

A refused 8 MB prompt frees everything it allocated, but glibc keeps the freed pages of
its heaps (one per thread that allocated: tokenizing runs on worker threads) for reuse,
so the process's resident size stays at its peak. Every few seconds the trimmer looks at
the resident size and, when it has grown by more than a threshold since the last look,
asks glibc (``malloc_trim``) to return free pages. Elsewhere than glibc it does nothing.

glibc also raises its mmap threshold each time a large mapped block is freed, so after
the first 8 MB body every later one lands in a heap instead, where the small objects
allocated around it keep its pages resident (fifty 8 MB requests left ~80 MB that no
trim could return). The trimmer fixes the threshold at ``MMAP_THRESHOLD``: blocks that
large are always mapped and go back to the system when freed. No ordinary request
allocates one.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import time
from collections.abc import Callable

from neutrino.observability.process import rss_bytes

log = logging.getLogger("neutrino.memory")

INTERVAL_S = 2.0
GROWTH_BYTES = 16 * 1024 * 1024
MMAP_THRESHOLD = 1024 * 1024
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


def _tune_glibc() -> Callable[[int], int] | None:
    """Fixes glibc's mmap threshold and returns its ``malloc_trim`` (None elsewhere)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is not None:
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        mallopt.restype = ctypes.c_int
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    call: Callable[[int], int] = trim
    return call


class HeapTrimmer:
    def __init__(self, interval_s: float = INTERVAL_S, growth_bytes: int = GROWTH_BYTES) -> None:
        self._trim = _tune_glibc()
        self._interval = interval_s
        self._growth = growth_bytes
        self._floor = 0
        self._paying = False  # the last trim returned memory: look again next time
        self._task: asyncio.Task[None] | None = None
        self.trims = 0

    def start(self) -> None:
        if self._trim is not None and self._task is None:
            self._floor = rss_bytes()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="heap-trim")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def check(self) -> None:
        """Trim if the resident size grew past the threshold since the last trim, and
        again at the next look while trimming returns memory (the burst is ending)."""
        rss = rss_bytes()
        if rss < self._floor:
            self._floor = rss
        elif (rss > self._floor + self._growth or self._paying) and self._trim is not None:
            t0 = time.perf_counter()
            self._trim(0)
            after = rss_bytes()
            self.trims += 1
            self._paying = rss - after >= self._growth // 4
            log.debug(
                "returned %.1f MB to the system in %.1f ms",
                (rss - after) / 2**20,
                (time.perf_counter() - t0) * 1e3,
            )
            self._floor = after

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            self.check()
