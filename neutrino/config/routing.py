"""The ``[routing]`` section: how a model's requests are spread over the engines (replicas)
that serve it, how a failing replica is kept out of the way, and how a request that
failed before its first token is retried on another.

::

    [routing]
    policy = "prefix"            # prefix | round_robin | least_outstanding | power_of_two
    balance_factor = 1.25        # prefix: a replica over factor x the mean load is passed by
    block_tokens = 64            # prefix: the prompt's ids are keyed at 1, 2, 4, ... blocks
    prefix_tokens = 2048         # prefix: of at most this many first ids
    max_prefixes = 65536         # prefix keys remembered (least recently used forgotten)
    self_check_window = 200      # a model's last decisions the self-check looks at
    self_check_skew = 0.5        # a replica's share past fair + skew x (1 - fair) is skewed
    self_check_cooldown_s = 60   # how long a skewed model is routed by power of two choices
    retry_budget = 0.1           # a request that failed before its first token is retried on
    retry_burst = 20             #   another replica, within this share of the requests
    eject_after = 5              # failures in a row that take a replica out of rotation
    eject_base_s = 5             #   for this long, doubled each time after, at most
    eject_max_s = 300            #   this long (never the last replica of a model)
    overload_skip_s = 1          # a replica that said "overloaded" is passed by this long
    migration_limit = 2          # moves of an answer to another replica after its first
                                 #   token (its engine lost, failing or drained; 0: none)
    migration_wait_s = 30        # with none now, how long it waits for one to start or be
                                 #   placed (0: it fails at once)

    [routing.models."qwen2.5-7b"]
    policy = "round_robin"       # this model's own policy
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from neutrino.config.checks import ConfigError, Range, of_fields, shown, typed

POLICIES = ("prefix", "round_robin", "least_outstanding", "power_of_two")


# The keys of a model's own table, [routing.models."NAME"].
MODEL_KEYS = ("policy",)


@dataclass(frozen=True, slots=True)
class RoutingConfig:
    # How a request picks among a model's replicas: prefix (consistent hashing with bounded
    # loads on the prompt's prefix), round_robin, least_outstanding or power_of_two.
    policy: str = "prefix"
    balance_factor: float = 1.25  # prefix: a replica past this x the mean load is passed by
    block_tokens: int = 64  # prefix: the prompt's ids are keyed at 1, 2, 4 ... such blocks
    prefix_tokens: int = 2048  # prefix: of at most this many of its first ids
    max_prefixes: int = 65536  # prefix: keys remembered, least recently used forgotten first
    self_check_window: int = 200  # the self-check reads a model's last this many decisions
    # Skewed: a replica's share past fair + this x (1 - fair), while it is loaded and another
    # replica idles: the model is routed by power of two choices for self_check_cooldown_s.
    self_check_skew: float = 0.5
    self_check_cooldown_s: float = 60.0
    retry_budget: float = 0.1  # retries per request routed among replicas (0: none)
    retry_burst: int = 20  # retries saved up at most
    eject_after: int = 5  # failures in a row that take a replica out of rotation
    eject_base_s: float = 5.0  # its first time out; doubled each time after
    eject_max_s: float = 300.0  # the longest time out
    overload_skip_s: float = 1.0  # a replica that said "overloaded" is passed by this long
    # Times one answer may go on on another replica after its first token (its engine
    # lost, failing it or drained: engine/fleet/migration.py); 0: it fails with its engine.
    migration_limit: int = 2
    # With no replica to move to now but one coming (a managed engine restarting, a model
    # the fleet places again), how long the answer waits for it (0: it fails at once).
    migration_wait_s: float = 30.0
    models: Mapping[str, str] = field(default_factory=dict)  # model -> its own policy

    def policy_of(self, model: str) -> str:
        return self.models.get(model, self.policy)


_RULES: dict[str, Range] = {
    "balance_factor": Range(1, 100),
    "block_tokens": Range(1, 65536),
    "prefix_tokens": Range(1, 1 << 20),
    "max_prefixes": Range(1, 1 << 24),
    "self_check_window": Range(10, 1 << 20),
    "self_check_skew": Range(0, 1, above=True),
    "self_check_cooldown_s": Range(0, above=True),
    "retry_budget": Range(0, 1),
    "retry_burst": Range(1, 1 << 20),
    "eject_after": Range(1, 1 << 20),
    "eject_base_s": Range(0, above=True),
    "eject_max_s": Range(0, above=True),
    "overload_skip_s": Range(0),
    "migration_limit": Range(0, 100),
    "migration_wait_s": Range(0, 3600),
}


def _policy(value: object, where: str) -> str:
    if value not in POLICIES:
        raise ConfigError(
            f"{where} must be one of {', '.join(map(repr, POLICIES))}, got {shown(value)}"
        )
    return str(value)


def routing_section(raw: object) -> RoutingConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"[routing] must be a table, got {shown(raw)}")
    defaults = RoutingConfig()
    known = [f.name for f in fields(RoutingConfig)]
    values: dict[str, object] = {}
    for key, value in raw.items():
        where = f"[routing].{key}"
        if key == "models":
            values["models"] = _models(value)
        elif key == "policy":
            values["policy"] = _policy(value, where)
        elif key in known:
            value = typed(getattr(defaults, key), value, where)
            problem = _RULES[key](value)
            if problem is not None:
                raise ConfigError(f"{where} {problem}, got {shown(value)}")
            values[key] = value
        else:
            raise ConfigError(f"unknown key {where} (known: {', '.join(known)})")
    return of_fields(RoutingConfig, values)


def _models(raw: object) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"[routing.models] must be a table of tables, got {shown(raw)}")
    out: dict[str, str] = {}
    for model, table in raw.items():
        where = f'[routing.models."{model}"]'
        if not isinstance(table, Mapping) or set(table) != set(MODEL_KEYS):
            raise ConfigError(f"{where} must be a table with one key, policy")
        out[model] = _policy(table["policy"], f"{where}.policy")
    return out
