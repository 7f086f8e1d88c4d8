"""The node agent's models: what each is (loading, loaded, failed and why, unloaded),
what it really takes, and the rules of its loads and unloads.

A load is refused when it does not fit: the host memory it declares (``memory_mb``) on
top of what the loaded and loading models take (each the larger of what it declared and
what its engine's processes hold now) past the node's memory budget; GPU memory
(``vram_mb``, split over its devices) past what its devices have free. One model id is
loaded once on a node (its replicas live on other nodes). An engine that dies leaves
its model failed, with the reason. The table keeps the last ``KEPT`` ended entries.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from dataclasses import dataclass, field, replace

from neutrino.node import hostinfo
from neutrino.node.gpu import Gpus
from neutrino.node.harness import Harness, LoadSpec
from neutrino.node.process import EngineProcess, LoadFailed

log = logging.getLogger("neutrino.node")

MB = 1 << 20
KEPT = 256  # ended (failed, unloaded) entries remembered


class NodeError(Exception):
    """A call the agent refuses: an HTTP status, an error type and a message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message


class ModelState(enum.Enum):
    LOADING = "loading"
    LOADED = "loaded"
    FAILED = "failed"
    UNLOADED = "unloaded"


@dataclass(slots=True)
class Entry:
    spec: LoadSpec
    state: ModelState = ModelState.LOADING
    reason: str = ""
    since: float = field(default_factory=time.time)
    task: asyncio.Task[None] | None = None
    settled: asyncio.Event = field(default_factory=asyncio.Event)  # no longer loading
    rss_bytes: int = 0  # measured: its engine's processes
    vram_bytes: dict[int, int] = field(default_factory=dict)  # measured, per device
    pid: int | None = None

    @property
    def live(self) -> bool:
        return self.state in (ModelState.LOADING, ModelState.LOADED)

    def held_bytes(self) -> int:
        """What it counts against the budget: its declared memory or, when more, its
        measured memory."""
        return max(self.spec.memory_mb * MB, self.rss_bytes)

    def to_dict(self) -> dict[str, object]:
        spec = self.spec
        return {
            "id": spec.model,
            "harness": spec.harness,
            "file": spec.file.name,
            "quant": spec.quant,
            "tensor_parallel": spec.tensor_parallel,
            "devices": list(spec.devices),
            "state": self.state.value,
            "reason": self.reason,
            "since": self.since,
            "pid": self.pid,
            "memory_mb": spec.memory_mb,
            "vram_mb": spec.vram_mb,
            "memory_used_mb": self.rss_bytes // MB,
            "vram_used_mb": {str(d): b // MB for d, b in sorted(self.vram_bytes.items())},
        }


class ModelTable:
    def __init__(self, harnesses: dict[str, Harness], gpus: Gpus | None, budget_bytes: int) -> None:
        self.harnesses = harnesses
        self.gpus = gpus
        self.budget_bytes = budget_bytes
        self.entries: dict[str, Entry] = {}

    # ------------------------------------------------------------------ accounting

    def held_bytes(self) -> int:
        return sum(e.held_bytes() for e in self.entries.values() if e.live)

    def _vram_held(self) -> dict[int, int]:
        """Per device: GPU memory the loading models declared and do not hold yet."""
        held: dict[int, int] = {}
        for e in self.entries.values():
            if e.state is ModelState.LOADING and e.spec.vram_mb and e.spec.devices:
                share = e.spec.vram_mb * MB // len(e.spec.devices)
                for d in e.spec.devices:
                    held[d] = held.get(d, 0) + max(0, share - e.vram_bytes.get(d, 0))
        return held

    def live_pids(self) -> dict[str, int]:
        return {m: e.pid for m, e in self.entries.items() if e.live and e.pid is not None}

    def measured(self, usage: dict[str, tuple[int, dict[int, int]]]) -> None:
        """Take what :func:`read_usage` read (the models still there)."""
        for model, (rss, vram) in usage.items():
            entry = self.entries.get(model)
            if entry is not None and entry.live:
                entry.rss_bytes, entry.vram_bytes = rss, vram

    # ------------------------------------------------------------------ loads

    def _fits(self, spec: LoadSpec) -> LoadSpec:
        """``spec`` with its devices chosen, if it fits now; else NodeError 409."""
        need = spec.memory_mb * MB
        held = self.held_bytes()
        if held + need > self.budget_bytes:
            raise NodeError(
                409, "insufficient_memory",
                f"{spec.model!r} needs {spec.memory_mb} MB; {held // MB} MB of this node's "
                f"{self.budget_bytes // MB} MB budget are taken",
            )  # fmt: skip
        if not spec.vram_mb:
            if spec.devices:
                raise NodeError(400, "invalid_request", "devices are given without vram_mb")
            return spec
        return self._placed_on_devices(spec)

    def _placed_on_devices(self, spec: LoadSpec) -> LoadSpec:
        gpus = self.gpus
        if gpus is None or not len(gpus):
            raise NodeError(409, "no_gpu", f"{spec.model!r} needs GPU memory; this node has none")
        held = self._vram_held()
        free = {h.index: h.memory_free_bytes - held.get(h.index, 0) for h in gpus.health()}
        devices = spec.devices or tuple(
            sorted(sorted(free, key=lambda d: -free[d])[: spec.tensor_parallel])
        )
        if len(devices) < spec.tensor_parallel or any(d not in free for d in devices):
            raise NodeError(
                409, "no_gpu", f"{spec.model!r} needs {spec.tensor_parallel} devices; "
                f"this node has {len(free)}",
            )  # fmt: skip
        share = spec.vram_mb * MB // len(devices)
        short = [d for d in devices if free[d] < share]
        if short:
            raise NodeError(
                409, "insufficient_vram",
                f"{spec.model!r} needs {share // MB} MB on each of its devices; device "
                f"{short[0]} has {max(0, free[short[0]]) // MB} MB free",
            )  # fmt: skip
        return replace(spec, devices=devices)

    def load(self, spec: LoadSpec) -> Entry:
        """Begin loading ``spec`` (or find it loading or loaded as asked); NodeError if
        it cannot be."""
        harness = self.harnesses.get(spec.harness)
        if harness is None:
            raise NodeError(
                400, "invalid_request",
                f"no harness {spec.harness!r} (known: {', '.join(self.harnesses)})",
            )  # fmt: skip
        missing = harness.missing()
        if missing:
            raise NodeError(409, "harness_unavailable", f"{spec.harness}: {missing}")
        entry = self.entries.get(spec.model)
        if entry is not None and entry.live:
            if (entry.spec.harness, entry.spec.file) != (spec.harness, spec.file):
                raise NodeError(
                    409, "conflict",
                    f"{spec.model!r} is {entry.state.value} here from another harness or "
                    "file: unload it first",
                )  # fmt: skip
            return entry
        entry = Entry(self._fits(spec))
        self.entries.pop(spec.model, None)
        self.entries[spec.model] = entry
        entry.task = asyncio.get_running_loop().create_task(
            self._run(harness, entry), name=f"load-{spec.model}"
        )
        self._forget_old()
        return entry

    async def _run(self, harness: Harness, entry: Entry) -> None:
        spec = entry.spec
        start = time.monotonic()
        try:
            running = await harness.load(spec, lambda p: self._died(entry, p))
        except LoadFailed as exc:
            entry.state, entry.reason = ModelState.FAILED, str(exc)
            log.warning("model %s failed to load: %s", spec.model, exc)
        except asyncio.CancelledError:
            entry.state = ModelState.UNLOADED
            raise
        except Exception as exc:  # a bug: the model fails, the agent goes on
            log.exception("loading %s failed", spec.model)
            entry.state, entry.reason = ModelState.FAILED, f"{type(exc).__name__}: {exc}"
        else:
            entry.state, entry.pid = ModelState.LOADED, running.process.pid
            log.info("model %s loaded by %s in %.2f s", spec.model, spec.harness,
                     time.monotonic() - start)  # fmt: skip
        finally:
            entry.since = time.time()
            entry.settled.set()

    def _died(self, entry: Entry, process: EngineProcess) -> None:
        """An engine exited on its own (a load's failure is told by its load instead)."""
        if entry.state is ModelState.LOADED and self.entries.get(entry.spec.model) is entry:
            entry.state, entry.reason = ModelState.FAILED, process.why()
            entry.since, entry.pid = time.time(), None
            self.harnesses[entry.spec.harness].running.pop(entry.spec.model, None)

    async def unload(self, model: str) -> Entry:
        entry = self.entries.get(model)
        if entry is None:
            raise NodeError(404, "not_found", f"no model {model!r} on this node")
        if entry.state is ModelState.LOADING and entry.task is not None:
            entry.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await entry.task
        elif entry.state is ModelState.LOADED:
            await self.harnesses[entry.spec.harness].unload(model)
        if entry.state is not ModelState.FAILED:
            entry.state = ModelState.UNLOADED
        entry.since, entry.pid, entry.rss_bytes, entry.vram_bytes = time.time(), None, 0, {}
        log.info("model %s unloaded", model)
        return entry

    def _forget_old(self) -> None:
        ended = [m for m, e in self.entries.items() if not e.live]
        for model in ended[: max(0, len(ended) - KEPT)]:
            del self.entries[model]

    async def close(self) -> None:
        """Stop every engine (the agent is stopping)."""
        for entry in self.entries.values():
            if entry.task is not None and not entry.task.done():
                entry.task.cancel()
        await asyncio.gather(
            *(e.task for e in self.entries.values() if e.task is not None),
            return_exceptions=True,
        )
        await asyncio.gather(*(h.stop() for h in self.harnesses.values()))


def read_usage(pids: dict[str, int], gpus: Gpus | None) -> dict[str, tuple[int, dict[int, int]]]:
    """What each model's engine process tree holds: resident host memory, and GPU memory
    per device (blocking: /proc and NVML; run it off the event loop)."""
    trees = hostinfo.process_trees(pids.values())
    out: dict[str, tuple[int, dict[int, int]]] = {}
    for model, pid in pids.items():
        tree = trees.get(pid, {pid})
        vram = gpus.process_memory(tree) if gpus is not None else {}
        out[model] = (hostinfo.tree_resident_bytes(tree), vram)
    return out
