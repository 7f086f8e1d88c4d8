"""Structured output: the constraint checked on the way in and the result on the way out.

The constraint comes from OpenAI's ``response_format`` or vLLM's ``structured_outputs``
(or its older ``guided_json``, ``guided_regex``, ``guided_choice``, ``guided_grammar``).

The engine constrains decoding (the schema travels in ``TextQuery.guided``); Neutrino
checks the request's schema before sending it, and with ``strict`` validates the final
text against it, so a client never gets a "valid" response the engine broke.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

import jsonschema
import orjson

from neutrino.engine.messages import Guided, GuidedMode
from neutrino.errors import bad_request, unsupported

Validator = Callable[[str], str | None]  # final text -> problem, or None when it is valid
# An output constraint: what the engine decodes under, and the check of the final text.
Constraint = tuple[Guided | None, Validator | None]
MAX_SCHEMA_DEPTH = 64  # [limits] max_schema_depth's default


def parse_response_format(
    fmt: object, max_depth: int = MAX_SCHEMA_DEPTH
) -> tuple[Guided | None, Validator | None]:
    """The engine constraint and the output check for an OpenAI ``response_format``
    (its schema nested at most ``max_depth`` deep)."""
    if fmt is None:
        return None, None
    plain = format_kind(fmt, "response_format")
    if plain is not None:
        return plain
    assert isinstance(fmt, dict)
    spec = fmt.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise bad_request(
            "response_format.json_schema needs a name and a schema", "response_format.json_schema"
        )
    strict = spec.get("strict", False)
    if not isinstance(strict, bool):
        raise bad_request(
            "response_format.json_schema.strict must be a boolean",
            "response_format.json_schema.strict",
        )
    return json_schema(
        spec.get("schema", {}), strict, "response_format.json_schema.schema", max_depth
    )


def format_kind(fmt: object, where: str) -> Constraint | None:
    """An OpenAI format object (chat's ``response_format``, Responses' ``text.format``)
    up to its kind: text (no constraint), a JSON object's constraint, or None for a
    ``json_schema``, whose schema the caller reads where its API keeps it."""
    if not isinstance(fmt, dict) or not isinstance(fmt.get("type"), str):
        raise bad_request(f"{where} must be an object with a type", where)
    kind = fmt["type"]
    if kind == "text":
        return None, None
    if kind == "json_object":
        return json_object()
    if kind != "json_schema":
        raise bad_request(f"{where}.type must be 'text', 'json_object' or 'json_schema'", where)
    return None


def json_object() -> tuple[Guided, Validator]:
    """Any JSON object: the engine constraint and the check of the final text."""
    return Guided(GuidedMode.JSON_OBJECT), _json_object


def json_schema(
    schema: object, strict: bool, param: str, max_depth: int = MAX_SCHEMA_DEPTH
) -> tuple[Guided, Validator | None]:
    """The engine constraint of a JSON schema (checked; named ``param`` in errors) and,
    when ``strict``, the check of the final text against it."""
    cls, checked = _checked_schema(schema, param, max_depth)
    guided = Guided(GuidedMode.JSON_SCHEMA, json.dumps(checked, ensure_ascii=False))
    return guided, (_schema_validator(cls(checked)) if strict else None)


def _checked_schema(schema: object, param: str, max_depth: int) -> tuple[Any, dict[str, object]]:
    """The validator class for a client's JSON schema, once the schema is known valid
    and no deeper than ``max_depth``; every problem is a 400 naming ``param``."""
    if not isinstance(schema, dict):
        raise bad_request(f"{param} must be an object", param)
    if nested_deeper(schema, max_depth):
        raise bad_request(f"the JSON schema is nested more than {max_depth} levels deep", param)
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise bad_request(f"the JSON schema is invalid: {exc.message}", param) from None
    except Exception as exc:
        raise bad_request(f"the JSON schema cannot be checked: {_named(exc)}", param) from None
    return cls, schema


def _named(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}" if str(exc) else type(exc).__name__


def nested_deeper(value: object, limit: int) -> bool:
    """Whether JSON ``value`` nests objects and arrays more than ``limit`` deep (found
    without recursion, so any depth is safe to ask about)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[object] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


# vLLM's structured outputs (``structured_outputs`` and the older ``guided_*`` fields).
VLLM_KINDS = ("json", "regex", "choice", "grammar", "json_object")
MAX_CHOICES = 256
MAX_CHOICE_CHARS = 4096
MAX_PATTERN_CHARS = 65536
# Options that change the constraint: refused rather than dropped when set.
_VLLM_REFUSED = ("whitespace_pattern", "structural_tag")
_VLLM_REFUSED_IF_TRUE = ("disable_any_whitespace", "disable_additional_properties")
_VLLM_IGNORED = ("disable_fallback", "backend", "_backend")  # how, not what, to decode


def parse_structured_outputs(
    spec: object, param: str = "structured_outputs", max_depth: int = 0
) -> Guided:
    """The engine constraint for vLLM's ``structured_outputs`` object."""
    if not isinstance(spec, dict):
        raise bad_request(f"{param} must be an object", param)
    known = {*VLLM_KINDS, *_VLLM_REFUSED, *_VLLM_REFUSED_IF_TRUE, *_VLLM_IGNORED}
    for key, value in spec.items():
        if key not in known:
            raise bad_request(f"{param}.{key} is not a structured output option", param)
        if value not in (None, False) and (key in _VLLM_REFUSED or key in _VLLM_REFUSED_IF_TRUE):
            raise unsupported(f"{param}.{key} is not supported", f"{param}.{key}")
    given = [k for k in VLLM_KINDS if spec.get(k) not in (None, False)]
    if len(given) != 1:
        raise bad_request(f"{param} needs exactly one of {', '.join(VLLM_KINDS)}", param)
    return vllm_constraint(given[0], spec[given[0]], f"{param}.{given[0]}", max_depth)


def vllm_constraint(kind: str, value: object, param: str, max_depth: int = 0) -> Guided:
    """One vLLM constraint (``json``, ``regex``, ``choice``, ``grammar``, ``json_object``);
    a schema nests at most ``max_depth`` deep (0: MAX_SCHEMA_DEPTH)."""
    if kind == "json":
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except (ValueError, RecursionError):
                raise bad_request(f"{param} must be a JSON schema", param) from None
        _, schema = _checked_schema(value, param, max_depth or MAX_SCHEMA_DEPTH)
        return Guided(GuidedMode.JSON_SCHEMA, json.dumps(schema, ensure_ascii=False))
    if kind == "json_object":
        if value is not True:
            raise bad_request(f"{param} must be true", param)
        return Guided(GuidedMode.JSON_OBJECT)
    if kind == "choice":
        if (
            not isinstance(value, list)
            or not 0 < len(value) <= MAX_CHOICES
            or not all(isinstance(c, str) and 0 < len(c) <= MAX_CHOICE_CHARS for c in value)
        ):
            raise bad_request(
                f"{param} must be 1 to {MAX_CHOICES} non-empty strings "
                f"of at most {MAX_CHOICE_CHARS} characters",
                param,
            )
        return Guided(GuidedMode.CHOICE, choices=list(value))
    if not isinstance(value, str) or not 0 < len(value) <= MAX_PATTERN_CHARS:
        raise bad_request(
            f"{param} must be a non-empty string of at most {MAX_PATTERN_CHARS} characters", param
        )
    if kind == "regex":
        try:
            re.compile(value)
        except re.error as exc:
            raise bad_request(f"{param} is not a valid regular expression: {exc}", param) from None
        return Guided(GuidedMode.REGEX, pattern=value)
    return Guided(GuidedMode.GRAMMAR, pattern=value)


def _json_object(text: str) -> str | None:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return "the output is not valid JSON"
    return None if isinstance(value, dict) else "the output is not a JSON object"


def _schema_validator(validator: jsonschema.protocols.Validator) -> Validator:
    def check(text: str) -> str | None:
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return "the output is not valid JSON"
        try:
            error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        except Exception as exc:
            return f"the output could not be checked against the schema: {_named(exc)}"
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path) or "the top level"
        return f"the output does not match the schema at {where}: {error.message}"

    return check
