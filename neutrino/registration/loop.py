"""The asyncio loop both registrars run: register (retrying with backoff), keep the
registration up (Sombrero's report stream, etcd's lease keep-alive), and when that ends,
back off and register again; a bug stops registration, never the server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from neutrino.registration.state import Registration, emit

log = logging.getLogger("neutrino.registration")

# Registers once; raises on failure (an expected error class is described by ``describe``).
Register = Callable[[], Awaitable[None]]
# Keeps the registration up until it ends; returns why, and the exception of a bug.
Keep = Callable[[], Awaitable[tuple[str, BaseException | None]]]
E = TypeVar("E", bound=BaseException)  # the errors a registration expects (a down server)


async def keep_registered(
    name: str,
    state: Registration,
    register: Register,
    keep: Keep,
    expected: tuple[type[E], ...],
    describe: Callable[[E], str],
) -> None:
    try:
        while True:
            await _register(name, state, register, expected, describe)
            reason, unexpected = await keep()
            delay, note = state.failed(reason)
            emit(log, name, note, unexpected)
            await asyncio.sleep(delay)
    except asyncio.CancelledError:
        raise
    except Exception:  # a bug; registration stops, the server goes on
        log.exception("%s: registration stopped", name)


async def _register(
    name: str,
    state: Registration,
    register: Register,
    expected: tuple[type[E], ...],
    describe: Callable[[E], str],
) -> None:
    """Register, retrying with the state's backoff until it succeeds."""
    while True:
        state.registering()
        unexpected: BaseException | None = None
        try:
            await register()
        except expected as e:
            error = describe(e)
        except Exception as e:  # the source failed (the app's bug): its traceback once
            error, unexpected = f"{type(e).__name__}: {e}", e
        else:
            emit(log, name, state.succeeded())
            return
        delay, note = state.failed(error)
        emit(log, name, note, unexpected)
        await asyncio.sleep(delay)


HALT_TIMEOUT_S = 5.0  # how long a stop waits for the cancelled loop to end


async def halt(name: str, task: asyncio.Task[None] | None) -> None:
    """Cancel the registration loop ``task`` and wait for it to end, at most
    ``HALT_TIMEOUT_S`` (a call the cancel does not reach cannot hold a stop)."""
    if task is None or task.done():
        return
    task.cancel()
    await asyncio.wait({task}, timeout=HALT_TIMEOUT_S)
    if not task.done():
        log.warning("%s: the registration loop did not end within %.0f s of its cancel", name,
                    HALT_TIMEOUT_S)  # fmt: skip
