"""`make bench`'s typed-request section: what decoding and checking one request costs.

The pipeline's request model had to be typed and frozen; the candidates were msgspec
Structs and pydantic models. Measured here, in one process, on the body `make bench`
sends (a system and a user message, max_tokens, ignore_eos):

* the whole front-end step as Neutrino runs it: orjson decode, then the OpenAI parser
  building the frozen request (every field checked, the request id made);
* decoding the same body straight into typed wire classes, shape checks only: msgspec
  (``msgspec.json.Decoder(type)``) and pydantic (``model_validate_json``);
* building one frozen request object of 14 fields: a msgspec Struct, a frozen
  dataclass, a frozen pydantic model.

Run alone: ``python -m bench.decode``.
"""

from __future__ import annotations

import dataclasses
import timeit
from collections.abc import Callable
from typing import Any

import msgspec
import orjson
import pydantic

from neutrino.config import LimitsConfig
from neutrino.frontends.http.openai.parse import parse_chat

BODY = orjson.dumps(
    {
        "model": "qwen2.5-mock",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Write a short note about the weather on day 12345."},
        ],
        "max_tokens": 1,
        "ignore_eos": True,
    }
)


class _WireMessage(msgspec.Struct, frozen=True):
    role: str
    content: str | list[dict[str, Any]] | None = None


class _WireBody(msgspec.Struct, frozen=True):
    model: str
    messages: list[_WireMessage]
    max_tokens: int | None = None
    ignore_eos: bool = False
    temperature: float | None = None
    top_p: float | None = None
    stream: bool = False


class _PydMessage(pydantic.BaseModel):
    role: str
    content: str | list[dict[str, Any]] | None = None


class _PydBody(pydantic.BaseModel):
    model: str
    messages: list[_PydMessage]
    max_tokens: int | None = None
    ignore_eos: bool = False
    temperature: float | None = None
    top_p: float | None = None
    stream: bool = False


# One request-sized object, three ways: 14 fields of the same names, types and defaults.
_FIELDS: list[tuple[str, Any, Any]] = [
    ("a", int, 0),
    ("b", float, 1.0),
    ("c", float, 1.0),
    ("d", int, -1),
    ("e", float, 0.0),
    ("f", int | None, None),
    ("g", float, 0.0),
    ("h", float, 0.0),
    ("i", float, 1.0),
    ("j", int, 0),
    ("k", bool, False),
    ("m", bool, False),
    ("n", int, 0),
    ("o", str, ""),
]
_Struct = msgspec.defstruct("_Struct", _FIELDS, frozen=True)
_Dataclass = dataclasses.make_dataclass(
    "_Dataclass", [(n, t, dataclasses.field(default=v)) for n, t, v in _FIELDS],
    frozen=True, slots=True,
)  # fmt: skip
_Pydantic = pydantic.create_model(  # type: ignore[call-overload]
    "_Pydantic", __config__=pydantic.ConfigDict(frozen=True), **{n: (t, v) for n, t, v in _FIELDS}
)


def _us(fn: Callable[[], object], number: int) -> float:
    best = min(timeit.repeat(fn, number=number, repeat=5))
    return 1e6 * best / number


def measure(number: int = 20_000) -> dict[str, float]:
    """Microseconds per call of each way (best of five runs of ``number`` calls)."""
    limits = LimitsConfig()
    wire = msgspec.json.Decoder(_WireBody)
    return {
        "orjson + parse_chat (Neutrino)": _us(
            lambda: parse_chat(orjson.loads(BODY), limits), number
        ),
        "orjson decode only": _us(lambda: orjson.loads(BODY), number),
        "msgspec typed decode": _us(lambda: wire.decode(BODY), number),
        "pydantic model_validate_json": _us(lambda: _PydBody.model_validate_json(BODY), number),
        "msgspec Struct, 14 fields": _us(lambda: _Struct(a=1, b=0.5, f=3, o="x"), number),
        "frozen dataclass, 14 fields": _us(lambda: _Dataclass(a=1, b=0.5, f=3, o="x"), number),
        "frozen pydantic model, 14 fields": _us(lambda: _Pydantic(a=1, b=0.5, f=3, o="x"), number),
    }


def print_decode(report: dict[str, float]) -> None:
    print("\nTyped request (one process, us per call, best of 5):")
    for name, us in report.items():
        print(f"  {name:<36} {us:7.2f}")
    ratio = report["pydantic model_validate_json"] / report["msgspec typed decode"]
    build = report["frozen pydantic model, 14 fields"] / report["msgspec Struct, 14 fields"]
    print(
        f"  msgspec decodes {ratio:.1f}x faster than pydantic and builds a frozen object "
        f"{build:.1f}x faster: the pipeline's request types are msgspec Structs"
    )


if __name__ == "__main__":
    print_decode(measure())
