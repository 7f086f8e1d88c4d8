"""Managed engine processes: ``[[engines]] command = [...]`` (and the embedded mock).

Neutrino starts the command with the engine's socket (a private one unless configured),
forwards each line it prints to Neutrino's log under the engine's name, waits for the
engine's handshake (its connection pool says so) within ``ready_timeout_s``, and starts
it again with a growing delay when it dies or never becomes ready. Requests running on
it fail cleanly (the connection is lost); requests that arrive meanwhile wait for it
(the pipeline's wait for a restarting engine). ``stop`` sends SIGTERM, then SIGKILL after
``stop_timeout_s``. The process dies with Neutrino (PR_SET_PDEATHSIG) if Neutrino is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from neutrino.config import EngineConfig, MockConfig
from neutrino.errors import StartupError, os_reason
from neutrino.lifeline import die_with_parent
from neutrino.restarts import RestartPolicy, Restarts

log = logging.getLogger("neutrino.engine.managed")

# Restarts never give up (an engine may need its machine back): the delay doubles with
# each death soon after a start, up to 30 s.
_POLICY = RestartPolicy(initial_s=0.2, max_s=30.0, quick_s=30.0, give_up_after=1 << 62)
_LINE_LIMIT = 64 * 1024  # longer log lines are cut
_READY_POLL_S = 0.05
MOCK_NAME = "embedded-mock"


def socket_path(cfg: EngineConfig, folder: Path) -> str:
    """The socket a managed engine listens on: its configured one, or one in ``folder``."""
    if cfg.socket:
        return cfg.socket
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", cfg.name)[:40] or "engine"
    return str(folder / f"{safe}.sock")


def command_argv(cfg: EngineConfig, socket: str) -> list[str]:
    """The command as run: a leading ``python`` is this interpreter, ``{socket}`` is the
    socket's path (else ``--socket PATH`` is appended)."""
    argv = list(cfg.command)
    if argv and argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    if any("{socket}" in a for a in argv):
        return [a.replace("{socket}", socket) for a in argv]
    return [*argv, "--socket", socket]


class ManagedEngine:
    """One engine process, kept running."""

    def __init__(self, cfg: EngineConfig, folder: Path) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.socket = socket_path(cfg, folder)
        self.state = "stopped"  # starting, ready, restarting, stopped
        self.restarts = 0
        self.last_exit: int | None = None
        self.connected: Callable[[], bool] = lambda: False  # set to its pool's
        self._proc: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None
        self._logs: asyncio.Task[None] | None = None
        self._stopping = False
        self._stopped: asyncio.Future[None] | None = None
        self._restarts = Restarts(1, _POLICY)

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    async def start(self) -> None:
        """Start the process (StartupError if it cannot be run at all) and watch it."""
        try:
            await self._spawn()
        except OSError as exc:
            raise StartupError(
                f"cannot start engine {self.name!r} ({' '.join(self.cfg.command)}): "
                f"{os_reason(exc)}"
            ) from exc
        self._task = asyncio.get_running_loop().create_task(
            self._watch(), name=f"managed-{self.name}"
        )

    async def _spawn(self) -> None:
        with contextlib.suppress(OSError):  # a dead engine's socket: gone until it listens
            if stat.S_ISSOCK(os.lstat(self.socket).st_mode):
                os.unlink(self.socket)
        env = {**os.environ, **self.cfg.env} if self.cfg.env else None
        self._proc = proc = await asyncio.create_subprocess_exec(
            *command_argv(self.cfg, self.socket),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            cwd=self.cfg.cwd or None,
            preexec_fn=die_with_parent,
            # Its own session: a signal to Neutrino's process group (Ctrl-C, a SIGTERM to
            # `make run`) reaches Neutrino only, which drains and then stops the engine
            # itself; it still dies with Neutrino (die_with_parent).
            start_new_session=True,
            limit=_LINE_LIMIT,
        )
        self.state = "starting"
        self._restarts.started(0, time.monotonic())
        log.info("engine %s started (pid %d) on %s", self.name, proc.pid, self.socket)
        assert proc.stdout is not None
        self._logs = asyncio.get_running_loop().create_task(self._forward(proc.stdout, proc.pid))

    async def _forward(self, out: asyncio.StreamReader, pid: int) -> None:
        """The engine's output, a log line each, named by the engine."""
        while True:
            try:
                line = await out.readline()
            except ValueError:  # a line past the limit: its start, cut
                line = await out.read(_LINE_LIMIT)
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip()
            if text:
                log.info("[%s %d] %s", self.name, pid, text)

    async def _watch(self) -> None:
        while not self._stopping:
            proc = self._proc
            assert proc is not None
            code = await self._until_exit_or_stuck(proc)
            if self._stopping:
                return
            self.last_exit = code
            if self._logs is not None:  # what it printed as it died comes first
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(self._logs), 1.0)
            death = self._restarts.died(0, time.monotonic())
            self.state = "restarting"
            self.restarts += 1
            log.warning(
                "engine %s (pid %d) exited with %s; starting it again in %.1fs",
                self.name, proc.pid, code, death.delay_s,
            )  # fmt: skip
            await asyncio.sleep(death.delay_s)
            if self._stopping:
                return
            try:
                await self._spawn()
            except OSError as exc:
                log.error("engine %s: cannot start it again: %s", self.name, os_reason(exc))
                self._proc = None
                self.state = "stopped"
                return

    async def _until_exit_or_stuck(self, proc: asyncio.subprocess.Process) -> int:
        """The exit status; a process not ready within ``ready_timeout_s`` is killed."""
        deadline = time.monotonic() + self.cfg.ready_timeout_s
        waiter = asyncio.ensure_future(proc.wait())
        try:
            while self.state == "starting":
                done, _ = await asyncio.wait({waiter}, timeout=_READY_POLL_S)
                if done:
                    return waiter.result()
                if self.connected():
                    self.state = "ready"
                    log.info("engine %s ready (pid %d)", self.name, proc.pid)
                elif time.monotonic() > deadline:
                    log.error(
                        "engine %s (pid %d) not ready within %gs; killing it",
                        self.name, proc.pid, self.cfg.ready_timeout_s,
                    )  # fmt: skip
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
            return await waiter
        finally:
            waiter.cancel()

    async def stop(self) -> None:
        """SIGTERM, SIGKILL after ``stop_timeout_s``; the socket file is removed (once,
        whoever asks)."""
        if self._stopped is None:
            self._stopped = asyncio.ensure_future(self._stop())
        await asyncio.shield(self._stopped)

    async def _stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                async with asyncio.timeout(self.cfg.stop_timeout_s):
                    await proc.wait()
            except TimeoutError:
                log.warning("engine %s did not stop within %gs: killed", self.name,
                            self.cfg.stop_timeout_s)  # fmt: skip
                proc.kill()
                await proc.wait()
        if self._logs is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._logs, 1.0)
        self.state = "stopped"
        if not self.cfg.socket:
            with contextlib.suppress(OSError):
                os.unlink(self.socket)

    def snapshot(self) -> dict[str, object]:
        return {
            "name": self.name,
            "state": self.state,
            "pid": self.pid,
            "restarts": self.restarts,
            "last_exit": self.last_exit,
            "socket": self.socket,
        }


def mock_engine(cfg: MockConfig) -> EngineConfig:
    """The embedded ``mock_ie`` (the no-config default) as a managed engine."""
    argv = [
        sys.executable, "-m", "mocks.mock_ie",
        "--capacity", str(cfg.capacity),
        "--ttft-ms", str(cfg.ttft_ms),
        "--itl-ms", str(cfg.itl_ms),
    ]  # fmt: skip
    for m in cfg.models:
        argv += ["--model", m]
    return EngineConfig(name=MOCK_NAME, command=(*argv, *cfg.extra_args), ready_timeout_s=60.0)


class ManagedEngines:
    """The managed engines of one configuration (and those a reload keeps), with the
    private folder of their sockets (made when first needed, removed at the end)."""

    def __init__(self) -> None:
        self.engines: dict[str, ManagedEngine] = {}
        self._leaving: list[ManagedEngine] = []  # removed by a reload, stopped once idle
        self._folder: Path | None = None
        self._generation = 0

    @property
    def folder(self) -> Path:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="neutrino-"))
        return self._folder

    def resolve(self, engines: tuple[EngineConfig, ...]) -> tuple[EngineConfig, ...]:
        """``engines`` with each managed one's socket filled in: a running process that a
        reload keeps keeps its socket."""
        out = []
        for e in engines:
            if e.managed and not e.socket:
                running = self.engines.get(e.name)
                if running is None:
                    e = replace(e, socket=socket_path(e, self.folder))
                elif running.cfg.same_process(e):
                    e = replace(e, socket=running.socket)
                else:  # its replacement starts beside it: a socket of its own
                    self._generation += 1
                    path = socket_path(e, self.folder).removesuffix(".sock")
                    e = replace(e, socket=f"{path}.{self._generation}.sock")
            out.append(e)
        return tuple(out)

    async def start(self, engines: tuple[EngineConfig, ...]) -> list[ManagedEngine]:
        """Start the managed engines of ``engines`` not already running as configured;
        returns those it started (a failure stops them again and raises StartupError)."""
        started: list[ManagedEngine] = []
        try:
            for e in engines:
                running = self.engines.get(e.name)
                if not e.managed or (running is not None and running.cfg.same_process(e)):
                    continue
                engine = ManagedEngine(e, self.folder)
                await engine.start()
                started.append(engine)
        except BaseException:
            for engine in started:
                await engine.stop()
            raise
        return started

    def adopt(
        self, started: list[ManagedEngine], engines: tuple[EngineConfig, ...]
    ) -> list[ManagedEngine]:
        """Make ``engines`` the configured set: ``started`` join; returns the engines
        that are no longer configured (to stop once their requests have ended)."""
        keep = {e.name for e in engines if e.managed}
        gone = [m for name, m in self.engines.items() if name not in keep]
        gone += [self.engines[m.name] for m in started if m.name in self.engines]
        for m in gone:
            self.engines.pop(m.name, None)
        self._leaving = [m for m in self._leaving if m.state != "stopped"] + gone
        for m in started:
            self.engines[m.name] = m
        return gone

    def watch(self, connected: Callable[[str], bool] | None = None) -> None:
        """How each engine's readiness is known: its pool's connection (by name), or
        without pools (the workers' supervisor) its socket being there: an engine's
        socket appears once it listens."""
        for m in self.engines.values():
            if connected is not None:
                m.connected = functools.partial(connected, m.name)
            else:
                m.connected = functools.partial(os.path.exists, m.socket)

    async def stop(self) -> None:
        await asyncio.gather(*(m.stop() for m in [*self.engines.values(), *self._leaving]))
        self.remove_folder()

    def remove_folder(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def snapshot(self) -> list[dict[str, object]]:
        return [m.snapshot() for m in self.engines.values()]
