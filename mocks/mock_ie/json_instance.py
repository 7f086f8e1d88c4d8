"""A deterministic JSON value for a JSON Schema: what the mock 'decodes' under a guided query.

Covers the common keywords (type, properties, required, items, minItems, enum, const,
anyOf/oneOf, minimum); anything it does not know becomes a string.
"""

from __future__ import annotations

from typing import Any


def instance(schema: Any, words: list[str], depth: int = 0) -> Any:
    if not isinstance(schema, dict) or depth > 8:
        return words[depth % len(words)] if words else "x"
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return instance(options[0], words, depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties", {}) if isinstance(schema.get("properties"), dict) else {}
        return {
            name: instance(sub, words[i + 1 :] + words[: i + 1], depth + 1)
            for i, (name, sub) in enumerate(props.items())
        }
    if kind == "array":
        count = max(1, int(schema.get("minItems", 1)))
        return [
            instance(schema.get("items", {}), words[i:] + words[:i], depth + 1)
            for i in range(count)
        ]
    if kind == "integer":
        return int(schema.get("minimum", 0)) + len(words[0] if words else "")
    if kind == "number":
        return float(schema.get("minimum", 0)) + 0.5
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return " ".join(words[:3]) if words else "x"
