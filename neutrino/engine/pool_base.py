"""What every engine pool is, whatever reaches its engine: a socket pool (``pool.py``)
or an HTTP upstream (``upstream/pool.py``). Its name, config, handshake, stats, the
first-connection event and the change callback the router listens to."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from neutrino.config import EngineConfig, EngineLinkConfig
from neutrino.engine.messages import HelloAck
from neutrino.engine.stats import EngineStats


class PoolBase:
    """One configured engine, kept reachable by its subclass's maintenance task(s)."""

    def __init__(
        self,
        cfg: EngineConfig,
        name: str,
        link: EngineLinkConfig,
        on_change: Callable[[], None] | None,
    ) -> None:
        self.cfg = cfg
        self.name = name
        self._link = link
        self._on_change = on_change
        self.hello: HelloAck | None = None
        self.stats = EngineStats()
        self._connected_once = asyncio.Event()

    @property
    def connected(self) -> bool:
        raise NotImplementedError

    @property
    def passthrough(self) -> bool:
        """Whether it only relays clients' bodies (an upstream's mode); else it takes queries."""
        return False

    @property
    def capacity(self) -> int:
        """Requests it takes at once, as its handshake said (1 before it)."""
        return self.hello.capacity if self.hello is not None else 1

    async def wait_connected(self, timeout: float) -> bool:
        """Whether it connected within ``timeout`` seconds (at once if it has before)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._connected_once.wait()
        return self.connected

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()

    def _described(self) -> dict[str, object]:
        """The parts of its status entry every pool has."""
        hello = self.hello
        return {
            "name": self.name,
            "connected": self.connected,
            "stats": self.stats.snapshot(),
            "engine": hello.engine if hello else None,
            "capacity": hello.capacity if hello else 0,
        }
