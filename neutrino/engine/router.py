"""Routes queries across engines: the real :class:`EngineClient`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from neutrino.config import EngineConfig, EngineLinkConfig
from neutrino.engine.client import LinkSubmission, Relayed, RequestOwner, StreamSink
from neutrino.engine.messages import HelloAck, ModelInfo, Query
from neutrino.engine.pool import EnginePool
from neutrino.engine.stats import EngineStats
from neutrino.engine.upstream.pool import UpstreamPool
from neutrino.errors import ErrorKind, NeutrinoError


class Connection(RequestOwner, Protocol):
    """What a pool picks for a query: a socket connection, or an HTTP upstream."""

    def submit(self, query: Query, sink: StreamSink) -> int: ...


class Pool(Protocol):
    """One engine as the router sees it: a pool of socket connections (``EnginePool``)
    or an HTTP upstream (``UpstreamPool``)."""

    cfg: EngineConfig
    name: str
    hello: HelloAck | None
    stats: EngineStats

    @property
    def connected(self) -> bool: ...

    @property
    def connections(self) -> Sequence[object]: ...

    @property
    def inflight(self) -> int: ...

    @property
    def passthrough(self) -> bool:
        """Requests are relayed to it as sent (``relay``), not submitted as queries."""
        ...

    def pick(self) -> Connection | None: ...

    async def start(self) -> None: ...

    async def wait_connected(self, timeout: float) -> bool: ...

    async def close(self) -> None: ...

    def snapshot(self) -> dict[str, object]: ...


def _pool(cfg: EngineConfig, link: EngineLinkConfig, on_change: Callable[[], None]) -> Pool:
    if cfg.upstream:
        return UpstreamPool(cfg, link, on_change)
    return EnginePool(cfg, link, on_change)


def _load(pool: Pool) -> float:
    capacity = pool.hello.capacity if pool.hello else 1
    return pool.inflight / max(1, capacity)


class EngineRouter:
    """Picks, per model, the least-loaded connected engine and connection."""

    def __init__(self, engines: Sequence[EngineConfig], link: EngineLinkConfig) -> None:
        self.pools = [_pool(e, link, self._refresh) for e in engines]
        self._models: dict[str, ModelInfo] = {}
        self._by_model: dict[str, list[Pool]] = {}
        self._relays: dict[str, list[UpstreamPool]] = {}  # passthrough upstreams by model
        self._known: set[str] = set()
        self._connected = False
        self._capacity = 0
        self.listeners: list[Callable[[], None]] = []
        self._changed = asyncio.Event()  # set (and replaced) at each change of engines

    def _refresh(self) -> None:
        models: dict[str, ModelInfo] = {}
        by_model: dict[str, list[Pool]] = {}
        relays: dict[str, list[UpstreamPool]] = {}
        for pool in self.pools:
            if not pool.connected or pool.hello is None:
                continue
            for m in pool.hello.models:
                models.setdefault(m.name, m)
                if isinstance(pool, UpstreamPool) and pool.passthrough:
                    relays.setdefault(m.name, []).append(pool)
                else:
                    by_model.setdefault(m.name, []).append(pool)
        self._models = models
        self._by_model = by_model
        self._relays = relays
        self._connected = any(p.connected for p in self.pools)
        self._capacity = sum(
            p.hello.capacity for p in self.pools if p.connected and p.hello is not None
        )
        self._known |= models.keys()
        self._changed.set()
        self._changed = asyncio.Event()
        for listener in self.listeners:
            listener()

    def _coming(self, model: str) -> bool:
        """Whether a managed engine that served ``model`` (or has not said yet what it
        serves) is not connected now: starting, or restarting after it died."""
        for p in self.pools:
            served = p.hello is None or any(m.name == model for m in p.hello.models)
            if p.cfg.managed and not p.connected and served:
                return True
        return False

    async def wait_for(self, model: str, timeout: float) -> bool:
        deadline = asyncio.get_running_loop().time() + timeout
        while model not in self._models:
            if not self._coming(model):
                return False
            changed = self._changed
            try:
                async with asyncio.timeout_at(deadline):
                    await changed.wait()
            except TimeoutError:
                return False
        return True

    async def start(self) -> None:
        for p in self.pools:
            await p.start()

    async def wait_ready(self, timeout: float) -> bool:
        if not self.pools:
            return False
        results = await asyncio.gather(*(p.wait_connected(timeout) for p in self.pools))
        return any(results)

    async def close(self) -> None:
        for p in self.pools:
            await p.close()

    def models(self) -> Mapping[str, ModelInfo]:
        return self._models

    @property
    def known_models(self) -> set[str]:
        """Every model an engine has served since the start (bounded by the engines)."""
        return self._known

    def has_engine(self) -> bool:
        return self._connected

    def capacity(self) -> int:
        return self._capacity

    def submit(self, query: Query, sink: StreamSink) -> LinkSubmission:
        pools = self._by_model.get(query.model)
        conn: Connection | None = None
        if pools:
            best = pools[0] if len(pools) == 1 else min(pools, key=_load)
            conn = best.pick()
        if conn is None:
            if not self.has_engine() or query.model in self._known:
                raise NeutrinoError(
                    ErrorKind.NO_ENGINE, f"no engine serving {query.model!r} is connected"
                )
            raise NeutrinoError(
                ErrorKind.MODEL_NOT_FOUND,
                f"the model {query.model!r} does not exist",
                param="model",
            )
        return LinkSubmission(conn, conn.submit(query, sink))

    def passthrough(self, model: str) -> bool:
        return model in self._relays and model not in self._by_model

    async def relay(self, model: str, path: str, doc: dict[str, Any], traceparent: str) -> Relayed:
        pools = self._relays.get(model)
        if not pools:
            raise NeutrinoError(ErrorKind.NO_ENGINE, f"no upstream relaying {model!r} is connected")
        best = pools[0] if len(pools) == 1 else min(pools, key=_load)
        return await best.relay(path, doc, traceparent)

    def snapshot(self) -> list[dict[str, object]]:
        return [p.snapshot() for p in self.pools]
