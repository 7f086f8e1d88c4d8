"""The fleet: node agents (``[[nodes]]``, or found in etcd through ``[fleet] etcd``), the
catalogue of models they may be asked to load (``[[catalogue]]``) and the control plane's
settings (``[fleet]``).

::

    [[nodes]]
    name = "gpu-1"
    endpoint = "http://10.0.0.7:51070"
    token_file = "/etc/neutrino/node-token"

    [[catalogue]]
    id = "qwen2.5-7b-instruct"
    harness = "llamacpp"               # llamacpp | llama-server | vllm | a node's [[harness]]
    file = "qwen2.5-7b-instruct-q4_k_m.gguf"   # in the node's models folder
    quant = "q4_k_m"
    memory_mb = 6000                   # host memory it takes (CPU) ... or
    vram_mb = 0                        # GPU memory, over min_devices devices
    min_devices = 1
    min_device_vram_mb = 0             # a device below this is not used for it
    pinned_on = ["gpu-1"]              # loaded there always, never evicted there
    replicas = { min = 0, max = 2 }

    [fleet]
    poll_s = 2.0
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import TypeVar

from neutrino.config.checks import (
    ConfigError,
    Range,
    as_table,
    known_table,
    of_fields,
    read_token_file,
    shown,
    typed,
)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$")


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    name: str  # the node's name, in routes, metrics and logs
    endpoint: str  # its agent's API: http://HOST:PORT
    token_file: str = ""  # the agent's bearer token (and its engines' hello token)
    token: str = field(default="", repr=False)  # read from token_file at load


@dataclass(frozen=True, slots=True)
class Replicas:
    min: int = 0  # kept loaded, at start and whenever fewer are
    max: int = 1  # added while the model's requests queue, up to this many


@dataclass(frozen=True, slots=True)
class CatalogueEntry:
    id: str  # the model's name, as clients ask for it
    file: str  # its file (or folder) in the node's models folder
    harness: str = "llamacpp"  # the engine that runs it on a node
    quant: str = ""  # its quantisation, as said to the node (informational)
    memory_mb: int = 0  # host memory it takes loaded (CPU models)
    vram_mb: int = 0  # GPU memory it takes loaded, over its devices
    min_devices: int = 1  # GPUs it is split over (tensor parallel), with vram_mb
    min_device_vram_mb: int = 0  # only devices of at least this much VRAM take it
    pinned_on: tuple[str, ...] = ()  # nodes that keep it loaded, never evicting it there
    replicas: Replicas = field(default_factory=Replicas)
    context_length: int = 2048  # each sequence's context, in tokens
    slots: int = 4  # sequences each replica runs at once (its capacity for the queue)

    @property
    def gpu(self) -> bool:
        return self.vram_mb > 0


@dataclass(frozen=True, slots=True)
class FleetConfig:
    # etcd endpoints where node agents keep their records (`neutrino node --etcd`), found
    # at each poll beside [[nodes]].
    etcd: tuple[str, ...] = ()
    prefix: str = "/neutrino/nodes/"  # the agents' records' prefix in etcd
    # HOST:PORT names whose every address is a node agent (a Kubernetes headless Service
    # in front of the agents' DaemonSet), resolved at each poll.
    dns: tuple[str, ...] = ()
    token_file: str = ""  # the token of the agents found in etcd or by DNS
    token: str = field(default="", repr=False)
    poll_s: float = 2.0  # how often each node's health and models are read
    call_timeout_s: float = 3.0  # a poll or unload that takes longer failed
    down_after: int = 2  # failed polls in a row that mark a node down
    load_timeout_s: float = 300.0  # a load that takes longer failed (the next node is tried)
    # Requests of a model beyond its replicas' slots that make a long queue.
    scale_up_queue: int = 1
    # How long the queue must stay long before another replica is added (up to max).
    scale_up_after_s: float = 10.0
    # A replica above replicas.min that served nothing this long is unloaded (0: never).
    scale_down_idle_s: float = 600.0
    connections: int = 1  # connections to each placed engine


_FLEET_RULES: dict[str, Range] = {
    "poll_s": Range(0, 3600, above=True),
    "call_timeout_s": Range(0, 600, above=True),
    "down_after": Range(1, 1000),
    "load_timeout_s": Range(0, 86400, above=True),
    "scale_up_queue": Range(1, 1 << 20),
    "scale_up_after_s": Range(0, 86400),
    "scale_down_idle_s": Range(0, 1 << 30),
    "connections": Range(1, 64),
}


def _ruled(default: object, value: object, where: str, rule: Range | None) -> object:
    """``value`` typed as ``default`` is and checked by ``rule`` (None: any)."""
    value = typed(default, value, where)
    problem = rule(value) if rule is not None else None
    if problem:
        raise ConfigError(f"{where} {problem}, got {shown(value)}")
    return value


def fleet_section(raw: object) -> FleetConfig:
    defaults = FleetConfig()
    known = [f.name for f in fields(FleetConfig) if f.name != "token"]
    values: dict[str, object] = {}
    for key, value in as_table(raw, "[fleet]").items():
        where = f"[fleet].{key}"
        if key not in known:
            raise ConfigError(f"unknown key {where} (known: {', '.join(known)})")
        values[key] = _ruled(getattr(defaults, key), value, where, _FLEET_RULES.get(key))
    cfg = of_fields(FleetConfig, values)
    for url in cfg.etcd:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"[fleet].etcd must list http:// or https:// URLs, got {url!r}")
    if not cfg.prefix.startswith("/"):
        raise ConfigError("[fleet].prefix must start with /")
    if cfg.token_file:
        cfg = replace(cfg, token=read_token_file(cfg.token_file, "[fleet].token_file"))
    elif cfg.etcd or cfg.dns:
        raise ConfigError("[fleet] etcd and dns need [fleet].token_file (the agents' token)")
    for name in cfg.dns:
        host, sep, port = name.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"[fleet].dns must list HOST:PORT names, got {name!r}")
    return cfg


T = TypeVar("T")


def _array(
    raw: object, header: str, parse: Callable[[int, object], T], key: Callable[[T], str], twice: str
) -> tuple[T, ...]:
    """An array of tables, each parsed, no two with the same ``key`` (``twice``: the
    error's words for one that is, with ``{}`` for the key)."""
    if not isinstance(raw, list):
        raise ConfigError(f"[[{header}]] must be an array of tables")
    items = tuple(parse(i, item) for i, item in enumerate(raw))
    seen: set[str] = set()
    for item in items:
        if key(item) in seen:
            raise ConfigError(f"[[{header}]]: " + twice.format(repr(key(item))))
        seen.add(key(item))
    return items


def nodes_section(raw: object) -> tuple[NodeEndpoint, ...]:
    return _array(raw, "nodes", _node, lambda n: n.name, "two nodes are named {}")


def _node(i: int, raw: object) -> NodeEndpoint:
    where = f"[nodes][{i}]"
    table = known_table(raw, where, ("name", "endpoint", "token_file"))
    name, endpoint = table.get("name"), table.get("endpoint")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{where}.name must be letters, digits, '.', '_' or '-' (up to 63)")
    if not isinstance(endpoint, str) or not re.match(r"^https?://[^/\s]+/?$", endpoint):
        raise ConfigError(f"{where}.endpoint must be http://HOST:PORT, got {shown(endpoint)}")
    token_file = table.get("token_file")
    if not isinstance(token_file, str) or not token_file:
        raise ConfigError(f"{where}.token_file must name the file of the agent's token")
    token = read_token_file(token_file, f"{where}.token_file")
    return NodeEndpoint(name, endpoint.rstrip("/"), token_file, token)


_ENTRY_INTS = {
    "memory_mb": Range(0, 1 << 30),
    "vram_mb": Range(0, 1 << 30),
    "min_devices": Range(1, 64),
    "min_device_vram_mb": Range(0, 1 << 30),
    "context_length": Range(1, 1 << 24),
    "slots": Range(1, 4096),
}


def catalogue_section(raw: object) -> tuple[CatalogueEntry, ...]:
    return _array(raw, "catalogue", _entry, lambda e: e.id, "the id {} is listed twice")


def _entry(i: int, raw: object) -> CatalogueEntry:
    where = f"[catalogue][{i}]"
    table = known_table(raw, where, [f.name for f in fields(CatalogueEntry)])
    for key in ("id", "file"):
        if key not in table:
            raise ConfigError(f"{where} needs {key}")
    defaults = CatalogueEntry("x", "x")
    values: dict[str, object] = {}
    for key, value in table.items():
        if key == "replicas":
            values[key] = _replicas(value, f"{where}.replicas")
            continue
        values[key] = _ruled(getattr(defaults, key), value, f"{where}.{key}", _ENTRY_INTS.get(key))
    entry = of_fields(CatalogueEntry, values)
    if not _MODEL.match(entry.id):
        raise ConfigError(f"{where}.id must be letters, digits and . _ : / @ + - (up to 128)")
    if not entry.file or entry.file.startswith("/") or ".." in entry.file.split("/"):
        raise ConfigError(f"{where}.file must be a path inside the node's models folder")
    if entry.memory_mb and entry.vram_mb:
        raise ConfigError(f"{where}: give memory_mb (a CPU model) or vram_mb (a GPU model)")
    if not entry.memory_mb and not entry.vram_mb:
        raise ConfigError(f"{where} needs memory_mb or vram_mb: what it takes loaded")
    if entry.replicas.max < max(1, entry.replicas.min, len(entry.pinned_on)):
        raise ConfigError(
            f"{where}.replicas.max must be at least 1, replicas.min and the pinned nodes"
        )
    return entry


def _replicas(raw: object, where: str) -> Replicas:
    table = known_table(raw, where, ("min", "max"))
    values = {k: typed(0, v, f"{where}.{k}") for k, v in table.items()}
    for key, value in values.items():
        problem = Range(0, 1024)(value)
        if problem:
            raise ConfigError(f"{where}.{key} {problem}, got {value}")
    out = of_fields(Replicas, values)
    if "max" not in values:
        out = Replicas(out.min, max(1, out.min))
    return out


def check_fleet(
    nodes: tuple[NodeEndpoint, ...], catalogue: tuple[CatalogueEntry, ...], fleet: FleetConfig
) -> None:
    """What the three sections must agree on."""
    if catalogue and not nodes and not fleet.etcd and not fleet.dns:
        raise ConfigError("[[catalogue]] needs node agents: [[nodes]], [fleet].etcd or .dns")
    names = {n.name for n in nodes}
    for entry in catalogue:
        found = fleet.etcd or fleet.dns  # nodes known only when they answer
        unknown = [n for n in entry.pinned_on if n not in names and not found]
        if unknown:
            raise ConfigError(f"[[catalogue]] {entry.id!r}: pinned_on names no node {unknown[0]!r}")
