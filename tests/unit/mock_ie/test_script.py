"""Tests of scripted-reply files and the event log reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mocks.mock_ie.events import EventLog, read_events
from mocks.mock_ie.script import Rule, Script, ScriptError
from neutrino.engine.messages import ErrorCode


def test_load_and_first_match_wins(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    rules = [
        {"match": "tool", "reply": "<tool_call>{}</tool_call>"},
        {"match": "tool", "reply": "never"},
        {
            "match": "boom",
            "fault": "error",
            "fault_after": 2,
            "error_code": "context_length",
            "error_message": "too long",
        },
        {"match": "ids", "reply_tokens": [1, 2, 3], "finish": "length"},
        {"match": "*"},
    ]
    path.write_text(json.dumps({"rules": rules}), encoding="utf-8")
    script = Script.load(path)
    assert len(script) == 5
    assert script.match("use a tool") == Rule("tool", reply="<tool_call>{}</tool_call>")
    boom = script.match("boom")
    assert boom is not None and boom.fault == "error" and boom.fault_after == 2
    assert boom.error_code == ErrorCode.CONTEXT_LENGTH and boom.error_message == "too long"
    ids = script.match("ids")
    assert ids is not None and ids.reply_tokens == (1, 2, 3) and ids.finish == "length"
    fallback = script.match("something else")
    assert fallback == Rule("*")
    assert Script.from_rules([{"match": "x"}]).match("y") is None


@pytest.mark.parametrize(
    ("rule", "needle"),
    [
        ({"reply": "no match key"}, "'match'"),
        ({"match": "a", "reply": "x", "reply_tokens": [1]}, "not both"),
        ({"match": "a", "reply_tokens": [1, -2]}, "reply_tokens"),
        ({"match": "a", "reply_tokens": "12"}, "reply_tokens"),
        ({"match": "a", "finish": "done"}, "'finish'"),
        ({"match": "a", "fault": "explode"}, "'fault'"),
        ({"match": "a", "fault": "drop", "fault_after": -1}, "fault_after"),
        ({"match": "a", "fault_after": 3}, "needs a 'fault'"),
        ({"match": "a", "fault": "error", "error_code": "teapot"}, "teapot"),
        ({"match": "a", "fault": "drop", "error_code": "internal"}, "error_code"),
        ({"match": "a", "colour": "red"}, "colour"),
        ("not an object", "object"),
    ],
)
def test_validation_names_the_bad_rule(rule: Any, needle: str) -> None:
    good = {"match": "fine", "reply": "ok"}
    with pytest.raises(ScriptError) as info:
        Script.from_rules([good, good, rule])
    message = str(info.value)
    assert "rule 2" in message and needle in message


def test_load_errors(tmp_path: Path) -> None:
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{rules: ", encoding="utf-8")
    with pytest.raises(ScriptError, match="invalid JSON"):
        Script.load(bad_json)
    with pytest.raises(ScriptError, match="cannot read"):
        Script.load(tmp_path / "missing.json")
    no_rules = tmp_path / "none.json"
    no_rules.write_text('{"replies": []}', encoding="utf-8")
    with pytest.raises(ScriptError, match="rules"):
        Script.load(no_rules)
    bad_rule = tmp_path / "rule.json"
    bad_rule.write_text('{"rules": [{"match": "x", "finish": 3}]}', encoding="utf-8")
    with pytest.raises(ScriptError, match=r"rule\.json: rule 0"):
        Script.load(bad_rule)


def test_error_code_spellings() -> None:
    for spelling, code in [
        ("overloaded", ErrorCode.OVERLOADED),
        ("invalid_request", ErrorCode.INVALID_REQUEST),
        ("invalidRequest", ErrorCode.INVALID_REQUEST),
        ("UNKNOWN_MODEL", ErrorCode.UNKNOWN_MODEL),
        ("context-length", ErrorCode.CONTEXT_LENGTH),
    ]:
        script = Script.from_rules([{"match": "*", "fault": "error", "error_code": spelling}])
        rule = script.rules[0]
        assert rule.error_code == code


def test_event_log_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    assert read_events(path) == []
    log = EventLog(path)
    log.emit("connect", 1)
    log.emit("query", 1, request_id=5, model="m", seed=None)
    # Readable before close: every event is flushed as it is written.
    events = read_events(path)
    assert [e["event"] for e in events] == ["connect", "query"]
    assert events[1]["request_id"] == 5 and events[1]["seed"] is None
    assert all(isinstance(e["t"], float) and e["conn"] == 1 for e in events)
    log.close()
    with path.open("a", encoding="utf-8") as f:
        f.write('{"event": "half')  # a line still being written is skipped
    assert len(read_events(path)) == 2
    EventLog(None).emit("connect", 1)  # disabled log: no-op
