"""A small pool of connections to one engine, kept connected with backoff."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import Callable

from neutrino.backoff import Backoff
from neutrino.config import EngineConfig, EngineLinkConfig
from neutrino.engine.client import RequestOwner, StreamSink
from neutrino.engine.connection import EngineConnection
from neutrino.engine.messages import LoadModel, ModelInfo, UnloadModel
from neutrino.engine.pool_base import PoolBase
from neutrino.errors import ErrorKind, NeutrinoError

log = logging.getLogger("neutrino.engine")


def _set_event(event: asyncio.Event, _conn: object, _exc: Exception | None) -> None:
    event.set()


class EnginePool(PoolBase):
    """Connections to one engine process (``[[engines]] socket`` or ``address``)."""

    def __init__(
        self,
        cfg: EngineConfig,
        link: EngineLinkConfig,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(cfg, cfg.name or cfg.socket or cfg.address, link, on_change)
        # Where it listens: a UNIX socket, or an engine on TCP (a node's, HOST:PORT).
        self.target: str | tuple[str, int] = cfg.socket
        if cfg.address:
            host, _, port = cfg.address.rpartition(":")
            self.target = (host.strip("[]"), int(port))
        self._slots: list[EngineConnection | None] = [None] * cfg.connections
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._maintain(i), name=f"engine-{self.name}-{i}")
            for i in range(len(self._slots))
        ]

    async def close(self) -> None:
        self._closing = True
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        for conn in self._slots:
            if conn is not None:
                conn.close()

    @property
    def connections(self) -> list[EngineConnection]:
        return [c for c in self._slots if c is not None and c.is_open]

    @property
    def connected(self) -> bool:
        return any(c is not None and c.is_open for c in self._slots)

    @property
    def inflight(self) -> int:
        return sum(c.inflight for c in self.connections)

    @property
    def reported(self) -> int:
        """Requests the engine holds from every client, as of now: what its last pong
        said beyond our own requests then (other front ends'), plus ours now; 0 when it
        does not say. A pong taken in a burst of ours does not outlive the burst."""
        said = ours_then = 0
        for c in self.connections:
            pong = c.link.reported
            if pong is not None:
                said = max(said, pong.running + pong.waiting)
                ours_then += c.link.ours_at_report
        if not said:
            return 0
        return max(0, said - ours_then) + self.inflight

    def in_flight(self) -> list[tuple[RequestOwner, int, StreamSink]]:
        """Every query in flight on its connections: the connection, its id, its sink."""
        return [(c, rid, sink) for c in self.connections for rid, sink in c.link.streams.items()]

    def pick(self) -> EngineConnection | None:
        """The open connection with the fewest requests in flight, preferring one whose
        writes are not paused (an engine slow to read a connection's queries)."""
        best: EngineConnection | None = None
        for c in self._slots:
            if c is None or not c.is_open:
                continue
            if (
                best is None
                or c.write_paused < best.write_paused
                or (c.write_paused == best.write_paused and c.inflight < best.inflight)
            ):
                best = c
        return best

    def _models_changed(self, models: list[ModelInfo]) -> None:
        if self.hello is not None:
            self.hello = dataclasses.replace(self.hello, models=models)
        self._changed()

    async def control(self, msg: LoadModel | UnloadModel) -> None:
        """Have the engine load or unload a model (raises NeutrinoError)."""
        conn = self.pick()
        if conn is None:
            raise NeutrinoError(ErrorKind.NO_ENGINE, f"the engine {self.name!r} is not connected")
        await conn.control(msg)

    async def _maintain(self, slot: int) -> None:
        link = self._link
        backoff = Backoff(link.backoff_initial_s, link.backoff_max_s, jitter=False)
        warned = False
        while not self._closing:
            lost = asyncio.Event()
            try:
                conn = await EngineConnection.open(
                    self.target,
                    f"{self.name}#{slot}",
                    timeout=link.connect_timeout_s,
                    heartbeat_interval=link.heartbeat_interval_s,
                    heartbeat_timeout=link.heartbeat_timeout_s,
                    on_lost=functools.partial(_set_event, lost),
                    stats=self.stats,
                    token=self.cfg.token,
                )
            except (OSError, ConnectionError, TimeoutError) as exc:
                # A refused hello (a wrong token, another protocol) is said once a streak.
                refused = str(exc).startswith("engine refused hello")
                if refused and not warned:
                    log.warning("engine %s slot %d: %s", self.name, slot, exc)
                log.debug("engine %s slot %d: connect failed: %s", self.name, slot, exc)
                warned = refused
                await asyncio.sleep(backoff.next())
                continue
            backoff.reset()
            warned = False
            conn.on_models = self._models_changed
            self.hello = conn.hello
            self._slots[slot] = conn
            self.stats.connects += 1
            log.info(
                "engine %s slot %d connected (%s)",
                self.name,
                slot,
                conn.hello.engine if conn.hello else "?",
            )
            self._connected_once.set()
            self._changed()
            try:
                await lost.wait()
            finally:
                self._slots[slot] = None
                if not self._closing:
                    self.stats.reconnects += 1
                    log.warning("engine %s slot %d disconnected; reconnecting", self.name, slot)
                    self._changed()
                else:
                    conn.close()

    def snapshot(self) -> dict[str, object]:
        hello = self.hello
        return {
            **self._described(),
            "socket": self.cfg.socket,
            **({"address": self.cfg.address} if self.cfg.address else {}),
            "connections": len(self.connections),
            "connections_configured": len(self._slots),
            "inflight": self.inflight,
            "reconnects": self.stats.reconnects,
            "models": [{"name": m.name, "context_length": m.context_length} for m in hello.models]
            if hello
            else [],
        }
