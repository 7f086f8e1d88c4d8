"""What the control plane knows of each node, sans-IO: fed by the results of its polls
(discovery, health, models), read by placement and by the routes and metrics.

A node is up from its first answered poll; ``down_after`` failed polls in a row (or one
failed call the plane makes on a request's behalf, which counts as all of them) mark it
down; it is up again at its next answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LIVE_STATES = ("loading", "loaded")
_HOST_KEYS = ("hostname", "os", "kernel", "cpu_model", "cpu_cores", "memory_total_mb")
_MODEL_KEYS = ("id", "harness", "state", "reason", "devices", "memory_used_mb", "vram_used_mb")


@dataclass(slots=True)
class NodeState:
    name: str
    endpoint: str
    token: str = field(default="", repr=False)
    up: bool = False
    failures: int = 0  # polls in a row that failed
    changed_at: float = 0.0  # when it went up or down (monotonic)
    polled_at: float = 0.0
    error: str = ""  # why its last poll failed
    downs: int = 0  # times it was marked down
    discovery: dict[str, Any] = field(default_factory=dict)
    health: dict[str, Any] = field(default_factory=dict)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)  # the agent's /models

    # ------------------------------------------------------------------ reads

    def harness_ready(self, harness: str) -> bool:
        return any(
            h.get("name") == harness and h.get("available")
            for h in self.discovery.get("harnesses", ())
        )

    def budget_free_mb(self) -> int:
        return int(self.health.get("memory", {}).get("budget_free_mb", 0))

    def device_totals_mb(self) -> dict[int, int]:
        return {int(d["index"]): int(d["vram_total_mb"]) for d in self.discovery.get("devices", ())}

    def devices_free_mb(self) -> dict[int, int]:
        return {int(d["index"]): int(d["vram_free_mb"]) for d in self.health.get("devices", ())}

    def live(self) -> dict[str, dict[str, Any]]:
        """Its models loading or loaded."""
        return {m: e for m, e in self.models.items() if e.get("state") in LIVE_STATES}

    def loaded(self, model: str) -> bool:
        return self.models.get(model, {}).get("state") == "loaded"

    def holds_mb(self, model: str) -> int:
        """Host memory ``model`` counts against this node's budget (declared, or measured
        when more)."""
        e = self.models.get(model, {})
        return max(int(e.get("memory_mb", 0)), int(e.get("memory_used_mb", 0)))

    def holds_vram_mb(self, model: str) -> dict[int, int]:
        """GPU memory ``model`` holds per device (declared share, or measured when more)."""
        e = self.models.get(model, {})
        devices = [int(d) for d in e.get("devices", ())]
        share = int(e.get("vram_mb", 0)) // max(1, len(devices))
        used = {int(d): int(mb) for d, mb in e.get("vram_used_mb", {}).items()}
        return {d: max(share, used.get(d, 0)) for d in devices}

    def snapshot(self) -> dict[str, object]:
        d, h = self.discovery, self.health
        return {
            "name": self.name,
            "endpoint": self.endpoint,
            "up": self.up,
            "error": self.error,
            "downs": self.downs,
            "host": {k: d.get(k) for k in _HOST_KEYS},
            "driver_version": d.get("driver_version", ""),
            "cuda_version": d.get("cuda_version", ""),
            "devices": _devices(d, h),
            "memory": h.get("memory", {}),
            "load": h.get("load", []),
            "uptime_s": h.get("uptime_s"),
            "harnesses": [x["name"] for x in d.get("harnesses", ()) if x.get("available")],
            "models": [{k: e.get(k) for k in _MODEL_KEYS} for e in self.models.values()],
        }


def _devices(discovery: dict[str, Any], health: dict[str, Any]) -> list[dict[str, Any]]:
    now = {int(x["index"]): x for x in health.get("devices", ())}
    return [{**d, **now.get(int(d["index"]), {})} for d in discovery.get("devices", ())]


class Topology:
    def __init__(self) -> None:
        self.nodes: dict[str, NodeState] = {}

    def add(self, name: str, endpoint: str, token: str) -> NodeState:
        node = self.nodes.get(name)
        if node is None or node.endpoint != endpoint or node.token != token:
            node = self.nodes[name] = NodeState(name, endpoint, token)
        return node

    def up(self) -> list[NodeState]:
        return [n for n in self.nodes.values() if n.up]

    def answered(
        self,
        name: str,
        now: float,
        health: dict[str, Any],
        models: list[dict[str, Any]],
        discovery: dict[str, Any] | None = None,
    ) -> bool:
        """A poll answered; True when the node came up with it."""
        node = self.nodes[name]
        if discovery is not None:
            node.discovery = discovery
        node.health = health
        node.models = {str(m["id"]): m for m in models}
        node.failures, node.error, node.polled_at = 0, "", now
        if node.up:
            return False
        node.up, node.changed_at = True, now
        return True

    def failed(self, name: str, now: float, error: str, down_after: int) -> bool:
        """A poll (or a call) failed; True when it marks the node down."""
        node = self.nodes[name]
        node.failures += 1
        node.error = error
        if not node.up or node.failures < down_after:
            return False
        node.up, node.changed_at = False, now
        node.downs += 1
        node.models = {}
        node.health = {}
        return True
