"""What an upstream's model listing says (sans-IO): the models of its ``GET /v1/models``,
with the context length vLLM states (``max_model_len``) and, for a server that loads
models on demand (llama.cpp's server in router mode: ``llama-server --models-dir``), each
model's state and why its last load failed.

Such a server holds at most ``max_instances`` models at once (its ``GET /props``): that
count is the budget Neutrino keeps it within (each model weighs one), so Neutrino, which
knows what each model is answering, chooses what to unload rather than the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neutrino.engine.messages import ModelState

LOAD_PATH = "/models/load"  # POST {"model": name}: answers at once; the load runs on
UNLOAD_PATH = "/models/unload"

_STATES = {
    "loaded": ModelState.LOADED,
    "loading": ModelState.LOADING,
    "unloaded": ModelState.UNLOADED,
}


@dataclass(frozen=True, slots=True)
class Listed:
    """One model as the upstream lists it."""

    context: int = 0  # 0: not said
    state: ModelState | None = None  # None: the upstream does not load models on demand
    failed: str = ""  # why its last load failed ("" if it did not)


def models_of(doc: Any) -> dict[str, Listed]:
    """The models of a ``/v1/models`` answer, by id (empty when it is not one)."""
    data = doc.get("data") if isinstance(doc, dict) else None
    models: dict[str, Listed] = {}
    for m in data if isinstance(data, list) else ():
        if not isinstance(m, dict) or not isinstance(m.get("id"), str):
            continue
        ctx = m.get("max_model_len")
        state, failed = _status(m.get("status"))
        models[m["id"]] = Listed(ctx if type(ctx) is int and ctx > 0 else 0, state, failed)
    return models


def _status(status: Any) -> tuple[ModelState | None, str]:
    """llama.cpp's router: ``{"value": "loaded"|"loading"|"unloaded", "failed": true,
    "exit_code": 1}`` (anything else: not a model loaded on demand)."""
    if not isinstance(status, dict):
        return None, ""
    value = status.get("value")
    state = _STATES.get(value) if isinstance(value, str) else None
    if state is None:
        return None, ""
    if state is ModelState.UNLOADED and status.get("failed") is True:
        code = status.get("exit_code")
        return state, f"its process exited with {code}" if type(code) is int else "it failed"
    return state, ""


def loads_on_demand(models: dict[str, Listed]) -> bool:
    return any(m.state is not None for m in models.values())


def router_max(doc: Any) -> int | None:
    """From llama.cpp's ``GET /props``: how many models its router holds at once (0: no
    limit); None when the server is not a router."""
    if not isinstance(doc, dict) or doc.get("role") != "router":
        return None
    most = doc.get("max_instances")
    return most if type(most) is int and most > 0 else 0
