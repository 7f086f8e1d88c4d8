"""Shared test support: running a parser over chunks and merging its deltas."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from neutrino.text.parsers import Delta, reasoning_parser, tool_parser

Tools = Sequence[Mapping[str, Any]]


def tools(*names: str) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": n, "parameters": {}}} for n in names]


# Tools whose parameters are typed every way the XML formats type values (qwen3_coder,
# minimax_m2, seed_oss, step3, DSML and the others' cases).
_TYPED_PROPERTIES = {
    "city": {"type": "string"},
    "days": {"type": "integer"},
    "scale": {"type": "number"},
    "strict": {"type": "boolean"},
    "tags": {"type": "array"},
    "filter": {"type": "object"},
    "limit": {"type": ["integer", "null"]},
}
TYPED_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": _TYPED_PROPERTIES},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}},
        },
    },
]


@dataclass(frozen=True)
class Case:
    """A raw model output and what it must parse to."""

    id: str
    kind: str  # "reasoning" | "tool"
    parser: str
    text: str
    content: str
    reasoning: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    tools: Tools | None = None
    # False: malformed on purpose, markers may legitimately end up in the content
    wellformed: bool = True
    markers: tuple[str, ...] = ()
    ids: tuple[str, ...] | None = None  # the calls' ids (None: call_0, call_1, ...)
    reference: str = ""  # the public reference the expectation follows, where one is named


@dataclass
class Result:
    content: str
    reasoning: str
    calls: list[tuple[str | None, str | None, str]]
    final_calls: list[tuple[str, str, str]]


def merge(deltas: Iterable[Delta]) -> tuple[str, str, list[tuple[str | None, str | None, str]]]:
    """Content and reasoning concatenated; tool-call deltas accumulated per index."""
    content: list[str] = []
    reasoning: list[str] = []
    acc: dict[int, list[Any]] = {}
    for d in deltas:
        content.append(d.content)
        reasoning.append(d.reasoning)
        for tc in d.tool_calls:
            if tc.index not in acc:
                assert tc.index == len(acc), "tool-call indexes must appear in order"
                assert tc.id is not None and tc.name is not None, "first delta needs id+name"
                acc[tc.index] = [tc.id, tc.name, ""]
            entry = acc[tc.index]
            entry[0] = entry[0] if entry[0] is not None else tc.id
            entry[1] = entry[1] if entry[1] is not None else tc.name
            entry[2] += tc.arguments
    calls = [(e[0], e[1], e[2]) for _, e in sorted(acc.items())]
    return "".join(content), "".join(reasoning), calls


def run(case: Case, chunks: Iterable[str]) -> Result:
    deltas: list[Delta] = []
    if case.kind == "reasoning":
        rp = reasoning_parser(case.parser)(**case.kwargs)
        deltas.extend(rp.feed(c) for c in chunks)
        deltas.append(rp.finish())
        final: list[tuple[str, str, str]] = []
    else:
        tp = tool_parser(case.parser)(tools=case.tools, **case.kwargs)
        deltas.extend(tp.feed(c) for c in chunks)
        deltas.append(tp.finish())
        final = [(c.id, c.name, c.arguments) for c in tp.calls]
    content, reasoning, calls = merge(deltas)
    return Result(content, reasoning, calls, final)


def split_at(text: str, positions: Iterable[int]) -> list[str]:
    cuts = sorted(set(positions))
    pieces: list[str] = []
    last = 0
    for p in cuts:
        pieces.append(text[last:p])
        last = p
    pieces.append(text[last:])
    return pieces


def check_expected(case: Case) -> Result:
    """The non-streamed parse of ``case`` matches its expectations."""
    r = run(case, [case.text])
    assert r.content == case.content
    assert r.reasoning == case.reasoning
    assert [(n, json.loads(a)) for _, n, a in r.final_calls] == case.calls
    for i, (call_id, name, args) in enumerate(r.final_calls):
        assert call_id == (f"call_{i}" if case.ids is None else case.ids[i])
        assert args == json.dumps(json.loads(args), ensure_ascii=False)
        assert isinstance(json.loads(args), dict)
        assert r.calls[i] == (call_id, name, args)
    assert len(r.calls) == len(r.final_calls)
    if case.wellformed:
        for marker in case.markers:
            assert marker not in r.content
            assert marker not in r.reasoning
    return r
