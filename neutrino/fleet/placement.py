"""Where a catalogued model goes, sans-IO.

- ``fit``: whether a node holds the model now, beside what it holds and what is being
  loaded on it (``reserved``): host memory within the node's budget for a CPU model;
  ``min_devices`` GPUs of at least ``min_device_vram_mb`` each with its share of
  ``vram_mb`` free for a GPU model (the devices with the most free memory are chosen).
- ``choose``: among the nodes up that run its harness and do not hold it, those it
  fits, a node it is pinned on first, then the one left with the most room.
- ``evict``: when it fits nowhere, the least recently used models that may go (neither
  pinned there nor busy: ``movable``) on a node where it then fits; of every node's
  plan, the one whose most recently used victim was used longest ago.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from neutrino.config import CatalogueEntry
from neutrino.fleet.topology import NodeState


@dataclass(frozen=True, slots=True)
class Spot:
    node: str
    devices: tuple[int, ...] = ()
    room: int = 0  # MB left after it (CPU: of the budget; GPU: on its devices)


@dataclass(frozen=True, slots=True)
class Plan:
    """Evict ``victims`` (least recently used first) on ``spot.node``, then load there."""

    spot: Spot
    victims: tuple[str, ...]
    newest_use: float  # the most recent use among the victims


def fit(
    entry: CatalogueEntry,
    node: NodeState,
    reserved_mb: int = 0,
    freed_mb: int = 0,
    freed_vram: Mapping[int, int] | None = None,
) -> Spot | None:
    """Where on ``node`` the model fits now (None: it does not)."""
    if not entry.gpu:
        room = node.budget_free_mb() - reserved_mb + freed_mb - entry.memory_mb
        return Spot(node.name, (), room) if room >= 0 else None
    totals = node.device_totals_mb()
    free = node.devices_free_mb()
    freed_vram = freed_vram or {}
    usable = {
        d: free.get(d, 0) + freed_vram.get(d, 0)
        for d, total in totals.items()
        if total >= entry.min_device_vram_mb
    }
    if len(usable) < entry.min_devices:
        return None
    share = -(-entry.vram_mb // entry.min_devices)
    best = sorted(usable, key=lambda d: (-usable[d], d))[: entry.min_devices]
    if any(usable[d] < share for d in best):
        return None
    return Spot(node.name, tuple(sorted(best)), sum(usable[d] - share for d in best))


def _eligible(
    entry: CatalogueEntry, nodes: Iterable[NodeState], exclude: set[str], holding: set[str]
) -> list[NodeState]:
    skip = exclude | holding
    return [n for n in nodes if n.up and n.name not in skip and n.harness_ready(entry.harness)]


def choose(
    entry: CatalogueEntry,
    nodes: Iterable[NodeState],
    exclude: set[str],
    holding: set[str],
    reserved: Mapping[str, int],
) -> Spot | None:
    """The node to load ``entry`` on now, or None when it fits on none."""
    spots = [
        spot
        for n in _eligible(entry, nodes, exclude, holding)
        if (spot := fit(entry, n, reserved.get(n.name, 0))) is not None
    ]
    if not spots:
        return None
    pinned = set(entry.pinned_on)
    return max(spots, key=lambda s: (s.node in pinned, s.room, s.node))


def evict(
    entry: CatalogueEntry,
    nodes: Iterable[NodeState],
    exclude: set[str],
    holding: set[str],
    reserved: Mapping[str, int],
    movable: Callable[[str, str], bool],
    last_used: Callable[[str, str], float],
) -> Plan | None:
    """The evictions that make room for ``entry`` with the least recently used models,
    or None when no node can be made to hold it."""
    plans: list[Plan] = []
    for node in _eligible(entry, nodes, exclude, holding):
        victims = sorted(
            (m for m in node.live() if movable(node.name, m)),
            key=lambda m, n=node.name: last_used(n, m),  # type: ignore[misc]
        )
        freed, freed_vram, taken = 0, dict[int, int](), []
        for victim in victims:
            taken.append(victim)
            freed += node.holds_mb(victim)
            for d, mb in node.holds_vram_mb(victim).items():
                freed_vram[d] = freed_vram.get(d, 0) + mb
            spot = fit(entry, node, reserved.get(node.name, 0), freed, freed_vram)
            if spot is not None:
                plans.append(Plan(spot, tuple(taken), last_used(node.name, victim)))
                break
    if not plans:
        return None
    return min(plans, key=lambda p: (p.newest_use, len(p.victims), p.spot.node))
