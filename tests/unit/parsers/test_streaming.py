"""Streaming = non-streamed: any chunking of a sample gives the same merged result.

Merging deltas: content and reasoning concatenated; tool-call deltas accumulated per index
(id/name from the first delta that has them, arguments concatenated).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.parsers.cases import ALL, ALL_CASES, case_id
from tests.unit.parsers.support import Case, Result, run, split_at


def _same(streamed: Result, whole: Result, case: Case) -> None:
    assert streamed.content == whole.content
    assert streamed.reasoning == whole.reasoning
    assert streamed.calls == whole.calls
    assert streamed.final_calls == whole.final_calls
    assert [(i, n, a) for i, n, a in streamed.calls] == [(i, n, a) for i, n, a in whole.final_calls]
    if case.wellformed:
        for marker in case.markers:
            assert marker not in streamed.content
            assert marker not in streamed.reasoning


@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_every_single_split(case: Case) -> None:
    whole = run(case, [case.text])
    for i in range(len(case.text) + 1):
        _same(run(case, [case.text[:i], case.text[i:]]), whole, case)


@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_char_by_char(case: Case) -> None:
    _same(run(case, list(case.text)), run(case, [case.text]), case)


@pytest.mark.parametrize("family", sorted(ALL))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_random_multi_splits(family: str, data: st.DataObject) -> None:
    case = data.draw(st.sampled_from(ALL[family]), label="case")
    n = len(case.text)
    cuts = data.draw(st.lists(st.integers(0, n), max_size=min(n, 24)), label="cuts")
    chunks = split_at(case.text, cuts)
    _same(run(case, chunks), run(case, [case.text]), case)


@pytest.mark.parametrize("family", sorted(ALL))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_concatenated_samples(family: str, data: st.DataObject) -> None:
    """Samples glued together (content, calls, malformed blocks mixed) still stream right."""
    cases = data.draw(st.lists(st.sampled_from(ALL[family]), min_size=2, max_size=4))
    first = cases[0]
    text = "".join(c.text for c in cases)
    case = Case("glued", first.kind, first.parser, text, "", kwargs=first.kwargs, tools=first.tools)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=30))
    _same(run(case, split_at(text, cuts)), run(case, [text]), case)


_GENERIC = [
    " ",
    "\n",
    "a",
    "é",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    '"',
    "\\",
    ";",
    ":",
    "=",
    ",",
    "<",
    "|",
    ">",
    "x=1",
    '{"name": "f", "arguments": {}}',
    '{"name": "f", "parameters": {"a": 1}}',
    "f(a=1)",
    "```json\n",
    "\n```",
    "functions.f:0",
    "function",
    "to=functions.f",
    "json",
]


def _fragments(family: str) -> list[str]:
    frags = list(_GENERIC)
    for case in ALL[family]:
        for marker in case.markers:
            frags += [marker, marker[: len(marker) // 2], marker[len(marker) // 2 :]]
    frags += [
        "<|channel|>",
        "analysis",
        "final",
        "commentary",
        "<|message|>",
        "[TOOL_CALLS]",
        "[ARGS]",
    ]
    return frags


@pytest.mark.parametrize("family", sorted(ALL))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_fuzz_marker_soup(family: str, data: st.DataObject) -> None:
    """Random mixes of markers, marker halves and JSON/Python punctuation: no crash, and
    chunking never changes the result."""
    first = ALL[family][0]
    parts = data.draw(st.lists(st.sampled_from(_fragments(family)), max_size=40))
    text = "".join(parts)
    case = Case("soup", first.kind, first.parser, text, "", kwargs=first.kwargs)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=30))
    _same(run(case, split_at(text, cuts)), run(case, [text]), case)
