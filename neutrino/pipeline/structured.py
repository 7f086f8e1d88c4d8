"""Structured output: ``response_format`` checked on the way in and the result on the way out.

The engine constrains decoding (the schema travels in ``TextQuery.guided``); Neutrino
checks the request's schema before sending it, and with ``strict`` validates the final
text against it, so a client never gets a "valid" response the engine broke.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import jsonschema
import orjson

from neutrino.engine.messages import Guided, GuidedMode
from neutrino.errors import bad_request

Validator = Callable[[str], str | None]  # final text -> problem, or None when it is valid


def parse_response_format(fmt: Any) -> tuple[Guided | None, Validator | None]:
    """The engine constraint and the output check for an OpenAI ``response_format``."""
    param = "response_format"
    if fmt is None:
        return None, None
    if not isinstance(fmt, dict) or not isinstance(fmt.get("type"), str):
        raise bad_request("response_format must be an object with a type", param)
    kind = fmt["type"]
    if kind == "text":
        return None, None
    if kind == "json_object":
        return Guided(GuidedMode.JSON_OBJECT), _json_object
    if kind != "json_schema":
        raise bad_request(
            "response_format.type must be 'text', 'json_object' or 'json_schema'", param
        )
    spec = fmt.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise bad_request(
            "response_format.json_schema needs a name and a schema", "response_format.json_schema"
        )
    schema = spec.get("schema", {})
    if not isinstance(schema, dict):
        raise bad_request(
            "response_format.json_schema.schema must be an object",
            "response_format.json_schema.schema",
        )
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise bad_request(
            f"the JSON schema is invalid: {exc.message}", "response_format.json_schema.schema"
        ) from None
    strict = spec.get("strict", False)
    if not isinstance(strict, bool):
        raise bad_request(
            "response_format.json_schema.strict must be a boolean",
            "response_format.json_schema.strict",
        )
    guided = Guided(GuidedMode.JSON_SCHEMA, json.dumps(schema, ensure_ascii=False))
    return guided, (_schema_validator(cls(schema)) if strict else None)


def _json_object(text: str) -> str | None:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return "the output is not valid JSON"
    return None if isinstance(value, dict) else "the output is not a JSON object"


def _schema_validator(validator: Any) -> Validator:
    def check(text: str) -> str | None:
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return "the output is not valid JSON"
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path) or "the top level"
        return f"the output does not match the schema at {where}: {error.message}"

    return check
