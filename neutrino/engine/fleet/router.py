"""Routes queries across engines: the real :class:`EngineClient`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Protocol

from neutrino.config import EngineConfig, EngineLinkConfig, RoutingConfig
from neutrino.engine.client import LinkSubmission, Relayed, RequestOwner, StreamSink, Submission
from neutrino.engine.fleet.failover import Holder
from neutrino.engine.fleet.lifecycle import LifecycleStats, ModelKeeper
from neutrino.engine.fleet.resend import Resender
from neutrino.engine.fleet.routing import Replica, Routing, load
from neutrino.engine.messages import (
    HelloAck,
    LoadModel,
    ModelInfo,
    ModelState,
    Query,
    TextQuery,
    UnloadModel,
)
from neutrino.engine.pool import EnginePool
from neutrino.engine.stats import EngineStats
from neutrino.engine.upstream.pool import UpstreamPool
from neutrino.errors import ErrorKind, NeutrinoError

log = logging.getLogger("neutrino.engine")


class Connection(RequestOwner, Protocol):
    """What a pool picks for a query: a socket connection, or an HTTP upstream."""

    def submit(self, query: Query, sink: StreamSink) -> int: ...


class Pool(Replica, Protocol):
    """One engine as the router sees it (a replica to the routing policies): a pool of
    socket connections (``EnginePool``) or an HTTP upstream (``UpstreamPool``)."""

    cfg: EngineConfig
    hello: HelloAck | None
    stats: EngineStats

    @property
    def connected(self) -> bool: ...

    @property
    def connections(self) -> Sequence[object]: ...

    @property
    def passthrough(self) -> bool:
        """Requests are relayed to it as sent (``relay``), not submitted as queries."""
        ...

    async def control(self, msg: LoadModel | UnloadModel) -> None:
        """Have the engine load or unload a model (raises NeutrinoError)."""
        ...

    def pick(self) -> Connection | None: ...

    def in_flight(self) -> list[tuple[RequestOwner, int, StreamSink]]:
        """The queries in flight on it: who holds each, its id and its sink."""
        ...

    async def start(self) -> None: ...

    async def wait_connected(self, timeout: float) -> bool: ...

    async def close(self) -> None: ...

    def snapshot(self) -> dict[str, object]: ...


class Placer(Protocol):
    """The fleet's control plane as the router sees it (``neutrino/fleet/plane.py``):
    models it can place on node agents, loaded on a request's demand."""

    catalogue: frozenset[str]  # the models it places

    def infos(self) -> Mapping[str, ModelInfo]:
        """What each catalogued model is, loaded somewhere or not."""
        ...

    def capacity(self) -> int:
        """Requests the models not placed yet will take (admission lets them in)."""
        ...

    def serving(self) -> bool:
        """Whether a node is up to place models on."""
        ...

    async def ensure(self, model: str, deadline: float) -> None:
        """Return once an engine of ``model`` is connected (placing it if need be)."""
        ...

    async def unload(self, model: str) -> None:
        """Unload every replica of ``model`` (an operator's ask)."""
        ...


def _pool(cfg: EngineConfig, link: EngineLinkConfig, on_change: Callable[[], None]) -> Pool:
    if cfg.upstream:
        return UpstreamPool(cfg, link, on_change)
    return EnginePool(cfg, link, on_change)


class _Held(LinkSubmission):
    """A submission to an engine that loads on demand: its model counts as in use until
    the request ends (its one ``forget``, after any ``cancel``)."""

    __slots__ = ("_keeper", "_model")

    def __init__(self, owner: RequestOwner, rid: int, keeper: Holder, model: str) -> None:
        super().__init__(owner, rid)
        self._keeper: Holder | None = keeper
        self._model = model
        keeper.used(model)

    def cancel(self, reason: str) -> bool:
        sent = super().cancel(reason)
        self._release()
        return sent

    def forget(self) -> None:
        super().forget()
        self._release()

    def _release(self) -> None:
        if self._keeper is not None:
            self._keeper.released(self._model)
            self._keeper = None


class _HeldRelay:
    """A relayed answer from an upstream that loads on demand: its model counts as in
    use until the answer is closed."""

    __slots__ = ("_answer", "_keeper", "_model", "content_type")

    def __init__(self, answer: Relayed, keeper: ModelKeeper, model: str) -> None:
        self._answer = answer
        self._keeper: ModelKeeper | None = keeper
        self._model = model
        self.content_type = answer.content_type

    def chunks(self) -> AsyncIterator[bytes]:
        return self._answer.chunks()

    async def read(self, limit: int) -> bytes:
        return await self._answer.read(limit)

    def close(self) -> None:
        self._answer.close()
        if self._keeper is not None:
            self._keeper.released(self._model)
            self._keeper = None


class EngineRouter:
    """Picks, per model, the least-loaded connected engine and connection."""

    def __init__(
        self,
        engines: Sequence[EngineConfig],
        link: EngineLinkConfig,
        routing: RoutingConfig | None = None,
    ) -> None:
        self._link = link
        self.pools = [_pool(e, link, self._refresh) for e in engines]
        routing = routing or RoutingConfig()
        self.routing = Routing(routing)
        self.resender = Resender(routing, self, load)
        self._models: dict[str, ModelInfo] = {}
        self._by_model: dict[str, list[Pool]] = {}
        self._relays: dict[str, list[UpstreamPool]] = {}  # passthrough upstreams by model
        self.relayed: frozenset[str] = frozenset()  # models only passthrough upstreams serve
        # Engines that load models on demand (a memory budget in their hello), by pool.
        self.keepers: dict[int, ModelKeeper] = {}
        self.lifecycle = LifecycleStats()
        # The fleet's control plane, when node agents are configured; the engines it
        # placed count their requests through their holders.
        self.placer: Placer | None = None
        self._placeable: frozenset[str] = frozenset()
        self.holders: dict[int, Holder] = {}
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
            if pool.name in self.resender.draining:
                continue
            if pool.hello.memory_budget:
                self._pin(self._keeper_of(pool), pool.hello)
            for m in pool.hello.models:
                known = models.get(m.name)
                if known is None or (
                    known.state is not ModelState.LOADED and m.state is ModelState.LOADED
                ):
                    models[m.name] = m  # loaded somewhere: shown loaded
                if isinstance(pool, UpstreamPool) and pool.passthrough:
                    relays.setdefault(m.name, []).append(pool)
                else:
                    by_model.setdefault(m.name, []).append(pool)
        placer = self.placer
        if placer is not None:
            for name, info in placer.infos().items():
                models.setdefault(name, info)  # placed nowhere yet: shown as it will be
        self._models = models
        self._by_model = by_model
        self._relays = relays
        self.relayed = frozenset(relays.keys() - by_model.keys())
        self._connected = any(p.connected for p in self.pools)
        self._capacity = sum(
            p.hello.capacity for p in self.pools if p.connected and p.hello is not None
        ) + (placer.capacity() if placer is not None else 0)
        self._known |= models.keys()
        self._changed.set()
        self._changed = asyncio.Event()
        for listener in self.listeners:
            listener()

    def _keeper_of(self, pool: Pool) -> ModelKeeper:
        keeper = self.keepers.get(id(pool))
        if keeper is None:
            keeper = self.keepers[id(pool)] = ModelKeeper(
                pool.name,
                lambda: pool.hello,
                pool.control,
                frozenset(pool.cfg.pinned),
                self.lifecycle,
            )
        return keeper

    def _pin(self, keeper: ModelKeeper, hello: HelloAck) -> None:
        """Load the engine's pinned models that it does not hold (at its first connection,
        and again after it restarted without them)."""
        for m in hello.models:
            name = m.name
            if name in keeper.pinned and m.state is ModelState.UNLOADED:
                if name in keeper.pinning:
                    continue
                keeper.pinning.add(name)
                asyncio.get_running_loop().create_task(self._load_pinned(keeper, name))

    async def _load_pinned(self, keeper: ModelKeeper, model: str) -> None:
        try:
            await keeper.ensure_loaded(model, asyncio.get_running_loop().time() + 600)
        except (NeutrinoError, TimeoutError) as exc:
            log.error("engine %s could not load its pinned model %s: %s", keeper.name, model, exc)
        finally:
            keeper.pinning.discard(model)

    def _serving(self, model: str) -> Sequence[Pool]:
        """The engines that answer ``model``'s requests: those it is submitted to, else
        the passthrough upstreams that relay it."""
        return self._by_model.get(model) or self._relays.get(model) or ()

    def ready(self, model: str) -> bool:
        """Served, and loaded where it loads on demand with no load or unload waiting."""
        if model not in self._models:
            return False
        if model in self._placeable and model not in self._by_model:
            return False  # catalogued, and no engine of it is connected: placed first
        if not self.keepers:
            return True
        keepers = [self.keepers.get(id(p)) for p in self._serving(model)]
        return not keepers or any(k is None or k.ready(model) for k in keepers)

    async def ensure_loaded(self, model: str, timeout: float) -> None:
        """Return once an engine serving ``model`` has it loaded (loading it if need be)."""
        if self.placer is not None and model in self._placeable and model not in self._by_model:
            await self.placer.ensure(model, asyncio.get_running_loop().time() + timeout)
            return
        pools = self._serving(model)
        if not pools:
            return  # not served: the request fails as it would have
        keepers = [self.keepers.get(id(p)) for p in pools]
        if any(k is None or k.ready(model) for k in keepers):
            return
        keeper = next(k for k in keepers if k is not None)
        await keeper.ensure_loaded(model, asyncio.get_running_loop().time() + timeout)

    async def load(self, model: str, timeout: float) -> None:
        """An operator's load (admin route): as a request's, without the request."""
        if model not in self._models:
            raise NeutrinoError(ErrorKind.MODEL_NOT_FOUND, f"the model {model!r} does not exist")
        if model in self._placeable:
            await self.ensure_loaded(model, timeout)
            return
        if not any(id(p) in self.keepers for p in self._serving(model)):
            raise NeutrinoError(ErrorKind.UNSUPPORTED, f"no engine of {model!r} loads on demand")
        await self.ensure_loaded(model, timeout)

    async def unload(self, model: str) -> None:
        """An operator's unload: every engine that loads on demand unloads ``model``."""
        if self.placer is not None and model in self._placeable:
            await self.placer.unload(model)
            return
        keepers = [self.keepers[id(p)] for p in self._serving(model) if id(p) in self.keepers]
        if not keepers:
            raise NeutrinoError(ErrorKind.UNSUPPORTED, f"no engine of {model!r} loads on demand")
        for keeper in keepers:
            await keeper.unload(model)

    def model_engines(self, model: str) -> list[tuple[str, ModelState]]:
        """Each engine that serves ``model``, and the model's state there."""
        out: list[tuple[str, ModelState]] = []
        pools: list[Pool] = [*self._by_model.get(model, ()), *self._relays.get(model, ())]
        for pool in pools:
            hello = pool.hello
            state = (
                next((m.state for m in hello.models if m.name == model), None) if hello else None
            )
            if state is not None:
                out.append((pool.name, state))
        return out

    def _may_return(self, pool: Pool, query: Query) -> bool:
        """Whether a request on a model's only engine may move when it fails: the engine is
        one Neutrino restarts, or the fleet places the model again."""
        placer = self.placer
        return pool.cfg.managed or (placer is not None and query.model in placer.catalogue)

    def _coming(self, model: str) -> bool:
        """Whether a managed engine that served ``model`` (or has not said yet what it
        serves) is not connected now: starting, or restarting after it died."""
        return any(p.cfg.managed and not p.connected and self._may_serve(p, model)
                   for p in self.pools)  # fmt: skip

    @staticmethod
    def _may_serve(pool: Pool, model: str) -> bool:
        hello = pool.hello
        return hello is None or any(m.name == model for m in hello.models)

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
        await self.resender.close()
        for p in self.pools:
            await p.close()

    def models(self) -> Mapping[str, ModelInfo]:
        return self._models

    @property
    def known_models(self) -> set[str]:
        """Every model an engine has served since the start (bounded by the engines)."""
        return self._known

    def has_engine(self) -> bool:
        return self._connected or (self.placer is not None and self.placer.serving())

    def capacity(self) -> int:
        return self._capacity

    def submit(self, query: Query, sink: StreamSink) -> Submission:
        pools = self._by_model.get(query.model)
        conn: Connection | None = None
        best: Pool | None = None
        if pools:
            resender = self.resender
            if len(pools) == 1:
                best = pools[0]
                if resender.active and not self.keepers and self._may_return(best, query):
                    return resender.failover(query, sink, best)
            else:
                pools = resender.in_rotation(pools)
                prompt = query.prompt_tokens if type(query) is TextQuery else ()
                best = self.routing.choose(query.model, pools, prompt)
                if resender.active and not self.keepers:
                    return resender.failover(query, sink, best)
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
        rid = conn.submit(query, sink)
        keeper: Holder | None = self.keepers.get(id(best)) if self.keepers else None
        if keeper is None and self.holders:
            keeper = self.holders.get(id(best))
        if keeper is not None:
            return _Held(conn, rid, keeper, query.model)
        return LinkSubmission(conn, rid)

    # ------------------------------------------------------------------ failover

    def replicas_of(self, model: str) -> Sequence[Pool]:
        return self._by_model.get(model, ())

    def served(self) -> Mapping[str, Sequence[Pool]]:
        return self._by_model

    def holder_of(self, replica: Any) -> Holder | None:
        return self.holders.get(id(replica)) if self.holders else None

    def coming(self, model: str) -> bool:
        placer = self.placer
        if placer is not None and model in placer.catalogue:
            return True
        return any(p.cfg.managed and self._may_serve(p, model) for p in self.pools)

    def connects(self, name: str) -> int:
        return sum(p.stats.connects for p in self.pools if p.name == name)

    async def arrival(self, model: str, timeout: float) -> None:
        placer = self.placer
        loop = asyncio.get_running_loop()
        changed = self._changed
        if placer is not None and model in placer.catalogue and not self.serves(model):
            try:
                await placer.ensure(model, loop.time() + timeout)
                return
            except NeutrinoError:  # no room now: wait for a change before trying again
                pass
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await changed.wait()

    def drain(self, name: str) -> int:
        pool = next((p for p in self.pools if p.name == name), None)
        if pool is None:
            raise NeutrinoError(ErrorKind.NOT_FOUND, f"no engine is named {name!r}")
        return self.resender.drain(pool)

    def resume(self, name: str) -> None:
        if not any(p.name == name for p in self.pools):
            raise NeutrinoError(ErrorKind.NOT_FOUND, f"no engine is named {name!r}")
        self.resender.resume(name)

    def failover_snapshot(self) -> dict[str, object]:
        return self.resender.snapshot()

    async def relay(
        self, model: str, path: str, doc: dict[str, Any], raw: bytes, traceparent: str
    ) -> Relayed:
        pools = self._relays.get(model)
        if not pools:
            raise NeutrinoError(ErrorKind.NO_ENGINE, f"no upstream relaying {model!r} is connected")
        best = pools[0] if len(pools) == 1 else self.routing.choose(model, pools, ())
        keeper = self.keepers.get(id(best)) if self.keepers else None
        if keeper is None:
            return await best.relay(path, doc, raw, traceparent)
        keeper.used(model)  # at once: the model is not unloaded while it is relayed
        try:
            answer = await best.relay(path, doc, raw, traceparent)
        except BaseException:
            keeper.released(model)
            raise
        return _HeldRelay(answer, keeper, model)

    # ------------------------------------------------------------------ the fleet

    def place_with(self, placer: Placer) -> None:
        """Serve ``placer``'s catalogue: its models are listed, and loaded on demand."""
        self.placer = placer
        self._placeable = placer.catalogue
        self._refresh()

    def refresh(self) -> None:
        """Read again what the pools and the placer say (a placement changed)."""
        self._refresh()

    async def attach(self, cfg: EngineConfig, holder: Holder) -> Pool:
        """A placed engine's pool, started (it connects in the background)."""
        pool = _pool(cfg, self._link, self._refresh)
        self.pools.append(pool)
        self.holders[id(pool)] = holder
        await pool.start()
        return pool

    async def detach(self, pool: Pool) -> None:
        """Close a placed engine's pool (its requests in flight end as a lost engine's)."""
        with contextlib.suppress(ValueError):
            self.pools.remove(pool)
        self.holders.pop(id(pool), None)
        self._refresh()  # no request is routed to it from now on
        await pool.close()
        self._refresh()

    def serves(self, model: str) -> bool:
        """Whether a connected engine takes ``model``'s queries now."""
        return model in self._by_model

    def snapshot(self) -> list[dict[str, object]]:
        return [p.snapshot() for p in self.pools]

    def configure_routing(self, cfg: RoutingConfig) -> None:
        """A reload's routing settings (what was learned is kept when they are the same)."""
        if cfg != self.routing.cfg:
            self.routing = Routing(cfg)
            self.resender.configure(cfg)
