"""What a host is and how it is doing, read from ``/proc`` (Linux): its facts for
``GET /discovery``, its memory and load for ``GET /health``, and the memory a process
tree really uses (an engine's resident set, with every process it started).

The parsers take the files' text and return values (tested on text); the readers are
the few lines that open the files.
"""

from __future__ import annotations

import contextlib
import os
import platform
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc")
MB = 1 << 20


def meminfo(text: str) -> dict[str, int]:
    """``/proc/meminfo`` as bytes per field (``MemTotal``, ``MemAvailable``...)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) * (1024 if parts[1:2] == ["kB"] else 1)
    return out


def cpu_model(text: str) -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (x86 ``model name``; Arm ``Model``...)."""
    for key in ("model name", "Model", "Hardware", "cpu model"):
        for line in text.splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() == key and value.strip():
                return value.strip()
    return platform.processor() or platform.machine()


def os_name(text: str) -> str:
    """``PRETTY_NAME`` of ``/etc/os-release`` (else the system's name)."""
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key == "PRETTY_NAME":
            return value.strip().strip('"')
    return platform.system()


def _read(path: Path | str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


@dataclass(frozen=True, slots=True)
class HostFacts:
    hostname: str
    os: str
    kernel: str
    cpu_model: str
    cpu_cores: int  # the cores this agent may use (its affinity)
    memory_total_bytes: int

    def to_dict(self) -> dict[str, object]:
        return {
            "hostname": self.hostname,
            "os": self.os,
            "kernel": self.kernel,
            "cpu_model": self.cpu_model,
            "cpu_cores": self.cpu_cores,
            "memory_total_mb": self.memory_total_bytes // MB,
        }


def host_facts() -> HostFacts:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return HostFacts(
        hostname=socket.gethostname(),
        os=os_name(_read("/etc/os-release")),
        kernel=platform.release(),
        cpu_model=cpu_model(_read(_PROC / "cpuinfo")),
        cpu_cores=cores,
        memory_total_bytes=meminfo(_read(_PROC / "meminfo")).get("MemTotal", 0),
    )


def host_memory() -> tuple[int, int]:
    """Host memory (used, free) in bytes; free is what can be had without swapping
    (``MemAvailable``)."""
    info = meminfo(_read(_PROC / "meminfo"))
    total = info.get("MemTotal", 0)
    free = info.get("MemAvailable", info.get("MemFree", 0))
    return total - free, free


def load_average() -> tuple[float, float, float]:
    with contextlib.suppress(OSError):
        return os.getloadavg()
    return (0.0, 0.0, 0.0)


def parents(stats: Iterable[tuple[int, str]]) -> dict[int, int]:
    """pid -> parent pid, from ``(pid, /proc/PID/stat text)`` pairs (the command name, in
    parentheses, may hold spaces and parentheses: the fields follow its last ``)``)."""
    out: dict[int, int] = {}
    for pid, text in stats:
        fields = text.rpartition(")")[2].split()
        if len(fields) >= 2 and fields[1].isdigit():
            out[pid] = int(fields[1])
    return out


def descendants(root: int, parent_of: dict[int, int]) -> set[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parent_of.items():
        children.setdefault(ppid, []).append(pid)
    tree, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in tree:
                tree.add(child)
                todo.append(child)
    return tree


def resident_bytes(status: str) -> int:
    """``VmRSS`` of a ``/proc/PID/status`` text, in bytes (0 for a zombie)."""
    return meminfo(status).get("VmRSS", 0)


def _all_stats() -> Iterable[tuple[int, str]]:
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            text = _read(entry / "stat")
            if text:
                yield int(entry.name), text


def process_trees(roots: Iterable[int]) -> dict[int, set[int]]:
    """Each root's process tree (one scan of ``/proc`` for all of them)."""
    roots = list(roots)
    if not roots:
        return {}
    parent_of = parents(_all_stats())
    return {root: descendants(root, parent_of) for root in roots}


def tree_resident_bytes(tree: Iterable[int]) -> int:
    return sum(resident_bytes(_read(_PROC / str(pid) / "status")) for pid in tree)
