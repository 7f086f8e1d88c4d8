"""Starts and supervises the embedded ``mock_ie`` engine (the no-config default)."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from neutrino.config import MockConfig
from neutrino.errors import StartupError, os_reason

log = logging.getLogger("neutrino.supervisor")


try:  # loaded here, in the parent: the child may only make the call, not load libraries
    _LIBC: ctypes.CDLL | None = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:  # not glibc: the child is still stopped by stop(), just not on a crash
    _LIBC = None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class MockSupervisor:
    def __init__(self, cfg: MockConfig) -> None:
        self.cfg = cfg
        self._dir = Path(tempfile.mkdtemp(prefix="neutrino-"))
        self.socket = str(self._dir / "mock_ie.sock")
        self._proc: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.restarts = 0

    def _argv(self) -> list[str]:
        cfg = self.cfg
        argv = [
            sys.executable,
            "-m",
            "mocks.mock_ie",
            "--socket",
            self.socket,
            "--capacity",
            str(cfg.capacity),
            "--ttft-ms",
            str(cfg.ttft_ms),
            "--itl-ms",
            str(cfg.itl_ms),
        ]
        for m in cfg.models:
            argv += ["--model", m]
        return argv + list(cfg.extra_args)

    async def start(self) -> None:
        try:
            await self._spawn()
        except OSError as exc:
            raise StartupError(
                f"cannot start the embedded mock_ie ({sys.executable} -m mocks.mock_ie): "
                f"{os_reason(exc)} (configure [[engines]] or --engine, or [mock] enabled = false)"
            ) from exc
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def _spawn(self) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            *self._argv(), preexec_fn=_die_with_parent
        )
        log.info("started embedded mock_ie (pid %d) on %s", self._proc.pid, self.socket)

    async def _watch(self) -> None:
        backoff = 0.1
        while not self._stopping:
            proc = self._proc
            assert proc is not None
            code = await proc.wait()
            if self._stopping:
                return
            log.warning("embedded mock_ie exited with %s; restarting", code)
            self.restarts += 1
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
            await self._spawn()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        proc = self._proc
        if proc is not None and proc.returncode is None:
            proc.terminate()
            try:
                async with asyncio.timeout(5):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
        self.remove_folder()

    def remove_folder(self) -> None:
        """Remove the private folder (the socket's); stop() does, as does a failed start-up
        that never ran the child."""
        shutil.rmtree(self._dir, ignore_errors=True)
