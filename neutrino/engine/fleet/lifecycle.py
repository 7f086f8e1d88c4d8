"""Models loaded on demand, for an engine that announces a memory budget.

Such an engine lists every model it can serve, each loaded or not and its size; Neutrino
decides what it holds. A request for a model that is not loaded waits while it is loaded
(requests that arrive meanwhile share that load); a load that does not fit the budget
first unloads the least recently used models that are neither pinned (``[[engines]]
pinned``) nor answering a request, waiting for one to become idle when every candidate
is busy. One load or unload runs at a time per engine, in the order asked, so a model
that is wanted again is loaded again after the model that evicted it has had its turn.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from neutrino.engine.messages import HelloAck, LoadModel, ModelInfo, ModelState, UnloadModel
from neutrino.errors import ErrorKind, NeutrinoError

log = logging.getLogger("neutrino.engine")

Control = Callable[[LoadModel | UnloadModel], Awaitable[None]]


@dataclass(slots=True)
class ModelCounts:
    """What the lifecycle did for one model, since the start (for metrics)."""

    loads: int = 0
    evictions: int = 0
    load_seconds: float = 0.0


@dataclass(slots=True)
class LifecycleStats:
    models: dict[str, ModelCounts] = field(default_factory=dict)

    def of(self, model: str) -> ModelCounts:
        counts = self.models.get(model)
        if counts is None:
            counts = self.models[model] = ModelCounts()
        return counts


class ModelKeeper:
    """The loaded models of one engine that loads on demand."""

    def __init__(
        self,
        name: str,
        hello: Callable[[], HelloAck | None],
        control: Control,
        pinned: frozenset[str],
        stats: LifecycleStats,
    ) -> None:
        self.name = name
        self._hello = hello
        self._control = control
        self.pinned = pinned
        self.stats = stats
        self.lock = asyncio.Lock()
        self.last_used: dict[str, float] = {}
        self.in_use: dict[str, int] = {}
        self.pinning: set[str] = set()  # pinned models being loaded now
        self._idle = asyncio.Event()  # set (and replaced) whenever a model's last request ends

    # ------------------------------------------------------------------ the table

    def _models(self) -> dict[str, ModelInfo]:
        hello = self._hello()
        return {m.name: m for m in hello.models} if hello is not None else {}

    def state(self, model: str) -> ModelState:
        info = self._models().get(model)
        return info.state if info is not None else ModelState.UNLOADED

    def ready(self, model: str) -> bool:
        """Loaded, and no load or unload waits its turn (a waiting load goes first)."""
        return self.state(model) is ModelState.LOADED and not self.lock.locked()

    # ------------------------------------------------------------------ requests

    def used(self, model: str) -> None:
        """A request for ``model`` was submitted."""
        self.last_used[model] = time.monotonic()
        self.in_use[model] = self.in_use.get(model, 0) + 1

    def released(self, model: str) -> None:
        """A request for ``model`` ended."""
        n = self.in_use.get(model, 0) - 1
        if n > 0:
            self.in_use[model] = n
            return
        self.in_use.pop(model, None)
        self._idle.set()
        self._idle = asyncio.Event()

    # ------------------------------------------------------------------ loads

    async def ensure_loaded(self, model: str, deadline: float) -> None:
        """Return once ``model`` is loaded (TIMEOUT past ``deadline``, loop time)."""
        if self.ready(model):
            return
        async with asyncio.timeout_at(deadline):
            async with self.lock:
                if self.state(model) is ModelState.LOADED:
                    return
                await self._make_room(model)
                start = time.monotonic()
                await self._control(LoadModel(model))
                counts = self.stats.of(model)
                counts.loads += 1
                counts.load_seconds += time.monotonic() - start
                log.info(
                    "engine %s loaded %s in %.2f s", self.name, model, time.monotonic() - start
                )

    async def unload(self, model: str) -> None:
        """Unload ``model`` now (an operator's ask; its requests end first, engine-side)."""
        async with self.lock:
            if self.state(model) is not ModelState.UNLOADED:
                await self._control(UnloadModel(model))

    async def _make_room(self, model: str) -> None:
        """Unload least recently used models until ``model`` fits the budget."""
        while True:
            hello = self._hello()
            if hello is None:
                raise NeutrinoError(ErrorKind.NO_ENGINE, f"the engine {self.name!r} is gone")
            models = {m.name: m for m in hello.models}
            loaded = [m for m in models.values() if m.state is not ModelState.UNLOADED]
            need = models[model].size_bytes if model in models else 0
            if (
                not hello.memory_budget
                or sum(m.size_bytes for m in loaded) + need <= hello.memory_budget
            ):
                return
            movable = [m.name for m in loaded if m.name not in self.pinned and m.name != model]
            if not movable:
                raise NeutrinoError(
                    ErrorKind.NO_ENGINE,
                    f"no engine can hold the model {model!r}: it does not fit the memory of"
                    f" {self.name!r} beside its pinned models",
                )
            idle = [m for m in movable if not self.in_use.get(m)]
            if not idle:
                await self._idle.wait()  # a request of a loaded model ends
                continue
            victim = min(idle, key=lambda m: self.last_used.get(m, 0.0))
            await self._control(UnloadModel(victim))
            self.stats.of(victim).evictions += 1
            log.info("engine %s unloaded %s to make room for %s", self.name, victim, model)
