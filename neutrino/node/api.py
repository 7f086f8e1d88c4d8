"""The node agent's API bodies, sans-IO: a load request checked into a :class:`LoadSpec`
(every field typed and bounded, the model file found inside the models folder), and
the error body every refusal carries."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from neutrino.node.harness import LoadSpec
from neutrino.node.table import NodeError

MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$")
_LOAD_KEYS = {
    "model", "harness", "file", "quant", "tensor_parallel", "devices", "memory_mb",
    "vram_mb", "context_length", "slots", "wait", "timeout_s",
}  # fmt: skip
MAX_WAIT_S = 600.0


def error_body(kind: str, message: str) -> dict[str, object]:
    return {"error": {"type": kind, "message": message}}


def _bad(message: str) -> NodeError:
    return NodeError(400, "invalid_request", message)


def _int(doc: Mapping[str, object], key: str, low: int, high: int, default: int) -> int:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad(f"{key} must be an integer from {low} to {high}, got {value!r}")
    return value


def _str(doc: Mapping[str, object], key: str, required: bool = False) -> str:
    value = doc.get(key, "")
    if not isinstance(value, str) or (required and not value) or len(value) > 1024:
        raise _bad(f"{key} must be a string" + (", not empty" if required else ""))
    return value


def model_id(value: object) -> str:
    if not isinstance(value, str) or not MODEL_ID.match(value):
        raise _bad("model must be an id of letters, digits and . _ : / @ + - (up to 128)")
    return value


def model_file(models_dir: str, name: str) -> Path:
    """``name`` inside ``models_dir``: relative, no ``..``, there (a link placed in the
    folder by its operator may lead elsewhere)."""
    if not name or os.path.isabs(name) or ".." in Path(name).parts:
        raise _bad(f"file must be a path inside the models folder, got {name!r}")
    path = Path(models_dir) / name
    if not path.exists():
        raise NodeError(404, "file_not_found", f"no file {name!r} in this node's models folder")
    return path


def load_spec(doc: object, models_dir: str, devices: int) -> tuple[LoadSpec, bool, float]:
    """A ``POST /models/load`` body: the spec, whether to wait for the load, how long."""
    if not isinstance(doc, dict):
        raise _bad("the body must be a JSON object")
    extra = sorted(set(doc) - _LOAD_KEYS)
    if extra:
        raise _bad(f"unknown field {extra[0]!r} (known: {', '.join(sorted(_LOAD_KEYS))})")
    model = model_id(doc.get("model"))
    listed = doc.get("devices", [])
    if not isinstance(listed, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and 0 <= d < devices for d in listed
    ):
        raise _bad(f"devices must be a list of device indexes below {devices}")
    if len(set(listed)) != len(listed):
        raise _bad("devices lists a device twice")
    tp = _int(doc, "tensor_parallel", 1, 64, len(listed) or 1)
    if listed and len(listed) != tp:
        raise _bad(f"tensor_parallel ({tp}) must be the number of devices ({len(listed)})")
    wait = doc.get("wait", False)
    if not isinstance(wait, bool):
        raise _bad("wait must be true or false")
    timeout = doc.get("timeout_s", 300.0)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout <= MAX_WAIT_S
    ):
        raise _bad(f"timeout_s must be a number of seconds in (0, {MAX_WAIT_S:g}]")
    spec = LoadSpec(
        model=model,
        harness=_str(doc, "harness", required=True),
        file=model_file(models_dir, _str(doc, "file", required=True)),
        quant=_str(doc, "quant"),
        tensor_parallel=tp,
        devices=tuple(sorted(listed)),
        memory_mb=_int(doc, "memory_mb", 0, 1 << 30, 0),
        vram_mb=_int(doc, "vram_mb", 0, 1 << 30, 0),
        context_length=_int(doc, "context_length", 0, 1 << 24, 0),
        slots=_int(doc, "slots", 0, 4096, 0),
    )
    return spec, wait, float(timeout)
