"""The control plane's asyncio adapter: places the catalogue's models on node agents and
hands each placed engine to the router as a pool of its own.

A request for a catalogued model that no connected engine serves waits (in Queued) in
:meth:`FleetPlane.ensure`; concurrent requests share one placement task per model. A
placement picks a node where the model fits (``placement.choose``), else unloads the
least recently used models that are neither pinned there nor busy on a node where it
then fits (``placement.evict``), waiting for a busy one to end when only busy ones
would make room; a load that fails tries the next node; a node that does not answer is
marked down at once. The poller (``poller.py``) keeps the topology and calls
:meth:`reconcile` after each round: engines found loaded are adopted (a restart loses
nothing), engines gone are dropped, pinned models and ``replicas.min`` are kept loaded,
a replica is added while a model's queue stays long and one idle past
``scale_down_idle_s`` is unloaded.

The placed engines are reached with token ids, not text: our engines through the
engine protocol on TCP (the node's token in the hello), llama.cpp's server as an HTTP
upstream in token mode (the token as its API key).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from neutrino.config import CatalogueEntry, Config, EngineConfig
from neutrino.engine.fleet.router import EngineRouter, Pool
from neutrino.engine.messages import ModelInfo, ModelState
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.fleet import placement
from neutrino.fleet.agents import AgentClient, AgentDown, AgentRefused
from neutrino.fleet.topology import NodeState, Topology

log = logging.getLogger("neutrino.fleet")

_CONNECT_EXTRA_S = 10.0  # a loaded engine's pool connects within the link's timeout and this
MB = 1 << 20
_DEVICE_KEYS = ("index", "vram_total_mb", "vram_used_mb", "vram_free_mb", "utilization",
                "temperature_c")  # fmt: skip


class Placed:
    """One placed engine (a model on a node) and its requests: the router's holder."""

    pool: Pool  # its engine's pool in the router, set once attached

    def __init__(self, plane: FleetPlane, node: str, model: str) -> None:
        self._plane = plane
        self.node = node
        self.model = model
        self.in_use = 0
        self.last_used = time.monotonic()
        self.placed_at = self.last_used

    def used(self, model: str) -> None:
        self.in_use += 1
        self.last_used = time.monotonic()

    def released(self, model: str) -> None:
        self.in_use -= 1
        self.last_used = time.monotonic()
        if not self.in_use:
            self._plane.idle()

    @property
    def connected(self) -> bool:
        return self.pool.connected


@dataclass(slots=True)
class ModelCounts:
    loads: int = 0
    load_failures: int = 0
    evictions: int = 0
    load_seconds: float = 0.0


class FleetPlane:
    def __init__(self, cfg: Config, router: EngineRouter) -> None:
        self.cfg = cfg
        self.fleet = cfg.fleet
        self.router = router
        self.entries: dict[str, CatalogueEntry] = {e.id: e for e in cfg.catalogue}
        self.catalogue = frozenset(self.entries)
        self.topology = Topology()
        self.clients: dict[str, AgentClient] = {}
        self.placed: dict[tuple[str, str], Placed] = {}
        self.counts = {m: ModelCounts() for m in self.entries}
        self._placing: dict[str, asyncio.Task[None]] = {}
        # Loads in progress: (node, model) -> MB, counted against the node until its
        # polls show the model (then the node's own accounting has it).
        self._loading: dict[tuple[str, str], int] = {}
        self._demand: dict[str, int] = {}  # requests waiting in ensure(), per model
        self._idle = asyncio.Event()  # set (and replaced) when a placed engine goes idle
        self._queue_since: dict[str, float] = {}
        # A background placement (pins, replicas) that failed is not tried again before.
        self._retry_after: dict[str, float] = {}
        for node in cfg.nodes:
            self.add_node(node.name, node.endpoint, node.token)

    # ------------------------------------------------------------------ nodes

    def add_node(self, name: str, endpoint: str, token: str) -> NodeState:
        node = self.topology.add(name, endpoint, token)
        client = self.clients.get(name)
        if client is None or client.base != endpoint.rstrip("/") or client.token != token:
            self.clients[name] = AgentClient(name, endpoint, token, self.fleet.call_timeout_s)
        return node

    async def remove_node(self, name: str) -> None:
        """A node no longer known (gone from etcd or DNS)."""
        await self.node_down(name, "it is no longer found")
        self.topology.nodes.pop(name, None)
        client = self.clients.pop(name, None)
        if client is not None:
            await client.close()

    async def node_down(self, name: str, why: str) -> None:
        """Its engines leave the router; its models are placed again on demand."""
        gone = [p for p in self.placed.values() if p.node == name]
        if gone:
            log.warning("node %s is down (%s): %d engines leave the router (%s)", name, why,
                        len(gone), ", ".join(p.model for p in gone))  # fmt: skip
        for p in gone:
            await self._drop(p)

    async def _unreachable(self, name: str, error: str) -> None:
        """A call on a request's behalf got no answer: the node is down now."""
        if self.topology.failed(name, time.monotonic(), error, down_after=1):
            await self.node_down(name, error)

    # ------------------------------------------------------------------ the router's view

    def infos(self) -> Mapping[str, ModelInfo]:
        return {
            e.id: ModelInfo(
                e.id, e.context_length, state=ModelState.UNLOADED, size_bytes=e.memory_mb * MB
            )
            for e in self.entries.values()
        }

    def capacity(self) -> int:
        """The slots of the models no connected engine serves (their requests are admitted
        and wait for the placement together)."""
        return sum(e.slots for m, e in self.entries.items() if not self.router.serves(m))

    def serving(self) -> bool:
        return bool(self.topology.up())

    def idle(self) -> None:
        self._idle.set()
        self._idle = asyncio.Event()

    def _movable(self, node: str, model: str) -> bool:
        """Whether ``model`` may be unloaded on ``node`` to make room: one of ours, not
        pinned there, no request running on it."""
        entry = self.entries.get(model)
        if entry is None or node in entry.pinned_on or model in self._placing:
            return False
        if self._demand.get(model):  # requests about to be submitted to it
            return False
        placed = self.placed.get((node, model))
        return placed is None or not placed.in_use

    def _movable_when_idle(self, node: str, model: str) -> bool:
        """Whether ``model`` would be movable once its requests (and its own placement,
        if it is being placed) end."""
        entry = self.entries.get(model)
        return entry is not None and node not in entry.pinned_on

    def _reserved(self) -> dict[str, int]:
        """MB per node that loads in progress take, beyond what the node reports."""
        out: dict[str, int] = {}
        for (node, model), mb in self._loading.items():
            state = self.topology.nodes.get(node)
            if state is not None and model not in state.live():
                out[node] = out.get(node, 0) + mb
        return out

    def _last_used(self, node: str, model: str) -> float:
        placed = self.placed.get((node, model))
        return placed.last_used if placed is not None else 0.0

    # ------------------------------------------------------------------ demand

    async def ensure(self, model: str, deadline: float) -> None:
        """Return once a connected engine serves ``model``; the requests waiting share
        one placement (NO_ENGINE if it cannot be placed; TIMEOUT past ``deadline``)."""
        if self.router.serves(model):
            return
        loop = asyncio.get_running_loop()
        # Counted until it returns: the model it waits for is not evicted before the
        # request is submitted (in the same turn of the loop as the return).
        self._demand[model] = self._demand.get(model, 0) + 1
        try:
            while not self.router.serves(model):
                task = self._placing.get(model) or self._start(model)
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError
                await asyncio.wait_for(asyncio.shield(task), remaining)
        except TimeoutError:
            raise NeutrinoError(
                ErrorKind.TIMEOUT, f"the request timed out while {model!r} was being placed"
            ) from None
        except NeutrinoError as exc:
            raise exc.fresh() from None
        finally:
            left = self._demand[model] - 1
            if left:
                self._demand[model] = left
            else:
                del self._demand[model]
                self.idle()

    def _start(self, model: str, extra: bool = False, only: str = "") -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(
            self._place(model, extra, only),
            name=f"place-{model}",
            context=contextvars.Context(),  # the fleet's own work, not the first request's
        )
        self._placing[model] = task
        task.add_done_callback(lambda t: self._placed_done(model, t))
        return task

    def _placed_done(self, model: str, task: asyncio.Task[None]) -> None:
        if self._placing.get(model) is task:
            del self._placing[model]
        self.idle()  # a placement waiting for room may find it now
        if not task.cancelled() and task.exception() is not None:  # retrieved: said here
            log.warning("placing %s failed: %s", model, task.exception())
            self._retry_after[model] = time.monotonic() + max(10.0, 5 * self.fleet.poll_s)

    async def _place(self, model: str, extra: bool, only: str) -> None:
        """Place ``model`` (another replica when ``extra``; on node ``only`` when given)."""
        entry = self.entries[model]
        if not extra and await self._reconnects(model):
            return
        tried = {n for n in self.topology.nodes if only and n != only}
        last_error = ""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.fleet.load_timeout_s
        while True:
            holding = {n for n, m in self.placed if m == model}
            spot = await self._spot(entry, tried, holding, give_up)
            if spot is None:
                raise NeutrinoError(ErrorKind.NO_ENGINE, self._why_not(entry, tried, last_error))
            try:
                await self._load_on(spot, entry)
                return
            except AgentDown as exc:
                await self._unreachable(spot.node, str(exc))
                last_error = str(exc)
            except AgentRefused as exc:
                last_error = f"{spot.node}: {exc.message}"
                log.warning("node %s could not load %s: %s", spot.node, model, exc.message)
            self.counts[model].load_failures += 1
            tried.add(spot.node)

    async def _spot(
        self, entry: CatalogueEntry, tried: set[str], holding: set[str], give_up: float
    ) -> placement.Spot | None:
        """A node for ``entry`` now: one it fits, or one made room on by evictions
        (waiting for busy models to end when only they would make room)."""
        nodes = self.topology.nodes.values()
        loop = asyncio.get_running_loop()
        while True:
            reserved = self._reserved()
            spot = placement.choose(entry, nodes, tried, holding, reserved)
            if spot is not None:
                return spot
            plan = placement.evict(
                entry, nodes, tried, holding, reserved, self._movable, self._last_used
            )
            if plan is not None and all(self._movable(plan.spot.node, v) for v in plan.victims):
                for victim in plan.victims:
                    await self._evict(plan.spot.node, victim, entry.id)
                return plan.spot
            could = placement.evict(
                entry, nodes, tried, holding, reserved, self._movable_when_idle, self._last_used
            )
            if could is None or loop.time() > give_up:
                return None
            idle = self._idle
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(idle.wait(), max(0.01, give_up - loop.time()))

    def _why_not(self, entry: CatalogueEntry, tried: set[str], last_error: str) -> str:
        if last_error:
            return f"the model {entry.id!r} could not be loaded on any node (last: {last_error})"
        up = self.topology.up()
        if not up:
            return f"no node agent is up to load the model {entry.id!r}"
        need = f"{entry.vram_mb} MB of GPU memory" if entry.gpu else f"{entry.memory_mb} MB"
        free = ", ".join(f"{n.name}: {n.budget_free_mb()} MB free" for n in up)
        return (
            f"no node can hold the model {entry.id!r} (it needs {need}; {free}; pinned and "
            "busy models are not unloaded)"
        )

    async def _reconnects(self, model: str) -> bool:
        """Whether an engine already placed for ``model`` connects (again) soon: one the
        node still says is loaded; the others are dropped."""
        waiting = [p for p in self.placed.values() if p.model == model and not p.connected]
        for p in waiting:
            try:
                models = await self.clients[p.node].models()
            except AgentDown as exc:
                await self._unreachable(p.node, str(exc))
                continue
            except AgentRefused:
                models = []
            if not any(m.get("id") == model and m.get("state") == "loaded" for m in models):
                await self._drop(p)
        alive = [p for p in self.placed.values() if p.model == model]
        for p in alive:
            if await p.pool.wait_connected(self.cfg.engine_link.connect_timeout_s):
                return True
        return self.router.serves(model)

    # ------------------------------------------------------------------ actions

    async def _load_on(self, spot: placement.Spot, entry: CatalogueEntry) -> None:
        node, client = spot.node, self.clients[spot.node]
        self._loading[(node, entry.id)] = entry.vram_mb if entry.gpu else entry.memory_mb
        start = time.monotonic()
        log.info("placing %s on node %s", entry.id, node)
        try:
            doc = await client.load(entry, spot.devices, self.fleet.load_timeout_s)
            if doc.get("state") != "loaded":
                raise AgentRefused(504, "load_timeout", f"still {doc.get('state')} after the wait")
            where = await client.endpoint(entry.id)
        finally:
            del self._loading[(node, entry.id)]
        placed = await self._attach(node, entry, where)
        budget = self.cfg.engine_link.connect_timeout_s + _CONNECT_EXTRA_S
        if not await placed.pool.wait_connected(budget):
            await self._drop(placed)
            with contextlib.suppress(AgentDown, AgentRefused):
                await client.unload(entry.id)
            raise AgentRefused(502, "not_connected", f"its engine did not connect in {budget:g} s")
        counts = self.counts[entry.id]
        counts.loads += 1
        counts.load_seconds += time.monotonic() - start
        log.info("%s placed on node %s in %.2f s", entry.id, node, time.monotonic() - start)
        await self.poll_soon(node)

    async def _attach(self, node: str, entry: CatalogueEntry, where: dict[str, Any]) -> Placed:
        old = self.placed.get((node, entry.id))
        if old is not None:
            await self._drop(old)
        token = self.topology.nodes[node].token
        name = f"{node}/{entry.id}"
        if where.get("kind") == "http":
            cfg = EngineConfig(
                name=name, url=str(where["url"]), mode="tokens", api_key=token,
                models=(entry.id,), capacity=entry.slots,
                context_length=entry.context_length, refresh_s=self.fleet.poll_s,
            )  # fmt: skip
        else:
            cfg = EngineConfig(
                name=name, address=str(where["address"]), token=token,
                connections=self.fleet.connections,
            )  # fmt: skip
        placed = Placed(self, node, entry.id)
        placed.pool = await self.router.attach(cfg, placed)
        self.placed[(node, entry.id)] = placed
        return placed

    async def _drop(self, placed: Placed) -> None:
        if self.placed.get((placed.node, placed.model)) is placed:
            del self.placed[(placed.node, placed.model)]
        await self.router.detach(placed.pool)

    async def _evict(self, node: str, model: str, for_model: str) -> None:
        placed = self.placed.get((node, model))
        if placed is not None:
            await self._drop(placed)
        log.info("node %s: unloading %s (least recently used) to make room for %s",
                 node, model, for_model)  # fmt: skip
        try:
            await self.clients[node].unload(model)
        except AgentDown as exc:
            await self._unreachable(node, str(exc))
            return
        except AgentRefused as exc:
            log.warning("node %s could not unload %s: %s", node, model, exc.message)
        self.counts[model].evictions += 1
        await self.poll_soon(node)

    async def unload(self, model: str) -> None:
        """An operator's unload: every replica of ``model``, wherever it is placed."""
        for p in [p for p in self.placed.values() if p.model == model]:
            await self.unload_replica(p.node, model, "an operator asked")

    async def unload_replica(self, node: str, model: str, why: str) -> None:
        """Unload a replica the plane no longer wants (scaled down, asked)."""
        placed = self.placed.get((node, model))
        if placed is not None:
            await self._drop(placed)
        log.info("node %s: unloading %s (%s)", node, model, why)
        with contextlib.suppress(AgentDown, AgentRefused):
            await self.clients[node].unload(model)

    async def poll_soon(self, node: str) -> None:
        """Read a node's health and models again now (after a load or an unload)."""
        client = self.clients.get(node)
        if client is None:
            return
        try:
            health, models = await client.health(), await client.models()
        except (AgentDown, AgentRefused):
            return
        self.topology.answered(node, time.monotonic(), health, models)

    # ------------------------------------------------------------------ reconcile

    async def sync_node(self, name: str) -> None:
        """Adopt the catalogued engines a node holds loaded that the router lacks; drop
        those it no longer holds."""
        node = self.topology.nodes[name]
        for (n, model), placed in list(self.placed.items()):
            if n == name and not node.loaded(model) and model not in self._placing:
                log.warning("node %s no longer holds %s (%s)", name, model,
                            node.models.get(model, {}).get("reason") or "unloaded")  # fmt: skip
                await self._drop(placed)
        for model in node.live():
            entry = self.entries.get(model)
            if entry is None or (name, model) in self.placed or model in self._placing:
                continue
            if not node.loaded(model):
                continue
            try:
                where = await self.clients[name].endpoint(model)
            except (AgentDown, AgentRefused):
                continue
            log.info("node %s holds %s loaded: adopted", name, model)
            await self._attach(name, entry, where)

    def reconcile(self, now: float) -> None:
        """Start what the catalogue asks for beyond demand: pinned models, replicas.min,
        a replica more for a long queue, a replica less when idle."""
        for model, entry in self.entries.items():
            if model in self._placing or now < self._retry_after.get(model, 0.0):
                continue
            replicas = [p for p in self.placed.values() if p.model == model]
            on = {p.node for p in replicas}
            for node in entry.pinned_on:
                state = self.topology.nodes.get(node)
                if state is not None and state.up and node not in on:
                    self._start(model, extra=True, only=node)
                    break
            else:
                if len(replicas) < entry.replicas.min and self.topology.up():
                    self._start(model, extra=bool(replicas))
                elif self._queue_long(entry, replicas, now):
                    log.info("%s: its queue stayed long; adding a replica", model)
                    self._start(model, extra=True)
                else:
                    self._scale_down(entry, replicas, now)

    def _queue_long(self, entry: CatalogueEntry, replicas: list[Placed], now: float) -> bool:
        connected = [p for p in replicas if p.connected]
        waiting = sum(p.in_use for p in connected) - entry.slots * len(connected)
        if not connected or len(replicas) >= entry.replicas.max:
            self._queue_since.pop(entry.id, None)
            return False
        if waiting < self.fleet.scale_up_queue:
            self._queue_since.pop(entry.id, None)
            return False
        since = self._queue_since.setdefault(entry.id, now)
        if now - since < self.fleet.scale_up_after_s:
            return False
        del self._queue_since[entry.id]
        return True

    def _scale_down(self, entry: CatalogueEntry, replicas: list[Placed], now: float) -> None:
        keep = max(entry.replicas.min, 1)
        idle_s = self.fleet.scale_down_idle_s
        if not idle_s or len(replicas) <= keep:
            return
        spare = [
            p for p in replicas
            if not p.in_use and p.node not in entry.pinned_on and now - p.last_used > idle_s
        ]  # fmt: skip
        if spare:
            p = min(spare, key=lambda p: p.last_used)
            task = asyncio.get_running_loop().create_task(
                self.unload_replica(p.node, p.model, f"idle for {idle_s:g} s, above replicas.min")
            )
            self._placing[entry.id] = task
            task.add_done_callback(lambda t: self._placed_done(entry.id, t))

    # ------------------------------------------------------------------ state

    def snapshot(self) -> dict[str, object]:
        nodes = []
        for node in self.topology.nodes.values():
            view = node.snapshot()
            view["engines"] = [
                {"model": p.model, "connected": p.connected, "in_use": p.in_use,
                 "engine": p.pool.name}
                for p in self.placed.values() if p.node == node.name
            ]  # fmt: skip
            nodes.append(view)
        catalogue = []
        for model, entry in self.entries.items():
            on = sorted(p.node for p in self.placed.values() if p.model == model)
            c = self.counts[model]
            catalogue.append(
                {
                    "id": model, "harness": entry.harness, "file": entry.file,
                    "memory_mb": entry.memory_mb, "vram_mb": entry.vram_mb,
                    "pinned_on": list(entry.pinned_on),
                    "replicas": {"min": entry.replicas.min, "max": entry.replicas.max,
                                 "placed": len(on)},
                    "placed_on": on, "placing": model in self._placing,
                    "loads": c.loads, "load_failures": c.load_failures,
                    "evictions": c.evictions,
                }
            )  # fmt: skip
        return {"nodes": nodes, "catalogue": catalogue}

    def raw(self) -> dict[str, object]:
        """For the metrics exposition (observability/fleet_metrics.py)."""
        nodes: dict[str, object] = {}
        for node in self.topology.nodes.values():
            states: dict[str, int] = {}
            for e in node.models.values():
                states[str(e.get("state"))] = states.get(str(e.get("state")), 0) + 1
            devices = node.snapshot()["devices"]
            nodes[node.name] = {
                "up": node.up,
                "downs": node.downs,
                "memory": node.health.get("memory", {}),
                "devices": [
                    {k: d.get(k) for k in _DEVICE_KEYS}
                    for d in (devices if isinstance(devices, list) else ())
                ],
                "models": states,
            }
        models = {
            m: {
                "loads": c.loads,
                "load_failures": c.load_failures,
                "evictions": c.evictions,
                "load_seconds": c.load_seconds,
                "replicas": sum(1 for p in self.placed.values() if p.model == m and p.connected),
            }
            for m, c in self.counts.items()
        }
        return {"nodes": nodes, "models": models}

    async def close(self) -> None:
        for task in list(self._placing.values()):
            task.cancel()
        for task in list(self._placing.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for client in self.clients.values():
            await client.close()
