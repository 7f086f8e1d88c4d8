"""Which replica answers a request (sans-IO): a model's routing policy over the engines
that serve it, and the self-check that watches what the policy decided.

Policies (``[routing] policy``, or per model):

- ``round_robin``: each replica in turn;
- ``least_outstanding``: the replica with the fewest requests in flight for its capacity;
- ``power_of_two``: the less loaded of two replicas drawn at random;
- ``prefix`` (the default): consistent hashing with bounded loads on the prompt's prefix.
  The prompt's token ids are keyed at block boundaries (1, 2, 4, 8 ... ``block_tokens``
  blocks, up to ``prefix_tokens`` ids); the replica that last took the longest key the
  request shares with an earlier one takes it (it holds that prefix's KV cache), unless
  it is over ``balance_factor`` times the mean load; a prefix never seen goes to the
  replica at its first block's place on a hash ring, or the next one on the ring under
  the bound. Keys are remembered in least-recently-used order, at most ``max_prefixes``.

Load is requests in flight for the replica's capacity: Neutrino's own, or what the
engine reports in its pongs when that is more (an engine shared by several front ends).
The self-check counts each model's last ``self_check_window`` decisions: when one replica
took a share far above its fair one while it is loaded and another replica is idle, the
model is routed by power of two choices for ``self_check_cooldown_s`` (a fallback:
logged, counted, shown).
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import math
import random
import time
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from neutrino.config.routing import RoutingConfig

log = logging.getLogger("neutrino.engine")

RING_POINTS = 64  # places of each replica on the ring


class Replica(Protocol):
    name: str

    @property
    def inflight(self) -> int: ...

    @property
    def capacity(self) -> int: ...

    @property
    def reported(self) -> int:
        """What the engine says it holds, from every client (0: not said)."""
        ...


R = TypeVar("R", bound=Replica)


def busy(r: Replica) -> int:
    """Requests on ``r``: ours in flight, or what its engine reports when more (other
    front ends share it)."""
    ours, theirs = r.inflight, r.reported
    return ours if ours >= theirs else theirs


def load(r: Replica) -> float:
    return busy(r) / max(1, r.capacity)


def prefix_keys(prompt: Sequence[int], block: int, most: int) -> list[int]:
    """Keys of the prompt's first 1, 2, 4 ... blocks of ``block`` ids (up to ``most``
    ids), each covering all the ids before it: equal keys, equal prefixes (a hash that
    is the same in every process, so that workers route alike)."""
    keys: list[int] = []
    h = 0
    start, end = 0, block
    limit = min(len(prompt), most)
    while end <= limit:
        h = hash((h, tuple(prompt[start:end])))
        keys.append(h)
        start, end = end, end * 2
    return keys


def _ring_place(name: str, i: int) -> int:
    digest = hashlib.blake2b(f"{name}#{i}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


class _Ring:
    """The hash ring of a set of replicas (built again when the set changes)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        points = sorted((_ring_place(n, i), n) for n in names for i in range(RING_POINTS))
        self.names = names
        self._places = [p for p, _ in points]
        self._owners = [n for _, n in points]

    def walk(self, key: int) -> list[str]:
        """The replicas in ring order from ``key``'s place, each once."""
        start = bisect.bisect(self._places, (key & ((1 << 63) - 1)))
        order: list[str] = []
        owners = self._owners
        for i in range(len(owners)):
            name = owners[(start + i) % len(owners)]
            if name not in order:
                order.append(name)
                if len(order) == len(self.names):
                    break
        return order


@dataclass(slots=True)
class ModelRouting:
    """One model's routing: its decisions, its prefix hits, its fallback."""

    policy: str
    turn: int = 0  # round robin's next
    hits: int = 0  # prefix: requests that went where their prefix was
    misses: int = 0
    window: deque[str] = field(default_factory=deque)  # last decisions, oldest first
    shares: dict[str, int] = field(default_factory=dict)  # per replica, in the window
    fallback_until: float = 0.0  # routed by power of two choices until then (monotonic)
    fallbacks: int = 0
    picks: dict[str, int] = field(default_factory=dict)  # per replica, since the start

    def counts(self) -> dict[str, object]:
        return {
            "prefix_hits": self.hits,
            "prefix_misses": self.misses,
            "fallbacks": self.fallbacks,
            "picks": dict(self.picks),
        }

    def snapshot(self, now: float) -> dict[str, object]:
        total = max(1, len(self.window))
        return {
            "policy": self.policy,
            "fallback": self.fallback_until > now,
            "fallbacks": self.fallbacks,
            "prefix_hits": self.hits,
            "prefix_misses": self.misses,
            "shares": {n: round(c / total, 3) for n, c in sorted(self.shares.items())},
        }


class Routing:
    """Every model's routing (one per router)."""

    def __init__(self, cfg: RoutingConfig, rng: random.Random | None = None) -> None:
        self.cfg = cfg
        self._rng = rng or random.Random()
        self.models: dict[str, ModelRouting] = {}
        self._prefixes: OrderedDict[tuple[str, int], str] = OrderedDict()
        self._rings: dict[tuple[str, ...], _Ring] = {}

    def choose(self, model: str, replicas: Sequence[R], prompt: Sequence[int]) -> R:
        """The replica for a request of ``model`` (``replicas``: two or more)."""
        state = self.models.get(model)
        if state is None:
            state = self.models[model] = ModelRouting(self.cfg.policy_of(model))
        policy = state.policy
        if state.fallback_until and state.fallback_until > time.monotonic():
            policy = "power_of_two"
        if policy == "prefix":
            chosen = self._prefix(model, state, replicas, prompt)
        elif policy == "round_robin":
            chosen = replicas[state.turn % len(replicas)]
            state.turn += 1
        elif policy == "least_outstanding":
            chosen = min(replicas, key=load)
        else:
            chosen = self._two(replicas)
        self._count(model, state, chosen, replicas)
        return chosen

    def _two(self, replicas: Sequence[R]) -> R:
        a, b = self._rng.sample(range(len(replicas)), 2)
        ra, rb = replicas[a], replicas[b]
        return ra if load(ra) <= load(rb) else rb

    # ------------------------------------------------------------------ prefix

    def _prefix(
        self, model: str, state: ModelRouting, replicas: Sequence[R], prompt: Sequence[int]
    ) -> R:
        cfg = self.cfg
        keys = prefix_keys(prompt, cfg.block_tokens, cfg.prefix_tokens)
        if not keys:
            return self._two(replicas)  # shorter than a block: nothing worth keeping
        total = sum(busy(r) for r in replicas) + 1
        room = cfg.balance_factor * total / sum(max(1, r.capacity) for r in replicas)
        by_name = {r.name: r for r in replicas}
        chosen: R | None = None
        prefixes = self._prefixes
        for key in reversed(keys):
            holder = by_name.get(prefixes.get((model, key), ""))
            if holder is not None and _fits(holder, room):
                chosen = holder
                state.hits += 1
                break
        if chosen is None:
            state.misses += 1
            for name in self._ring(tuple(by_name)).walk(keys[0]):
                if _fits(by_name[name], room):
                    chosen = by_name[name]
                    break
            else:
                chosen = min(replicas, key=load)
        self._remember(model, keys, chosen.name, by_name)
        return chosen

    def _ring(self, names: tuple[str, ...]) -> _Ring:
        ring = self._rings.get(names)
        if ring is None:
            if len(self._rings) > 64:  # replica sets come and go with engines: bounded
                self._rings.clear()
            ring = self._rings[names] = _Ring(names)
        return ring

    def _remember(
        self, model: str, keys: list[int], name: str, replicas: Mapping[str, Replica]
    ) -> None:
        """The request's keys now lead to ``name``, except those another replica still
        serving the model holds (a request it was too busy for: it keeps its prefix)."""
        prefixes = self._prefixes
        for key in keys:
            k = (model, key)
            owner = prefixes.get(k)
            if owner is None or owner not in replicas:
                prefixes[k] = name
            else:
                prefixes.move_to_end(k)
        while len(prefixes) > self.cfg.max_prefixes:
            prefixes.popitem(last=False)

    @property
    def prefix_count(self) -> int:
        return len(self._prefixes)

    # ------------------------------------------------------------------ self-check

    def _count(
        self, model: str, state: ModelRouting, chosen: Replica, replicas: Sequence[Replica]
    ) -> None:
        window, shares = state.window, state.shares
        state.picks[chosen.name] = state.picks.get(chosen.name, 0) + 1
        window.append(chosen.name)
        shares[chosen.name] = shares.get(chosen.name, 0) + 1
        if len(window) > self.cfg.self_check_window:
            old = window.popleft()
            left = shares[old] - 1
            if left:
                shares[old] = left
            else:
                del shares[old]
        elif len(window) < self.cfg.self_check_window:
            return
        if shares[chosen.name] / len(window) > self._skewed(len(replicas)):
            self._check(model, state, chosen, replicas)

    def _skewed(self, n: int) -> float:
        fair = 1 / n
        return fair + self.cfg.self_check_skew * (1 - fair)

    def _check(
        self, model: str, state: ModelRouting, hot: Replica, replicas: Sequence[Replica]
    ) -> None:
        """``hot`` took too large a share: a fallback if it is loaded while another
        replica is idle (not when all is quiet and a prefix keeps to its replica)."""
        now = time.monotonic()
        if state.fallback_until > now:
            return
        others = [r for r in replicas if r is not hot]
        if busy(hot) < 2 or not any(busy(r) == 0 for r in others):
            return
        mean = sum(load(r) for r in others) / len(others)
        if load(hot) <= 2 * mean:
            return
        state.fallback_until = now + self.cfg.self_check_cooldown_s
        state.fallbacks += 1
        log.warning(
            "routing of %s is skewed: %s took %.0f%% of its last %d requests and has %d in"
            " flight while another replica is idle; routing it by power of two choices for"
            " %g s",
            model, hot.name, 100 * state.shares[hot.name] / len(state.window),
            len(state.window), busy(hot), self.cfg.self_check_cooldown_s,
        )  # fmt: skip

    def counts(self) -> dict[str, dict[str, object]]:
        """What each model's routing did since the start (for metrics)."""
        return {m: s.counts() for m, s in self.models.items()}

    def snapshot(self) -> dict[str, object]:
        now = time.monotonic()
        return {
            "prefixes": len(self._prefixes),
            "models": {m: s.snapshot(now) for m, s in sorted(self.models.items())},
        }


def _fits(r: Replica, room: float) -> bool:
    """Whether ``r`` may take one more request: at most ``room`` per unit of capacity."""
    return busy(r) + 1 <= math.ceil(room * max(1, r.capacity))
