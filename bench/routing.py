"""`make bench`'s routing section: what choosing a replica costs, per policy, and how often
the prefix policy sends a conversation's turn where its earlier turns went.

In one process, against the router's own ``Routing`` (``neutrino/engine/fleet/routing.py``)
and three replicas of equal capacity whose requests in flight are simulated: each
decision adds a request to its replica, and the oldest of the last ``CONCURRENCY``
requests ends. The workload is a shared-prefix one: ``SYSTEMS`` system prompts of 300
token ids each, and ``CONVERSATIONS`` conversations over them that grow turn by turn
(each turn adds 60 ids; its prompt holds every earlier turn), interleaved.

- **cost**: microseconds per decision (the prefix keys of a prompt of up to ~2,000 ids
  included), best of 5;
- **affinity**: the share of turns (after a conversation's first) that went to the
  replica its previous turn went to, where that replica's KV cache would hold the whole
  earlier conversation. A random spread over three gives about a third.

Run alone: ``python -m bench.routing``.
"""

from __future__ import annotations

import random
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from neutrino.config.routing import POLICIES, RoutingConfig
from neutrino.engine.fleet.routing import Routing

SYSTEMS = 8
CONVERSATIONS = 64
TURNS = 24
CONCURRENCY = 16


@dataclass
class Rep:
    name: str
    inflight: int = 0
    capacity: int = 64
    reported: int = 0  # what its engine says it holds, from every client


def workload(seed: int = 1) -> list[tuple[int, list[int]]]:
    """(conversation, prompt ids) per request, conversations interleaved at random."""
    rng = random.Random(seed)
    systems = [[rng.randrange(1000, 150000) for _ in range(300)] for _ in range(SYSTEMS)]
    prompts = [list(systems[c % SYSTEMS]) for c in range(CONVERSATIONS)]
    turns = [0] * CONVERSATIONS
    out: list[tuple[int, list[int]]] = []
    live = list(range(CONVERSATIONS))
    while live:
        c = rng.choice(live)
        prompts[c] = prompts[c] + [rng.randrange(1000, 150000) for _ in range(60)]
        out.append((c, prompts[c]))
        turns[c] += 1
        if turns[c] == TURNS:
            live.remove(c)
    return out


def run_policy(policy: str, requests: list[tuple[int, list[int]]]) -> dict[str, float]:
    routing = Routing(RoutingConfig(policy=policy), rng=random.Random(2))
    reps = [Rep(f"r{i}") for i in range(3)]
    flying: deque[Rep] = deque()
    last: dict[int, str] = {}
    same = later = 0
    start = time.perf_counter()
    for conversation, prompt in requests:
        rep = routing.choose("m", reps, prompt)
        rep.inflight += 1
        flying.append(rep)
        if len(flying) > CONCURRENCY:
            flying.popleft().inflight -= 1
        if conversation in last:
            later += 1
            same += last[conversation] == rep.name
        last[conversation] = rep.name
    elapsed = time.perf_counter() - start
    return {"us": 1e6 * elapsed / len(requests), "affinity": same / max(1, later)}


def measure() -> dict[str, dict[str, float]]:
    requests = workload()
    report: dict[str, dict[str, float]] = {}
    for policy in POLICIES:
        runs = [run_policy(policy, requests) for _ in range(5)]
        report[policy] = {"us": min(r["us"] for r in runs), "affinity": runs[0]["affinity"]}
    return report


def print_routing(report: dict[str, Any]) -> None:
    n = SYSTEMS
    print(
        f"\nRouting over 3 replicas ({CONVERSATIONS} conversations of {TURNS} turns over {n}"
        f" system prompts, {CONCURRENCY} in flight; one process):"
    )
    print("  policy              us/decision   same replica as the previous turn")
    for policy, r in report.items():
        print(f"  {policy:<20}{r['us']:>10.2f}   {100 * r['affinity']:>6.1f} %")


if __name__ == "__main__":
    print_routing(measure())
