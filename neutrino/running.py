"""The running event loop, without a system call per lookup.

Python 3.11's ``asyncio.get_running_loop()`` calls ``getpid()`` on every call (to notice
a fork); on the request path that is one system call per future or timer made, which
costs microseconds where system calls are dear (sandboxes, some VMs). The loop found
is kept per thread and used while it runs; a later loop of the same thread (one test
after another) is looked up again.
"""

from __future__ import annotations

import asyncio
import threading


class _Kept(threading.local):
    loop: asyncio.AbstractEventLoop | None = None


_KEPT = _Kept()


def running_loop() -> asyncio.AbstractEventLoop:
    """The event loop running in this thread (RuntimeError when none is)."""
    loop = _KEPT.loop
    if loop is None or not loop.is_running():
        loop = _KEPT.loop = asyncio.get_running_loop()
    return loop
