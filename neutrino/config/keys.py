"""The ``[auth]`` section: API keys from the TOML file and from a file of SHA-256 digests.

::

    [auth]
    api_keys = ["sk-one", "sk-two"]           # plain keys: every model, no limit
    admin_keys = ["sk-admin"]                 # keys for the admin routes (and the API)
    api_keys_file = "/etc/neutrino/keys"      # one key per line, as its SHA-256

    [[auth.keys]]                             # a key with limits
    key = "sk-three"                          # or sha256 = "<64 hex digits>"
    name = "team-a"                           # shown in logs and history, never the key
    models = ["qwen2.5-mock"]                 # the only models it may use
    max_concurrency = 4                       # its requests in flight at most
    priority = 2                              # its requests' priority (0-9, higher first)
    max_priority = 5                          # the most x-neutrino-priority may ask
    requests_per_minute = 600                 # 0: no limit
    tokens_per_minute = 200000                # prompt + answer tokens
    tokens_per_day = 10000000                 # a budget, from midnight UTC
    admin = false

A line of the keys file is ``<sha256 hex> [name=NAME] [models=A,B] [OPTION=N ...]
[admin]``, each OPTION one of the integer limits above; ``#`` starts a comment. Every
key is kept as its digest only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neutrino.config.checks import ConfigError, known_table, shown

MAX_PRIORITY = 9  # priorities are 0 (the default, the lowest) to 9


@dataclass(frozen=True, slots=True)
class KeyConfig:
    digest: bytes  # SHA-256 of the key
    name: str
    models: frozenset[str] | None = None  # None: every model
    max_concurrency: int = 0  # 0: no limit of its own
    admin: bool = False
    priority: int = 0  # its requests' priority when they ask none (0-9, higher first)
    max_priority: int = -1  # the most a request may ask (-1: its priority)
    requests_per_minute: int = 0  # 0: no limit
    tokens_per_minute: int = 0
    tokens_per_day: int = 0

    @property
    def ceiling(self) -> int:
        return self.max_priority if self.max_priority >= 0 else self.priority

    @property
    def rated(self) -> bool:
        """Whether it has a rate limit or a budget (its answers then carry their headers)."""
        return bool(self.requests_per_minute or self.tokens_per_minute or self.tokens_per_day)


@dataclass(frozen=True, slots=True)
class AuthConfig:
    keys: tuple[KeyConfig, ...] = ()


# The integer options of a key, in a table or on a keys file's line.
_NUMBERS = (
    "max_concurrency",
    "priority",
    "max_priority",
    "requests_per_minute",
    "tokens_per_minute",
    "tokens_per_day",
)
_TABLE_KEYS = ("key", "sha256", "name", "models", *_NUMBERS, "admin")


def _digest_of(key: object, where: str) -> bytes:
    if not isinstance(key, str) or not key.strip() or key != key.strip():
        raise ConfigError(f"{where} must be a non-empty string without surrounding spaces")
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def _hex_digest(text: object, where: str) -> bytes:
    if not isinstance(text, str) or len(text) != 64:
        raise ConfigError(f"{where} must be a SHA-256 digest: 64 hex digits")
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise ConfigError(f"{where} must be a SHA-256 digest: 64 hex digits") from None


def _models(value: object, where: str) -> frozenset[str]:
    if not isinstance(value, list | tuple) or not value:
        raise ConfigError(f"{where} must be a non-empty list of model names")
    if not all(isinstance(m, str) and m for m in value):
        raise ConfigError(f"{where} must be a non-empty list of model names")
    return frozenset(value)


def _limit(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where} must be an integer >= 0 (0: no limit), got {shown(value)}")
    return value


def _numbers(values: Mapping[str, object], where: str) -> dict[str, int]:
    out = {k: _limit(values[k], f"{where}.{k}") for k in _NUMBERS if k in values}
    for k in ("priority", "max_priority"):
        if out.get(k, 0) > MAX_PRIORITY:
            raise ConfigError(f"{where}.{k} must be 0 to {MAX_PRIORITY}, got {out[k]}")
    if "max_priority" in out and out["max_priority"] < out.get("priority", 0):
        raise ConfigError(f"{where}.max_priority is below its priority")
    return out


def _table(i: int, item: object) -> KeyConfig:
    where = f"[[auth.keys]][{i}]"
    item = known_table(item, where, _TABLE_KEYS)
    if ("key" in item) == ("sha256" in item):
        raise ConfigError(f"{where} needs exactly one of key or sha256")
    if "key" in item:
        digest = _digest_of(item["key"], f"{where}.key")
    else:
        digest = _hex_digest(item["sha256"], f"{where}.sha256")
    name = item.get("name", f"auth.keys[{i}]")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.name must be a non-empty string")
    admin = item.get("admin", False)
    if not isinstance(admin, bool):
        raise ConfigError(f"{where}.admin must be true or false")
    return KeyConfig(
        digest=digest,
        name=name,
        models=_models(item["models"], f"{where}.models") if "models" in item else None,
        admin=admin,
        **_numbers(item, where),
    )


def _file_line(line: str, where: str) -> KeyConfig:
    fields = line.split()
    key = KeyConfig(digest=_hex_digest(fields[0], where), name=where.rpartition("/")[2])
    options: dict[str, Any] = {}
    for place, field in enumerate(fields[1:], 2):
        name, eq, value = field.partition("=")
        if field == "admin":
            options["admin"] = True
        elif eq and name == "name" and value:
            options["name"] = value
        elif eq and name == "models":
            options["models"] = _models([m for m in value.split(",") if m], f"{where} models")
        elif eq and name in _NUMBERS and value.isdigit():
            options[name] = int(value)
        else:  # not echoed: it may be a key pasted in by mistake
            raise ConfigError(
                f"{where}: field {place} is not one of name=, models=, "
                f"{'=N, '.join(_NUMBERS)}=N, admin"
            )
    return KeyConfig(
        digest=key.digest,
        name=options.get("name", key.name),
        models=options.get("models"),
        admin=options.get("admin", False),
        **_numbers({k: v for k, v in options.items() if k in _NUMBERS}, where),
    )


def _keys_file(path: object) -> list[KeyConfig]:
    if not isinstance(path, str) or not path:
        raise ConfigError("[auth].api_keys_file must be a file path")
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"[auth].api_keys_file: cannot read {path}: {exc}") from None
    keys: list[KeyConfig] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.partition("#")[0].strip()
        if line:
            keys.append(_file_line(line, f"{path}:{n}"))
    return keys


def _plain(raw: object, where: str, admin: bool, start: int) -> list[KeyConfig]:
    if not isinstance(raw, list):
        raise ConfigError(f"{where} must be a list of strings")
    label = "admin_keys" if admin else "api_keys"
    return [
        KeyConfig(_digest_of(k, f"{where}[{i}]"), f"{label}[{start + i}]", admin=admin)
        for i, k in enumerate(raw)
    ]


def auth_section(raw: object) -> AuthConfig:
    """``[auth]`` (with its ``[[auth.keys]]`` tables) as an AuthConfig, checked."""
    raw = known_table(raw, "[auth]", ("api_keys", "admin_keys", "api_keys_file", "keys"))
    keys = _plain(raw.get("api_keys", []), "[auth].api_keys", False, 0)
    keys += _plain(raw.get("admin_keys", []), "[auth].admin_keys", True, 0)
    tables = raw.get("keys", [])
    if not isinstance(tables, list):
        raise ConfigError("[[auth.keys]] must be an array of tables")
    keys += [_table(i, item) for i, item in enumerate(tables)]
    if "api_keys_file" in raw:
        keys += _keys_file(raw["api_keys_file"])
    seen: dict[bytes, str] = {}
    for key in keys:
        if key.digest in seen:  # which entry's limits would hold is not for us to guess
            raise ConfigError(
                f"[auth]: the same key is configured twice ({seen[key.digest]} and "
                f"{key.name}); give each key one entry"
            )
        seen[key.digest] = key.name
    return AuthConfig(keys=tuple(keys))
