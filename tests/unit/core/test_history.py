"""The history ring: snapshots of plain data, bounded in entries and in bytes."""

from __future__ import annotations

import dataclasses
from typing import Any

from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.pipeline.history import MAX_TEXT, History, HistoryEntry
from neutrino.pipeline.state import Lifecycle, State


def _ended(state: State = State.COMPLETE) -> Lifecycle:
    lc = Lifecycle()
    lc.advance(State.QUEUED)
    lc.advance(State.PROCESSING)
    lc.advance(state)
    return lc


def _plain(value: object) -> bool:
    if isinstance(value, tuple):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):  # the state times: states to nanoseconds
        return all(isinstance(k, State) and type(v) is int for k, v in value.items())
    return value is None or isinstance(value, str | int | float)


def test_an_entry_keeps_only_strings_and_numbers() -> None:
    try:
        raise NeutrinoError(ErrorKind.CONTEXT_LENGTH, "too long " + "x" * 10_000)
    except NeutrinoError as exc:
        err = exc  # raised: it carries a traceback, with this frame in it
    big = "m" * 100_000
    entry = HistoryEntry.of("req-" + big, big, _ended(State.FAILED), 7, 0, None, err)
    for f in dataclasses.fields(entry):
        assert _plain(getattr(entry, f.name)), f.name
    assert len(entry.model) == len(entry.request_id) == MAX_TEXT
    assert entry.error_message is not None and len(entry.error_message) == MAX_TEXT
    assert entry.nbytes < 2000
    record: dict[str, Any] = entry.to_dict()
    assert record["state"] == "failed" and record["prompt_tokens"] == 7
    assert record["error"]["kind"] == "context_length"
    assert [s for s, _ in record["transitions"]] == ["start", "queued", "processing", "failed"]
    assert set(record["timings"]) == {"queue_time", "prompt_time", "completion_time", "total_time"}


def test_the_ring_is_bounded_in_entries_and_in_bytes() -> None:
    by_count = History(10)
    for i in range(100):
        by_count.add(HistoryEntry.of(f"r{i}", "m", _ended()))
    assert len(by_count) == 10 and by_count.total == 100
    assert by_count.latest(1)[0]["id"] == "r99"

    by_bytes = History(1000, max_bytes=20_000)
    for i in range(1000):
        by_bytes.add(HistoryEntry.of(f"r{i}" + "x" * 500, "m" * 500, _ended()))
    assert by_bytes.nbytes <= 20_000 and 5 < len(by_bytes) < 40
    latest: dict[str, Any] = by_bytes.latest(1)[0]
    assert latest["id"].startswith("r999")
    assert by_bytes.nbytes == sum(e.nbytes for e in by_bytes._ring)
