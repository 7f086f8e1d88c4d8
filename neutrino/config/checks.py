"""What each configuration value must be, checked once while the config is loaded.

The type of a value comes from its field's default (``neutrino.config``); this module adds
what a value of the right type must also satisfy: ranges, allowed words, address forms.
The same rule checks a TOML value (named ``[limits].request_timeout_s``) and the flag that
sets it (named ``--request-timeout``); a failure is a one-line :class:`ConfigError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import MISSING, dataclass, fields, replace
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
D = TypeVar("D", bound="DataclassInstance")

# deadlineMs is a UInt32 of milliseconds in the engine protocol (schemas/ie.capnp).
MAX_TIMEOUT_S = 4_294_967
# gRPC takes its message size options as a C int.
MAX_GRPC_MESSAGE_BYTES = 2**31 - 1
LOG_LEVELS = ("debug", "info", "warning", "error")


class ConfigError(ValueError):
    pass


def shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _num(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)


@dataclass(frozen=True, slots=True)
class Range:
    """``low <= value <= high`` (``low < value`` when ``above``); floats must be finite."""

    low: float
    high: float = math.inf
    above: bool = False

    def __call__(self, value: object) -> str | None:
        if not isinstance(value, int | float):
            return "must be a number"
        if isinstance(value, float) and not math.isfinite(value):
            return "must be a finite number"
        too_low = value <= self.low if self.above else value < self.low
        if too_low or value > self.high:
            low = f"> {_num(self.low)}" if self.above else f">= {_num(self.low)}"
            high = "" if self.high == math.inf else f" and <= {_num(self.high)}"
            return f"must be {low}{high}"
        return None


def _non_empty(value: object) -> str | None:
    return None if value else "must not be empty"


Rule = Callable[[object], str | None]  # None: the value is fine; else what it must be


def _text(rule: Callable[[str], str | None]) -> Rule:
    """``rule`` for a string value (``typed`` made a string key's value one)."""
    return lambda value: rule(value) if isinstance(value, str) else "must be a string"


def _texts(rule: Callable[[tuple[str, ...]], str | None]) -> Rule:
    """``rule`` for a list of strings (``typed`` made one a tuple)."""

    def checked(value: object) -> str | None:
        if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
            return rule(value)
        return "must be a list of strings"

    return checked


@_text
def _log_level(value: str) -> str | None:
    return None if value.lower() in LOG_LEVELS else f"must be one of {', '.join(LOG_LEVELS)}"


def split_address(value: str, where: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[V6]:PORT``; an empty host is 127.0.0.1) with a port up to 65535."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{where} must be HOST:PORT with a port from 0 to 65535, got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


@_text
def _address(value: str) -> str | None:
    try:
        split_address(value, "")
    except ConfigError:
        return "must be HOST:PORT with a port from 0 to 65535"
    return None


@_text
def _endpoint(value: str) -> str | None:
    """``http://HOST:PORT`` or ``https://HOST:PORT`` ("" allowed: off)."""
    if value == "":
        return None
    scheme, sep, rest = value.partition("://")
    if scheme not in ("http", "https") or not sep or _address(rest.rstrip("/")) is not None:
        return "must be http://HOST:PORT or https://HOST:PORT"
    return None


@_texts
def _origins(value: tuple[str, ...]) -> str | None:
    """Web origins as browsers send them (``scheme://host[:port]``), or "*"."""
    for origin in value:
        scheme, sep, rest = origin.partition("://")
        if origin != "*" and (not scheme or not sep or not rest or "/" in rest):
            return 'must list origins like http://localhost:3000 (or "*": any origin)'
    return None


def _one_of(*words: str) -> Rule:
    def rule(value: object) -> str | None:
        return None if value in words else f"must be one of {', '.join(map(repr, words))}"

    return rule


@_text
def _upstream_url(value: str) -> str | None:
    """``http(s)://HOST:PORT[/PATH]``: an HTTP upstream's base URL."""
    scheme, sep, rest = value.partition("://")
    host = rest.partition("/")[0]
    if scheme not in ("http", "https") or not sep or _address(host) is not None:
        return "must be http://HOST:PORT/PATH or https://HOST:PORT/PATH"
    return None


_POSITIVE = Range(0, above=True)
_NON_NEGATIVE = Range(0)
_ONE_UP = Range(1)

# section.key -> rule; a key not named here takes any value of its type.
RULES: dict[str, Rule] = {
    "server.http_host": _non_empty,
    "server.http_port": Range(0, 65535),  # 0: any free port
    "server.log_level": _log_level,
    "model.default_family": _non_empty,
    "tokenizer.offload_chars": _NON_NEGATIVE,  # 0: every encode runs in a worker thread
    "engines.socket": _non_empty,
    "engines.connections": Range(1, 1024),
    "engines.command": _non_empty,
    "engines.ready_timeout_s": _POSITIVE,
    "engines.url": _upstream_url,
    "engines.address": _address,
    "engines.mode": _one_of("tokens", "passthrough"),
    "engines.capacity": Range(1, 65536),
    "engines.context_length": _NON_NEGATIVE,
    "engines.refresh_s": _POSITIVE,
    "engines.first_byte_timeout_s": _NON_NEGATIVE,  # 0: only the request's deadline
    "engines.idle_timeout_s": _NON_NEGATIVE,
    "engines.stop_timeout_s": _POSITIVE,
    "mock.ttft_ms": _NON_NEGATIVE,
    "mock.itl_ms": _NON_NEGATIVE,
    "mock.capacity": Range(1, 2**32 - 1),
    "limits.max_body_bytes": _ONE_UP,
    "limits.max_queue": _NON_NEGATIVE,  # 0: no queue, 429 when no slot is free
    "limits.max_inflight": _NON_NEGATIVE,  # 0: the engines' announced capacity
    "limits.request_timeout_s": Range(0, MAX_TIMEOUT_S, above=True),
    "limits.stream_buffer_bytes": _ONE_UP,
    "limits.history_size": _ONE_UP,
    "limits.history_bytes": _ONE_UP,
    "limits.max_n": _ONE_UP,
    "limits.max_stop_sequences": _ONE_UP,
    "limits.max_stop_chars": _ONE_UP,
    "limits.max_schema_depth": _ONE_UP,
    "limits.max_logit_bias": _NON_NEGATIVE,  # 0: logit_bias refused
    "limits.max_unstreamed_tokens": _ONE_UP,
    "limits.offload_bytes": _NON_NEGATIVE,  # 0: every body on a worker thread
    "limits.max_json_containers": _ONE_UP,
    "limits.max_messages": _ONE_UP,
    "limits.max_tools": _ONE_UP,
    "limits.send_timeout_s": _POSITIVE,
    "limits.max_audio_seconds": Range(0, 86400, above=True),
    "limits.max_upload_bytes": _ONE_UP,
    "limits.priority_age_s": _NON_NEGATIVE,  # 0: no ageing
    "limits.share_decay_s": _POSITIVE,
    "limits.reserved_slots": _NON_NEGATIVE,
    "limits.unkeyed_max_priority": Range(0, 9),
    "limits.answer_estimate_tokens": _ONE_UP,
    "limits.rate_window_s": Range(1, 60),
    "limits.redis": _text(
        lambda v: (
            None
            if v == "" or v.startswith(("redis://", "rediss://", "unix://"))
            else "must be a Redis URL (redis://host:port/db, rediss://, unix://)"
        )
    ),
    "engine_link.connect_timeout_s": _POSITIVE,
    "engine_link.heartbeat_interval_s": _NON_NEGATIVE,  # 0: no heartbeats
    "engine_link.heartbeat_timeout_s": _POSITIVE,
    "engine_link.backoff_initial_s": _POSITIVE,
    "engine_link.backoff_max_s": _POSITIVE,
    "http.sse_keepalive_s": _POSITIVE,
    "http.reasoning_field": _non_empty,
    "http.header_timeout_s": _POSITIVE,
    "http.body_timeout_s": _POSITIVE,
    "http.min_body_rate": _NON_NEGATIVE,  # 0: no minimum
    "http.body_grace_s": _NON_NEGATIVE,
    "http.keepalive_timeout_s": _POSITIVE,
    "grpc.address": _address,
    "grpc.max_message_bytes": Range(1, MAX_GRPC_MESSAGE_BYTES),
    "grpc.health_interval_s": _POSITIVE,
    "grpc.max_pending_calls": Range(1, 1 << 20),
    "admin.address": lambda v: None if v == "" else _address(v),
    "admin.allowed_origins": _origins,
    "shutdown.grace_s": _NON_NEGATIVE,
    "server.workers": Range(1, 256),
    "server.listen_backlog": Range(1, 65535),
    "server.offload_threads": Range(1, 64),
    "worker.index": Range(0, 255),
    "worker.dir": _non_empty,
    "metrics.address": lambda v: None if v == "" else _address(v),
    "tracing.endpoint": _endpoint,
    "tracing.sample_ratio": Range(0, 1),
    "tracing.service_name": _non_empty,
    "tracing.shutdown_timeout_s": _NON_NEGATIVE,
    "logging.level": lambda v: None if v == "" else _log_level(v),
    "logging.format": lambda v: None if v in ("text", "json") else "must be text or json",
    "logging.max_bytes": Range(1024),
    "logging.backups": Range(0, 1000),
    "sombrero.address": lambda v: None if v == "" else _address(v),
    "sombrero.report_interval_s": _POSITIVE,
    "sombrero.backoff_initial_s": _POSITIVE,
    "sombrero.backoff_max_s": _POSITIVE,
    "discovery.etcd": _texts(lambda v: next(filter(None, map(_endpoint, v)), None)),
    "discovery.prefix": _text(lambda v: None if v.startswith("/") else "must start with /"),
    "discovery.lease_ttl_s": Range(2, 3600),  # 0: in-flight requests are not waited for
}


def read_token_file(path: str, where: str) -> str:
    """The secret held in the file ``path`` (its first line, stripped): read once, at
    load; a missing, unreadable or empty file is a ConfigError naming ``where``."""
    try:
        with open(path, encoding="utf-8") as fh:
            token = fh.readline().strip()
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        raise ConfigError(f"{where}: cannot read {path!r}: {reason}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: {path!r} is not UTF-8 text") from None
    if not token:
        raise ConfigError(f"{where}: {path!r} holds no token")
    return token


_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def typed(default: object, value: object, where: str) -> object:
    """``value`` as the type of ``default`` (an int for a float is fine), or ConfigError."""
    kind = type(default)
    ok, value = _as_kind(kind, value)
    if not ok:
        what = _KINDS.get(kind) or ("a list of strings" if kind is tuple else "a table of strings")
        raise ConfigError(f"{where} must be {what}, got {shown(value)}")
    return value


def _as_kind(kind: type, value: object) -> tuple[bool, object]:
    """Whether ``value`` is of ``kind`` (as :func:`typed` allows), and it converted."""
    if kind is bool:
        return isinstance(value, bool), value
    if isinstance(value, bool):
        return False, value
    if kind is float:
        return (True, float(value)) if isinstance(value, int | float) else (False, value)
    if kind is int and isinstance(value, float) and value.is_integer():
        # 1024.0: how YAML-to-TOML writers (Helm's toToml) spell a whole number.
        return True, int(value)
    if kind in (int, str):
        return isinstance(value, kind), value
    if kind is tuple:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return True, tuple(value)
        return False, value
    # mappings of strings
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return True, dict(value)
    return False, value


def check(rule_name: str, value: T, where: str) -> T:
    """``value`` if the rule for ``section.key`` allows it, else ConfigError naming ``where``."""
    rule = RULES.get(rule_name)
    problem = rule(value) if rule is not None else None
    if problem is not None:
        raise ConfigError(f"{where} {problem}, got {shown(value)}")
    return value


def as_table(raw: object, where: str) -> Mapping[str, object]:
    """``raw``, which must be a table (``where``: its name in the errors)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where} must be a table, got {shown(raw)}")
    return raw


def known_table(raw: object, where: str, known: Collection[str]) -> Mapping[str, object]:
    """``raw``, which must be a table of ``known`` keys only (the error names the first
    unknown key, in sorted order)."""
    values = as_table(raw, where)
    extra = sorted(set(values) - set(known))
    if extra:
        raise ConfigError(f"unknown key {where}.{extra[0]} (known: {', '.join(known)})")
    return values


def coerce(cls: type[D], section: str, raw: object) -> D:
    """The section ``[section]`` as a ``cls`` dataclass: each key known, typed as its
    default is and checked (unknown keys and bad values are a ConfigError)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"[{section}] must be a table, got {shown(raw)}")
    known = {f.name: f for f in fields(cls)}
    values: dict[str, object] = {}
    for key, value in raw.items():
        f = known.get(key)
        if f is None:
            raise ConfigError(f"unknown key [{section}].{key} (known: {', '.join(known)})")
        default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[operator]
        where = f"[{section}].{key}"
        values[key] = check(f"{section}.{key}", typed(default, value, where), where)
    return of_fields(cls, values)


def of_fields(cls: type[D], values: Mapping[str, object]) -> D:
    """A ``cls`` dataclass of ``values``, each already made its field's type (:func:`typed`)."""
    return cls(**values)


def replaced(obj: D, changes: Mapping[str, object]) -> D:
    """``obj`` with ``changes``, each already of its field's type (a section read)."""
    return replace(obj, **changes)
