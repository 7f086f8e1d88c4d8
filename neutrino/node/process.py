"""One engine process of a node agent: started in a process group of its own that dies
with the agent, its output forwarded to the agent's log (the last lines kept, to say why
it failed), ready once its readiness check passes, stopped with SIGTERM and then SIGKILL
to the whole group."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence

from neutrino.lifeline import die_with_parent

log = logging.getLogger("neutrino.node")

_LINE_LIMIT = 64 * 1024
_TAIL_LINES = 20
_READY_POLL_S = 0.1

Ready = Callable[[], Awaitable[bool]]


class LoadFailed(Exception):
    """The engine could not be started or never became ready (the reason, one line)."""


class EngineProcess:
    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        on_exit: Callable[[EngineProcess], None] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.env = dict(env)
        self.tail: deque[str] = deque(maxlen=_TAIL_LINES)
        self._on_exit = on_exit
        self._proc: asyncio.subprocess.Process | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.stopping = False

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc is not None else None

    def why(self) -> str:
        """Its exit and the last line it printed."""
        last = next((line for line in reversed(self.tail) if line.strip()), "")
        code = self.returncode
        ended = f"exited with status {code}" if code is not None else "did not become ready"
        return f"the engine {ended}" + (f": {last[:300]}" if last else "")

    async def start(self) -> None:
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env={**os.environ, **self.env},
                preexec_fn=die_with_parent,
                start_new_session=True,  # its group: a stop reaches what it started too
                limit=_LINE_LIMIT,
            )
        except OSError as exc:
            raise LoadFailed(f"cannot run {self.argv[0]!r}: {exc.strerror or exc}") from None
        log.info("engine %s started (pid %d): %s", self.name, self._proc.pid, " ".join(self.argv))
        loop = asyncio.get_running_loop()
        assert self._proc.stdout is not None
        self._tasks = [
            loop.create_task(self._forward(self._proc.stdout, self._proc.pid)),
            loop.create_task(self._watch(self._proc)),
        ]

    async def _forward(self, out: asyncio.StreamReader, pid: int) -> None:
        while True:
            try:
                line = await out.readline()
            except ValueError:  # longer than the limit: its start
                line = await out.read(_LINE_LIMIT)
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip()
            if text:
                self.tail.append(text)
                log.info("[%s %d] %s", self.name, pid, text)

    async def _watch(self, proc: asyncio.subprocess.Process) -> None:
        code = await proc.wait()
        if not self.stopping:
            await asyncio.sleep(0.05)  # its last lines first
            log.warning("engine %s (pid %d) exited with status %s", self.name, proc.pid, code)
            if self._on_exit is not None:
                self._on_exit(self)

    async def wait_ready(self, ready: Ready, timeout_s: float) -> None:
        """Return once ``ready()`` holds; LoadFailed if the process ends first or the time
        runs out."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            if self.returncode is not None or self._proc is None:
                raise LoadFailed(self.why())
            if await ready():
                return
            if loop.time() > deadline:
                raise LoadFailed(f"the engine was not ready within {timeout_s:g} s")
            await asyncio.sleep(_READY_POLL_S)

    async def stop(self, timeout_s: float) -> None:
        """SIGTERM to its group, SIGKILL after ``timeout_s``; returns once it has exited."""
        self.stopping = True
        proc = self._proc
        if proc is not None and proc.returncode is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                async with asyncio.timeout(timeout_s):
                    await proc.wait()
            except TimeoutError:
                log.warning("engine %s did not stop within %g s: killed", self.name, timeout_s)
                _signal_group(proc.pid, signal.SIGKILL)
                await proc.wait()
        if proc is not None:
            _signal_group(proc.pid, signal.SIGKILL)  # what it left behind in its group
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the process group that ``pid`` leads (its own: ``start_new_session``)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
