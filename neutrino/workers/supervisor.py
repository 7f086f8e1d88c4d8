"""The ``--workers N`` parent: it serves nothing itself; it starts N workers and keeps
them running.

Before the first worker starts it reserves every listener's port (``ports``), makes a
private folder for the workers' sockets and files (0700, removed at exit) and starts the
embedded mock engine once when the config uses it (each worker then connects to it as to
any engine, with its own connections). Each worker is ``python -m neutrino`` with the same
arguments, the chosen addresses and ``--worker-index I --worker-dir D``; it dies with the
supervisor (PDEATHSIG). A worker that dies is started again (``policy``). SIGTERM and
SIGINT are passed on to every worker, which drains as a single process does; the
supervisor exits 0 once all have exited (those still running ``[shutdown] grace_s`` plus a
margin later are killed). SIGHUP is passed on too (reload).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from neutrino.config import Config
from neutrino.engine.managed import ManagedEngines, mock_engine
from neutrino.errors import StartupError, os_reason
from neutrino.lifeline import die_with_parent
from neutrino.restarts import RestartPolicy, Restarts
from neutrino.workers.peers import SUPERVISOR_FILE
from neutrino.workers.ports import Reservation
from neutrino.workers.tallies import retire, write_json

log = logging.getLogger("neutrino.workers")

_KILL_MARGIN_S = 5.0  # past the drain's grace, a worker still running is killed
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _worker_preexec() -> None:  # in the child, between fork and exec
    die_with_parent()
    # A SIGHUP (reload) that comes while a worker starts must not end it: ignored (which
    # lasts past exec) until the worker's event loop takes the signal over.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _exit_text(code: int) -> str:
    if code < 0:
        return f"signal {signal.Signals(-code).name}"
    return f"status {code}"


class Supervisor:
    def __init__(self, cfg: Config, argv: list[str], policy: RestartPolicy | None = None) -> None:
        self.cfg = cfg
        self.argv = list(argv)
        self.count = cfg.server.workers
        self.restarts = Restarts(self.count, policy)
        self.procs: list[asyncio.subprocess.Process | None] = [None] * self.count
        self.slot_restarts = [0] * self.count
        self.folder = Path("/nonexistent")  # made by run()
        self.failure: str | None = None
        self._extra: list[str] = []
        self._stop = asyncio.Event()

    async def run(self) -> int:
        """Serve until SIGTERM/SIGINT: 0; StartupError when workers cannot be kept up."""
        try:
            self.folder = Path(tempfile.mkdtemp(prefix="neutrino-workers-"))
        except OSError as exc:
            raise StartupError(f"cannot make the workers' folder: {os_reason(exc)}") from exc
        reservation: Reservation | None = None
        processes = ManagedEngines()
        try:
            reservation = Reservation(self.cfg)
            await self._prepare(reservation, processes)
            await asyncio.gather(*(self._keep(i) for i in range(self.count)))
        finally:
            self._unhandle_signals()
            await processes.stop()
            if reservation is not None:
                reservation.release()
            shutil.rmtree(self.folder, ignore_errors=True)
        if self.failure is not None:
            raise StartupError(self.failure)
        log.info("all workers exited")
        return 0

    async def _prepare(self, reservation: Reservation, processes: ManagedEngines) -> None:
        """The supervisor runs the managed engines (the embedded mock too); every worker
        connects to each engine's socket (``--engine``)."""
        self._extra = [*reservation.argv, "--worker-dir", str(self.folder)]
        engines = (mock_engine(self.cfg.mock),) if self.cfg.embedded_mock else self.cfg.engines
        engines = processes.resolve(engines)
        if any(e.managed for e in engines):
            processes.adopt(await processes.start(engines), engines)
            processes.watch()
            for e in engines:
                self._extra += ["--engine", e.socket]
        loop = asyncio.get_running_loop()
        for sig in _FORWARDED:
            loop.add_signal_handler(sig, self._on_signal, sig)
        where = ", ".join(f"{what} on {addr}" for what, addr in reservation.addresses.items())
        log.info("supervisor (pid %d) starting %d workers: %s", os.getpid(), self.count, where)

    def _unhandle_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in _FORWARDED:
            loop.remove_signal_handler(sig)

    async def _keep(self, index: int) -> None:
        """Run worker ``index`` until the supervisor stops, starting it again when it dies."""
        loop = asyncio.get_running_loop()
        while not self._stop.is_set():
            try:
                proc = await self._spawn(index)
            except OSError as exc:
                self._give_up(f"cannot start worker {index}: {os_reason(exc)}")
                return
            self.restarts.started(index, loop.time())
            code = await proc.wait()
            self.procs[index] = None
            retire(self.folder, proc.pid)
            if self._stop.is_set():
                return
            death = self.restarts.died(index, loop.time())
            if death.give_up:
                self._give_up(
                    f"workers keep exiting soon after they start (worker {index} exited with "
                    f"{_exit_text(code)} after {death.lived_s:.1f}s, "
                    f"{self.restarts.policy.give_up_after} times in a row); see the log above"
                )
                return
            log.warning(
                "worker %d (pid %d) exited with %s after %.1fs; starting it again in %.1fs",
                index, proc.pid, _exit_text(code), death.lived_s, death.delay_s,
            )  # fmt: skip
            self.slot_restarts[index] += 1
            with contextlib.suppress(TimeoutError):  # a stop meanwhile ends the wait
                await asyncio.wait_for(self._stop.wait(), death.delay_s)

    async def _spawn(self, index: int) -> asyncio.subprocess.Process:
        argv = [*self.argv, *self._extra, "--worker-index", str(index)]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "neutrino", *argv, preexec_fn=_worker_preexec
        )
        self.procs[index] = proc
        self._write_state()
        log.info("worker %d started (pid %d)", index, proc.pid)
        return proc

    def _write_state(self) -> None:
        """What ``app_state`` shows of the workers that do not answer, and their restarts."""
        workers = [
            {"pid": p.pid if p is not None else None, "restarts": n}
            for p, n in zip(self.procs, self.slot_restarts, strict=True)
        ]
        write_json(self.folder / SUPERVISOR_FILE, {"pid": os.getpid(), "workers": workers})

    def _on_signal(self, sig: signal.Signals) -> None:
        if sig != signal.SIGHUP:
            if self._stop.is_set():
                return
            log.info("%s: stopping every worker", sig.name)
            self._stop.set()
            grace = self.cfg.shutdown.grace_s + _KILL_MARGIN_S
            asyncio.get_running_loop().call_later(grace, self._kill_all)
        else:
            log.info("SIGHUP: reloading every worker")
        self._send(sig)

    def _send(self, sig: signal.Signals) -> None:
        for proc in self.procs:
            if proc is not None and proc.returncode is None:
                proc.send_signal(sig)

    def _kill_all(self) -> None:
        if any(p is not None and p.returncode is None for p in self.procs):
            log.warning("workers still running after the shutdown grace: killing them")
            self._send(signal.SIGKILL)

    def _give_up(self, why: str) -> None:
        if self.failure is None:
            self.failure = why
        if not self._stop.is_set():
            self._stop.set()
            self._send(signal.SIGTERM)
            grace = self.cfg.shutdown.grace_s + _KILL_MARGIN_S
            asyncio.get_running_loop().call_later(grace, self._kill_all)


def supervise(cfg: Config, argv: list[str]) -> int:
    """Run the supervisor of ``cfg.server.workers`` workers to its end (an exit status).

    On asyncio's own loop, whatever ``[server] uvloop`` says (the workers' setting): the
    supervisor serves no traffic, and uvloop's process spawning resets the child's
    signals after ``preexec_fn``, which would undo the ignored SIGHUP."""
    return asyncio.run(Supervisor(cfg, argv).run())
