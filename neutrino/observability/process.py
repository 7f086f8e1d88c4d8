"""The process's own figures for ``/neutrino/v1/app_state``: resident memory, open file
descriptors and the event loop's tasks (what a leak shows up in first)."""

from __future__ import annotations

import asyncio
import os
import resource

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """Resident set size now (Linux ``/proc``; the peak from getrusage elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def peak_rss_bytes() -> int:
    """The highest resident size of this process image (``VmHWM``). Not getrusage's
    ru_maxrss: Linux carries that across exec, so a server started by a large parent
    would report the parent's peak as its own."""
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def open_fds() -> int:
    """File descriptors open now (-1 where ``/proc/self/fd`` is not there)."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # the listing's own descriptor
    except OSError:
        return -1


def process_stats() -> dict[str, object]:
    """Memory, descriptors and tasks of this process (called on the event loop)."""
    return {
        "pid": os.getpid(),
        "rss_bytes": rss_bytes(),
        "peak_rss_bytes": peak_rss_bytes(),
        "open_fds": open_fds(),
        "tasks": len(asyncio.all_tasks()),
    }
