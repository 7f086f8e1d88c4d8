"""The asyncio runner: starts requests in a closed loop (``concurrency`` workers, each
sending its next request when the last one ended) or an open loop (Poisson arrivals at a
rate, whatever the answers take), bounds each by the timeout, and hands every finished
request to the recorder."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Protocol

from neutrino.loadgen.api import Params
from neutrino.loadgen.errors import RequestFailed, classify
from neutrino.loadgen.probe import Probe
from neutrino.loadgen.prompts import Prompt, PromptSource
from neutrino.loadgen.schedule import poisson_arrivals
from neutrino.loadgen.stats import Record, Recorder

MAX_INFLIGHT = 10_000  # an open loop without a concurrency cap


class Driver(Protocol):
    """A protocol's client (see the drive_* modules)."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def first_model(self) -> str | None: ...

    async def send(self, prompt: Prompt, params: Params, probe: Probe) -> None: ...

    def classify(self, exc: BaseException) -> tuple[str, str] | None: ...


@dataclass(frozen=True, slots=True)
class Plan:
    """How many requests, how fast. ``requests`` or ``duration`` (or both) ends the run;
    ``rate`` None: closed loop of ``concurrency`` workers; else the in-flight cap."""

    requests: int | None
    concurrency: int | None
    rate: float | None = None
    duration: float | None = None
    timeout: float = 300.0
    seed: int = 0


# Called as each request ends: its record and its probe (the answer's text for display).
OnEnd = Callable[[Record, Probe], None]


@dataclass(eq=False)
class Runner:
    driver: Driver
    params: Params
    source: PromptSource
    recorder: Recorder
    plan: Plan
    _: KW_ONLY
    on_end: OnEnd | None = None
    keep_text: bool = False
    clock: Callable[[], float] = time.perf_counter
    start: float = field(default=0.0, init=False)
    stopping: bool = field(default=False, init=False)
    interrupted: int = field(default=0, init=False)  # requests cancelled by stop()
    # The open loop's latest start behind its schedule (seconds).
    max_lag: float = field(default=0.0, init=False)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _stopped: asyncio.Event | None = field(default=None, init=False)

    async def run(self) -> float:
        """Run the plan; the duration from the first send to the last end (seconds)."""
        self.start = self.clock()
        self._stopped = asyncio.Event()
        if self.plan.rate is None:
            await self._closed()
        else:
            await self._open(self.plan.rate)
        return self.clock() - self.start

    def stop(self) -> None:
        """Start nothing more and cancel the requests in flight (Ctrl-C)."""
        self.stopping = True
        if self._stopped is not None:
            self._stopped.set()
        for task in list(self._tasks):
            task.cancel()

    def _more(self, index: int) -> bool:
        plan = self.plan
        if self.stopping or (plan.requests is not None and index >= plan.requests):
            return False
        return plan.duration is None or self.clock() - self.start < plan.duration

    async def _closed(self) -> None:
        counter = itertools.count()

        async def worker() -> None:
            while self._more(index := next(counter)):
                task = self._spawn(index)
                try:
                    await task
                except asyncio.CancelledError:
                    if not task.cancelled() or not self.stopping:
                        raise
                    return

        workers = self.plan.concurrency or 1
        if self.plan.requests is not None:
            workers = min(workers, self.plan.requests)
        await asyncio.gather(*(worker() for _ in range(max(1, workers))))

    async def _open(self, rate: float) -> None:
        plan = self.plan
        slots = asyncio.Semaphore(plan.concurrency or MAX_INFLIGHT)
        arrivals = poisson_arrivals(
            rate, random.Random(plan.seed), count=plan.requests, duration=plan.duration
        )
        for index, at in enumerate(arrivals):
            await self._sleep(self.start + at - self.clock())
            await slots.acquire()
            if self.stopping:
                break
            self.max_lag = max(self.max_lag, self.clock() - self.start - at)
            self._spawn(index).add_done_callback(lambda _: slots.release())
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _sleep(self, delay: float) -> None:
        """Wait ``delay`` seconds, or less if stop() comes first."""
        if delay > 0 and self._stopped is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), delay)

    def _spawn(self, index: int) -> asyncio.Task[None]:
        task = asyncio.create_task(self._one(index))
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            self.interrupted += 1

    async def _one(self, index: int) -> None:
        prompt = self.source.get(index)
        probe = Probe(self.clock, keep_text=self.keep_text)
        start = probe.sent - self.start
        try:
            async with asyncio.timeout(self.plan.timeout):
                await self.driver.send(prompt, self.params, probe)
        except Exception as exc:
            kind, message = self._classify(exc)
            failed = Record(index, start, self.clock() - probe.sent, False, kind)
            self.recorder.failure(failed, message)
            self._report(failed, probe)
            return
        ttft = None if probe.first is None else probe.first - probe.sent
        record = Record(
            index,
            start,
            self.clock() - probe.sent,
            True,
            None,
            ttft,
            probe.prompt_tokens,
            probe.output_tokens,
            probe.chunks,
        )
        self.recorder.success(record, probe.gaps)
        self._report(record, probe)

    def _classify(self, exc: BaseException) -> tuple[str, str]:
        if isinstance(exc, RequestFailed | TimeoutError):
            return classify(exc)
        return self.driver.classify(exc) or classify(exc)

    def _report(self, record: Record, probe: Probe) -> None:
        if self.on_end is not None:
            self.on_end(record, probe)
