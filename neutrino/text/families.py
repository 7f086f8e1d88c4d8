"""Model families: which chat template, tokenizer and stop tokens a model name selects."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, get_args

from neutrino import resources

__all__ = [
    "DEFAULT_TEMPLATES_PATH",
    "FamilyConfigError",
    "ModelFamily",
    "ToolCallArguments",
    "ToolCallIds",
    "UnknownFamily",
    "family_for_model",
    "load_families",
]

DEFAULT_TEMPLATES_PATH: Final = resources.TEMPLATES

# How a family's template expects ``tool_calls[].function.arguments``: left as given, parsed
# from a JSON string into an object (Llama 3, Qwen2.5 apply ``|tojson``), or serialised to a
# JSON string (DeepSeek-V3 concatenates it).
ToolCallArguments = Literal["as_is", "object", "string"]
# Which tool-call ids the family's template accepts: any (``as_is``), or only 9 ASCII letters
# and digits (``alnum9``, Mistral's), so ids are generated and mapped to fit (see
# neutrino.text.tool_call_ids).
ToolCallIds = Literal["as_is", "alnum9"]
# How an assistant turn's ``"content": null`` (a turn that only calls tools, as OpenAI clients
# send it) reaches the template: as None (``as_is``; an empty string only where the template
# fails on None), or always as an empty string (``empty``, for templates that would write the
# text "None" into the prompt).
NullContent = Literal["as_is", "empty"]


class UnknownFamily(KeyError):
    """No model family matches a model name and there is no default."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown model family"


class FamilyConfigError(ValueError):
    """The templates file is malformed."""


@dataclass(frozen=True, slots=True)
class ModelFamily:
    name: str
    template: str
    tokenizer: str
    bos_token: str | None
    eos_token: str | None
    stop_tokens: tuple[str, ...]
    match: tuple[str, ...]
    source: str
    license: str
    tool_call_arguments: ToolCallArguments = "as_is"
    tool_call_ids: ToolCallIds = "as_is"
    null_content: NullContent = "as_is"
    # Text standing in for an image part of a message when the prompt is rendered.
    image_placeholder: str = "<image>"
    # The template renders image parts itself: an image reaches it as ``{"type": "image"}``
    # in the message's list of parts (``image_placeholder`` is then not used).
    renders_images: bool = False
    # Output parsers (names in neutrino.text.parsers), None when the family has none.
    reasoning_parser: str | None = None
    tool_parser: str | None = None
    # The template itself opens the reasoning block at the end of the generation prompt.
    think_in_prompt: bool = False
    # A plain completion prompt starts with ``bos_token`` (the published tokenizer's
    # ``add_bos_token``); chat prompts get it only where the template writes it.
    add_bos_token: bool = True


def _str(entry: Mapping[str, object], key: str, where: str, *, optional: bool = False) -> Any:
    value = entry.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise FamilyConfigError(f"{where}: {key!r} must be a string")
    return value


def _bool(entry: Mapping[str, object], key: str, where: str, default: bool = False) -> bool:
    value = entry.get(key, default)
    if not isinstance(value, bool):
        raise FamilyConfigError(f"{where}: {key!r} must be true or false")
    return value


def _strings(entry: Mapping[str, object], key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise FamilyConfigError(f"{where}: {key!r} must be a list of strings")
    return tuple(value)


def _family(name: str, entry: Any) -> ModelFamily:
    where = f"family {name!r}"
    if not isinstance(entry, dict):
        raise FamilyConfigError(f"{where}: must be an object")
    arguments = entry.get("tool_call_arguments", "as_is")
    if arguments not in get_args(ToolCallArguments):
        raise FamilyConfigError(f"{where}: bad tool_call_arguments {arguments!r}")
    ids = entry.get("tool_call_ids", "as_is")
    if ids not in get_args(ToolCallIds):
        raise FamilyConfigError(f"{where}: bad tool_call_ids {ids!r}")
    null_content = entry.get("null_content", "as_is")
    if null_content not in get_args(NullContent):
        raise FamilyConfigError(f"{where}: bad null_content {null_content!r}")
    return ModelFamily(
        name=name,
        template=_str(entry, "template", where),
        tokenizer=_str(entry, "tokenizer", where),
        bos_token=_str(entry, "bos_token", where, optional=True),
        eos_token=_str(entry, "eos_token", where, optional=True),
        stop_tokens=_strings(entry, "stop_tokens", where),
        match=tuple(m.lower() for m in _strings(entry, "match", where)),
        source=_str(entry, "source", where),
        license=_str(entry, "license", where),
        tool_call_arguments=arguments,
        tool_call_ids=ids,
        null_content=null_content,
        image_placeholder=_str(entry, "image_placeholder", where, optional=True) or "<image>",
        renders_images=_bool(entry, "renders_images", where),
        reasoning_parser=_str(entry, "reasoning_parser", where, optional=True),
        tool_parser=_str(entry, "tool_parser", where, optional=True),
        think_in_prompt=_bool(entry, "think_in_prompt", where),
        add_bos_token=_bool(entry, "add_bos_token", where, default=True),
    )


def load_families(path: Path | None = None) -> dict[str, ModelFamily]:
    """Read model families from ``path`` (default: neutrino.resources.TEMPLATES)."""
    path = DEFAULT_TEMPLATES_PATH if path is None else path
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise FamilyConfigError(f"cannot read model families from {path}: {e}") from e
    families = doc.get("families") if isinstance(doc, dict) else None
    if not isinstance(families, dict):
        raise FamilyConfigError(f"{path}: expected an object with a 'families' object")
    return {name: _family(name, entry) for name, entry in families.items()}


def family_for_model(
    model: str, families: Mapping[str, ModelFamily], default: str | None = None
) -> ModelFamily:
    """The family with the longest ``match`` substring of ``model`` (case-insensitive).

    Ties go to the family listed first. Without a match, ``families[default]``; without a
    default, :class:`UnknownFamily`.
    """
    lowered = model.lower()
    best: ModelFamily | None = None
    best_len = 0
    for family in families.values():
        for needle in family.match:
            if len(needle) > best_len and needle in lowered:
                best, best_len = family, len(needle)
    if best is not None:
        return best
    if default is not None:
        try:
            return families[default]
        except KeyError:
            raise UnknownFamily(f"default model family {default!r} is not defined") from None
    raise UnknownFamily(f"no chat template is known for model {model!r}")
