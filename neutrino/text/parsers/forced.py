"""Tool calls the engine was *forced* to emit by guided decoding (``tool_choice``).

With a named function, the engine decodes the function's arguments as one JSON object;
with ``required``, a JSON array of ``{"name", "parameters"}`` objects (at least one).
The whole output is the call(s): nothing is content unless it fails to parse.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from neutrino.text.parsers.base import CallIds, Delta, ToolParser


class ForcedToolParser(ToolParser):
    __slots__ = ("_buf", "_name")

    def __init__(
        self,
        *,
        tools: Sequence[Mapping[str, object]] | None = None,
        id_prefix: CallIds = "call_",
        name: str | None = None,
    ) -> None:
        super().__init__(tools=tools, id_prefix=id_prefix)
        self._name = name  # the named function; None for "required"
        self._buf: list[str] = []

    def feed(self, text: str) -> Delta:
        self._buf.append(text)  # nothing is final until the JSON is complete
        return Delta()

    def finish(self) -> Delta:
        text = "".join(self._buf)
        out = Delta()
        try:
            value = json.loads(text)
        except ValueError:
            out.content = text
            return out
        if self._name is not None and isinstance(value, dict):
            self._add_call(out, self._name, value)
        elif (
            self._name is None
            and isinstance(value, list)
            and value
            and all(
                isinstance(v, dict)
                and isinstance(v.get("name"), str)
                and isinstance(v.get("parameters", {}), dict)
                for v in value
            )
        ):
            for v in value:
                self._add_call(out, v["name"], v.get("parameters", {}))
        else:
            out.content = text
        return out


def forced_schema(
    tools: Sequence[tuple[str, Mapping[str, object] | None]], name: str | None
) -> dict[str, object]:
    """The JSON Schema the engine decodes under for ``tool_choice`` (named or required);
    ``tools``: each offered tool's name and parameters' schema."""

    def params(p: Mapping[str, object] | None) -> dict[str, object]:
        return dict(p) if p is not None else {"type": "object"}

    if name is not None:
        return next(params(p) for n, p in tools if n == name)
    return {
        "type": "array",
        "minItems": 1,
        "items": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"name": {"const": n}, "parameters": params(p)},
                    "required": ["name", "parameters"],
                }
                for n, p in tools
            ]
        },
    }
