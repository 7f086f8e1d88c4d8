"""The metrics of workers that died, so that merged counters never go back.

A worker writes its tallies to ``raw-PID.json`` in the supervisor's folder each time it
reports them (before it answers), so the file always holds at least what any scrape has
seen of that worker. When a worker dies the supervisor adds its last file into
``retired.json`` (its counters and histograms: a dead process runs nothing) and removes
the file.
A scrape merges the workers that answered, the files of those that did not (dead, or
stuck) and the retired tallies; it reads the files before ``retired.json``, and
``retired.json`` names the workers it holds, so a worker retired meanwhile counts once.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Collection
from pathlib import Path
from typing import TypedDict

from neutrino.observability.metrics import EVENT_COUNTERS, Raw, merge

RETIRED = "retired.json"
_KEEP_PIDS = 256  # the retired workers named (a scrape needs only the latest few)


class Retired(TypedDict, total=False):
    """``retired.json``: the dead workers' tallies merged, and their pids."""

    raw: Raw
    pids: list[int]


def snapshot_path(folder: str | Path, pid: int) -> Path:
    return Path(folder) / f"raw-{pid}.json"


def write_json(path: Path, data: object) -> None:
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(data))
    os.replace(part, path)  # a reader sees the old file or the new one, never half


def read_json(path: Path) -> object:
    try:
        doc: object = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc


def _read_raw(path: Path) -> Raw | None:
    """A worker's tallies as :func:`write_snapshot` wrote them (None: none readable)."""
    try:
        raw: Raw | None = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return raw


def _read_retired(folder: str | Path) -> Retired:
    """``retired.json`` as :func:`retire` wrote it (empty: none readable)."""
    try:
        kept: Retired | None = json.loads((Path(folder) / RETIRED).read_text())
    except (OSError, ValueError):
        return {}
    return kept or {}


def write_snapshot(folder: str | Path, pid: int, raw: Raw) -> None:
    write_json(snapshot_path(folder, pid), raw)


def without_gauges(raw: Raw) -> Raw:
    """``raw`` as a dead process's: its counters and histograms; of its live values only
    the counters (requests running, rates and the like are a live process's)."""
    counters = {key for _, _, key in EVENT_COUNTERS}
    live = {k: v for k, v in raw.get("live", {}).items() if k in counters}
    engines = {name: {**stats, "connections": 0} for name, stats in raw.get("engines", {}).items()}
    return {**raw, "live": live, "engines": engines}


def retire(folder: str | Path, pid: int) -> None:
    """Add the dead worker ``pid``'s last tallies to the retired ones (the supervisor)."""
    path = snapshot_path(folder, pid)
    last = _read_raw(path)
    if isinstance(last, dict):
        kept = _read_retired(folder)
        raw = merge([kept.get("raw", {}), without_gauges(last)])
        pids = [*kept.get("pids", []), pid][-_KEEP_PIDS:]
        write_json(Path(folder) / RETIRED, {"raw": raw, "pids": pids})
    with contextlib.suppress(OSError):
        path.unlink()


def _pid_of(path: Path) -> int | None:
    digits = path.name.removeprefix("raw-").removesuffix(".json")
    return int(digits) if digits.isdigit() else None


def left_behind(folder: str | Path, answered: Collection[int]) -> list[Raw]:
    """What a scrape adds to the workers that answered (pids ``answered``): the last
    tallies of those that did not, and the retired workers'."""
    files: dict[int, Raw | None] = {}
    for path in Path(folder).glob("raw-*.json"):
        pid = _pid_of(path)
        if pid is not None and pid not in answered:
            files[pid] = _read_raw(path)
    kept = _read_retired(folder)
    retired = set(kept.get("pids", []))
    raws: list[Raw] = [raw for pid, raw in files.items() if pid not in retired and raw]
    if kept.get("raw"):
        raws.append(kept["raw"])
    return raws
