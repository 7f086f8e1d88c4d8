"""Validate payloads against OpenAI's official OpenAPI spec in ../shared/reference."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_PATH = Path(__file__).resolve().parents[3] / "shared" / "reference" / "openai-openapi.json"
_URI = "urn:openai-openapi"


def _nullable(node: Any) -> Any:
    """OpenAPI 3.0 ``nullable: true`` -> JSON Schema "null is allowed"."""
    if isinstance(node, list):
        return [_nullable(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _nullable(v) for k, v in node.items()}
    if out.pop("nullable", False) is True:
        if "type" in out:
            t = out["type"]
            out["type"] = [*t, "null"] if isinstance(t, list) else [t, "null"]
            if "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        else:
            return {"anyOf": [out, {"type": "null"}]}
    return out


@functools.cache
def _registry() -> Registry:
    spec = json.loads(SPEC_PATH.read_text())
    doc = _nullable(copy.deepcopy(spec))
    # OpenAI streams completions as CreateCompletionResponse objects whose non-final
    # chunks carry "finish_reason": null (the spec has no separate chunk schema).
    chunk = copy.deepcopy(doc["components"]["schemas"]["CreateCompletionResponse"])
    fin = chunk["properties"]["choices"]["items"]["properties"]["finish_reason"]
    fin["type"] = [fin["type"], "null"]
    fin["enum"] = [*fin["enum"], None]
    doc["components"]["schemas"]["CreateCompletionStreamChunk"] = chunk
    # Registry.with_resource has no return annotation (so it is Any to mypy).
    registry: Registry = Registry().with_resource(_URI, Resource.from_contents(doc, DRAFT202012))
    return registry


def validate(instance: Any, schema_name: str) -> None:
    """Raise jsonschema.ValidationError unless ``instance`` fits ``components/schemas/NAME``."""
    schema = {"$ref": f"{_URI}#/components/schemas/{schema_name}"}
    jsonschema.Draft202012Validator(schema, registry=_registry()).validate(instance)
