"""mock_ie's models loaded on demand (``--memory-budget``): every model starts unloaded;
a load takes ``--load-ms`` and fails when it would pass the budget; an unload waits for
the model's requests to end; a query for a model that is not loaded is refused. So a
client that gets its loads and evictions wrong sees failed requests, as with a real
engine that has only so much memory."""

from __future__ import annotations

import asyncio

from neutrino.engine.messages import EngineError, ErrorCode, ModelState


class MockMemory:
    def __init__(self, budget: int, model_bytes: int, load_s: float, names: list[str]) -> None:
        self.budget = budget
        self.model_bytes = model_bytes
        self.load_s = load_s
        self.names = set(names)
        self.loaded: set[str] = set()
        self.loading: set[str] = set()
        self.active: dict[str, int] = {}  # requests running, per model
        self.peak = 0  # the most models loaded at once
        self._changed = asyncio.Event()

    def state(self, name: str) -> ModelState:
        if name in self.loaded:
            return ModelState.LOADED
        return ModelState.LOADING if name in self.loading else ModelState.UNLOADED

    def refuse(self, name: str) -> EngineError | None:
        """The error for a query of ``name`` now (None: it may run)."""
        if name in self.names and name not in self.loaded:
            return EngineError(ErrorCode.UNSUPPORTED, f"the model {name!r} is not loaded")
        return None

    def began(self, name: str) -> None:
        self.active[name] = self.active.get(name, 0) + 1

    def ended(self, name: str) -> None:
        n = self.active.get(name, 0) - 1
        if n > 0:
            self.active[name] = n
        else:
            self.active.pop(name, None)
            self._changed.set()
            self._changed = asyncio.Event()

    async def load(self, name: str) -> EngineError | None:
        if name not in self.names:
            return EngineError(ErrorCode.UNKNOWN_MODEL, f"unknown model {name!r}")
        if name in self.loaded:
            return None
        if (len(self.loaded) + len(self.loading) + 1) * self.model_bytes > self.budget:
            return EngineError(ErrorCode.OVERLOADED, f"no memory left to load {name!r}")
        self.loading.add(name)
        try:
            await asyncio.sleep(self.load_s)
        finally:
            self.loading.discard(name)
        self.loaded.add(name)
        self.peak = max(self.peak, len(self.loaded))
        return None

    async def unload(self, name: str) -> EngineError | None:
        if name not in self.names:
            return EngineError(ErrorCode.UNKNOWN_MODEL, f"unknown model {name!r}")
        while self.active.get(name):
            await self._changed.wait()  # its requests end first
        self.loaded.discard(name)
        return None
