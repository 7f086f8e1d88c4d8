"""The ``[[routes]]`` tables: manifest routes, model names that are aliases for a router
model and the specialists it picks among.

::

    [[routes]]
    name = "auto"                      # the model name clients ask for
    router = "qwen2.5-0.5b"            # the small model that names the request's intent
    intents = { code = "qwen2.5-coder-7b", math = "qwen2.5-math-7b", chat = "qwen2.5-7b" }
    fallback = "qwen2.5-7b"            # for an intent not in the table, or a router failure
    instruction = "..."                # the router's system prompt (default: one naming the
                                       # intents)
    max_tokens = 8                     # the router's answer, at most
    warm = true                        # when the router runs, load the specialists that
                                       # load on demand, without waiting for them
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from neutrino.config.checks import ConfigError, known_table, shown

_KEYS = ("name", "router", "intents", "fallback", "instruction", "max_tokens", "warm")


@dataclass(frozen=True, slots=True)
class RouteConfig:
    name: str  # the alias clients name as their model
    router: str  # the model that tells the intent
    intents: Mapping[str, str] = field(default_factory=dict)  # intent -> model
    fallback: str = ""  # the model for an unknown intent or a failed router
    instruction: str = ""  # the router's system prompt ("": one naming the intents)
    max_tokens: int = 8  # the router's answer, at most
    warm: bool = True  # load the specialists that load on demand while the router runs

    @property
    def prompt(self) -> str:
        """The router's system prompt."""
        if self.instruction:
            return self.instruction
        names = ", ".join(self.intents)
        return (
            "Classify the user's last message. Answer with exactly one word, the intent,"
            f" one of: {names}."
        )

    @property
    def models(self) -> tuple[str, ...]:
        """The specialists it may pick, the fallback last, each once."""
        return tuple(dict.fromkeys([*self.intents.values(), self.fallback]))


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where} must be a non-empty string, got {shown(value)}")
    return value


def _route(i: int, raw: Any) -> RouteConfig:
    where = f"[[routes]][{i}]"
    raw = known_table(raw, where, _KEYS)
    for key in ("name", "router", "intents", "fallback"):
        if key not in raw:
            raise ConfigError(f"{where} needs {key}")
    intents = raw["intents"]
    if not isinstance(intents, Mapping) or not intents:
        raise ConfigError(f"{where}.intents must be a table of intent = model")
    for intent, model in intents.items():
        _text(intent, f"{where}.intents key")
        _text(model, f"{where}.intents.{intent}")
    max_tokens = raw.get("max_tokens", 8)
    if type(max_tokens) is not int or not 1 <= max_tokens <= 256:
        raise ConfigError(f"{where}.max_tokens must be an integer from 1 to 256")
    warm = raw.get("warm", True)
    if type(warm) is not bool:
        raise ConfigError(f"{where}.warm must be true or false")
    route = RouteConfig(
        name=_text(raw["name"], f"{where}.name"),
        router=_text(raw["router"], f"{where}.router"),
        intents=dict(intents),
        fallback=_text(raw["fallback"], f"{where}.fallback"),
        instruction=str(raw.get("instruction", "")),
        max_tokens=max_tokens,
        warm=warm,
    )
    if route.name == route.router or route.name in route.models:
        raise ConfigError(f"{where}: the route {route.name!r} may not route to itself")
    return route


def routes_section(raw: Any) -> tuple[RouteConfig, ...]:
    if not isinstance(raw, list):
        raise ConfigError("[[routes]] must be an array of tables")
    routes = tuple(_route(i, item) for i, item in enumerate(raw))
    names = [r.name for r in routes]
    for r in routes:
        if names.count(r.name) > 1:
            raise ConfigError(f"[[routes]]: the name {r.name!r} is used twice")
        if r.router in names or any(m in names for m in r.models):
            raise ConfigError(f"[[routes]] {r.name!r}: a route may not route to a route")
    return routes
