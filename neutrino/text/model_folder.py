"""What a Hugging Face model folder says about serving its model (``[model] models``).

Read once, at start-up, as vLLM reads a folder (nothing in it is executed; nothing is
downloaded):

* ``tokenizer.json`` and ``tokenizer_config.json``: the tokenizer
  (:mod:`neutrino.text.local_files`), and the config's ``chat_template`` (a string, or a list
  of named templates: the one named ``default``), else ``chat_template.jinja``, else
  ``chat_template.json``'s;
* ``generation_config.json``: the EOS ids (``eos_token_id``, one or a list: they stop
  generation too) and the sampling the model card asks for (``temperature``, ``top_p``,
  ``top_k``, ``min_p``, ``repetition_penalty``), applied where a request does not say;
* ``config.json``: ``model_type`` and ``architectures``, which choose the family when the
  served name matches none, and ``max_position_embeddings``.

:func:`read_model_folder` raises :class:`ModelFolderError` naming the file at fault.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

__all__ = ["SAMPLING_DEFAULTS", "ModelFolder", "ModelFolderError", "read_model_folder"]

# generation_config.json keys applied as sampling defaults, and their bounds.
SAMPLING_DEFAULTS: Final[Mapping[str, tuple[float, float]]] = {
    "temperature": (0.0, 2.0),
    "top_p": (1e-9, 1.0),
    "top_k": (-1, 1 << 20),
    "min_p": (0.0, 1.0),
    "repetition_penalty": (1e-9, 2.0),
}
_MAX_FILE: Final = 16 * 1024 * 1024  # a config file larger than this is not one


class ModelFolderError(ValueError):
    """A model folder that cannot be served as it is (the message names the file)."""


@dataclass(frozen=True, slots=True)
class ModelFolder:
    path: Path
    chat_template: str | None = None
    template_from: str = ""  # the file the template came from ("": none)
    eos_token_ids: tuple[int, ...] = ()
    defaults: Mapping[str, float] = field(default_factory=dict)  # sampling, by field
    model_type: str = ""
    architectures: tuple[str, ...] = ()
    context_length: int = 0  # max_position_embeddings (0: not said)

    def sources(self) -> dict[str, str]:
        """What was taken from which file (for the log and the model's card)."""
        out = {"tokenizer": "tokenizer.json"}
        if self.template_from:
            out["chat_template"] = self.template_from
        if self.eos_token_ids or self.defaults:
            out["generation"] = "generation_config.json"
        if self.model_type or self.architectures:
            out["model_type"] = "config.json"
        return out


def read_model_folder(path: str | Path) -> ModelFolder:
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ModelFolderError(f"{folder}: not a folder")
    if not (folder / "tokenizer.json").is_file():
        raise ModelFolderError(f"{folder}: no tokenizer.json in this folder")
    template, template_from = _template(folder)
    generation = _json(folder / "generation_config.json")
    config = _json(folder / "config.json")
    return ModelFolder(
        path=folder,
        chat_template=template,
        template_from=template_from,
        eos_token_ids=_eos_ids(generation, folder / "generation_config.json"),
        defaults=_defaults(generation, folder / "generation_config.json"),
        model_type=_text(config.get("model_type")),
        architectures=tuple(a for a in config.get("architectures") or () if isinstance(a, str)),
        context_length=_positive_int(config.get("max_position_embeddings")),
    )


def _json(path: Path) -> dict[str, Any]:
    """A JSON object file's content ({} when the file is absent)."""
    if not path.is_file():
        return {}
    if path.stat().st_size > _MAX_FILE:
        raise ModelFolderError(f"{path}: larger than {_MAX_FILE} bytes")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:  # also UnicodeDecodeError
        raise ModelFolderError(f"{path}: not a JSON file ({e})") from None
    if not isinstance(doc, dict):
        raise ModelFolderError(f"{path}: not a JSON object")
    return doc


def _template(folder: Path) -> tuple[str | None, str]:
    value = _json(folder / "tokenizer_config.json").get("chat_template")
    if isinstance(value, list):  # named templates: the default one
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        value = named.get("default")
    if isinstance(value, str) and value:
        return value, "tokenizer_config.json"
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8"), jinja.name
    value = _json(folder / "chat_template.json").get("chat_template")
    if isinstance(value, str) and value:
        return value, "chat_template.json"
    return None, ""


def _eos_ids(doc: Mapping[str, Any], where: Path) -> tuple[int, ...]:
    value = doc.get("eos_token_id")
    ids = value if isinstance(value, list) else [] if value is None else [value]
    if not all(type(i) is int and 0 <= i < (1 << 31) for i in ids):
        raise ModelFolderError(f"{where}: eos_token_id must be an id or a list of ids")
    return tuple(ids)


def _defaults(doc: Mapping[str, Any], where: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, (low, high) in SAMPLING_DEFAULTS.items():
        value = doc.get(key)
        if value is None:
            continue
        if type(value) not in (int, float) or not math.isfinite(value) or not low <= value <= high:
            raise ModelFolderError(f"{where}: {key} must be a number from {low} to {high}")
        out[key] = value
    if out.get("top_k") == 0:  # transformers' "off"
        out["top_k"] = -1
    return out


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _positive_int(value: object) -> int:
    return value if type(value) is int and value > 0 else 0
