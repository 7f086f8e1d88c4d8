"""A worker's side of ``--workers``: its private socket, and what it gathers from the rest.

Each worker answers on ``D/worker-I.sock`` (mode 0600, in the supervisor's private
folder): ``GET /raw``, its metrics tallies, and ``GET /state``, a summary of its state.
The worker that a scrape or an admin request lands on asks every other worker (each
within ``PEER_TIMEOUT_S``; one that does not answer is left out, its last tallies taken
from its file) and merges: metrics for ``/metrics``, the list of workers for ``app_state``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web

from neutrino.config import WorkerConfig
from neutrino.observability.metrics import Raw
from neutrino.workers.tallies import left_behind, read_json, write_snapshot

if TYPE_CHECKING:
    from neutrino.pipeline.orchestrator import Orchestrator

log = logging.getLogger("neutrino.workers")

PEER_TIMEOUT_S = 1.0
SUPERVISOR_FILE = "supervisor.json"  # the supervisor's pid, the workers' pids and restarts


def socket_path(folder: str | Path, index: int) -> Path:
    return Path(folder) / f"worker-{index}.sock"


async def fetch(path: Path, route: str, timeout_s: float = PEER_TIMEOUT_S) -> object:
    """``GET route`` on a worker's socket: its JSON, or None (gone, slow, or broken)."""
    try:
        async with (
            asyncio.timeout(timeout_s),
            aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(path))) as session,
            session.get(f"http://worker{route}") as resp,
        ):
            if resp.status != 200:
                return None
            doc: object = await resp.json()
            return doc
    except (OSError, aiohttp.ClientError, TimeoutError, ValueError):
        return None


def summary(orch: Orchestrator, index: int, started: float) -> dict[str, object]:
    """What ``app_state`` lists of each worker."""
    engines = orch.engines.snapshot()
    return {
        "index": index,
        "pid": os.getpid(),
        "uptime_s": round(time.time() - started, 3),
        "draining": orch.draining,
        "connections": sum(n for e in engines if isinstance(n := e.get("connections"), int)),
        "queue_depth": orch.admission.queued,
        "in_flight": orch.inflight,
        "requests": {"started": orch.started, "finished": dict(orch.finished)},
    }


class Peers:
    """This worker's socket, and the gathering of every worker's tallies and state."""

    def __init__(
        self, worker: WorkerConfig, workers: int, orch: Orchestrator, raw: Callable[[], Raw]
    ) -> None:
        self.index = worker.index
        self.folder = Path(worker.dir)
        self.workers = workers
        self._orch = orch
        self._raw = raw
        self._started = time.time()
        self._supervisor = os.getppid()  # the supervisor started this worker
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/raw", self._answer_raw)
        app.router.add_get("/state", self._answer_state)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        path = socket_path(self.folder, self.index)
        path.unlink(missing_ok=True)  # the previous worker's in this slot
        await web.UnixSite(runner, str(path)).start()
        path.chmod(0o600)
        self._runner = runner

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            socket_path(self.folder, self.index).unlink(missing_ok=True)

    def raw_now(self) -> Raw:
        """This worker's tallies, written to its file first (see ``tallies``)."""
        raw = self._raw()
        write_snapshot(self.folder, os.getpid(), raw)
        return raw

    def state_now(self) -> dict[str, object]:
        return summary(self._orch, self.index, self._started)

    async def _answer_raw(self, _request: web.Request) -> web.Response:
        return web.json_response({"pid": os.getpid(), "raw": self.raw_now()})

    async def _answer_state(self, _request: web.Request) -> web.Response:
        return web.json_response(self.state_now())

    async def _others(self, route: str) -> dict[int, object]:
        """Each other worker's answer to ``route`` by index (those that answered)."""
        others = [i for i in range(self.workers) if i != self.index]
        got = await asyncio.gather(*(fetch(socket_path(self.folder, i), route) for i in others))
        return {i: answer for i, answer in zip(others, got, strict=True) if answer is not None}

    async def gather_raw(self) -> list[Raw]:
        """Every worker's tallies, and those of workers gone (for ``/metrics``)."""
        raws = [self.raw_now()]
        answered = {os.getpid()}
        for answer in (await self._others("/raw")).values():
            if isinstance(answer, dict):  # {"pid": ..., "raw": ...} (_answer_raw)
                answered.add(answer["pid"])
                raws.append(answer["raw"])
        return raws + left_behind(self.folder, answered)

    async def gather_state(self) -> list[dict[str, object]]:
        """Every worker's summary, by index; one that did not answer is named as such."""
        answers = await self._others("/state")
        answers[self.index] = self.state_now()
        known = read_json(self.folder / SUPERVISOR_FILE)
        slots = known.get("workers", []) if isinstance(known, dict) else []
        listed = []
        for i in range(self.workers):
            slot = slots[i] if i < len(slots) else {}
            answer = answers.get(i)
            entry = answer if isinstance(answer, dict) and answer else {
                "index": i, "pid": slot.get("pid"), "answering": False
            }  # fmt: skip
            entry["restarts"] = slot.get("restarts", 0)
            listed.append(entry)
        return listed

    def signal_reload(self) -> bool:
        """Ask the supervisor to reload every worker (SIGHUP); False if it is gone."""
        if os.getppid() != self._supervisor:
            return False
        os.kill(self._supervisor, signal.SIGHUP)
        return True
