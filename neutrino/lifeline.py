"""A child process that dies with the process that started it.

``die_with_parent`` runs in the child between fork and exec (``preexec_fn``) and asks the
kernel for SIGTERM when the parent dies (PR_SET_PDEATHSIG), so an engine that Neutrino or
a node agent started never outlives it, even when it is killed. libc is loaded here, in
the parent: the child may only make the call, not load libraries.
"""

from __future__ import annotations

import ctypes
import signal

try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:  # not glibc: the child is still stopped on a clean exit, just not on a crash
    _LIBC = None
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:  # runs in the child between fork and exec
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
