"""The log's shapes (text, JSON), the request id a line carries, the rotated file."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from neutrino.config import LoggingConfig
from neutrino.errors import StartupError
from neutrino.observability.logs import REQUEST_ID, RequestIdFilter, bind_request_id
from neutrino.observability.logsetup import (
    JsonFormatter,
    TextFormatter,
    configure_logging,
    iso_utc,
)

log = logging.getLogger("neutrino.test")


@pytest.fixture
def root() -> Iterator[logging.Logger]:
    """The root logger, given back as it was (handlers and level) after the test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield root
    for h in root.handlers:
        if h not in handlers:
            root.removeHandler(h)
            h.close()
    root.setLevel(level)
    logging.captureWarnings(False)


def _record(msg: str = "hello %s", *args: object, **extra: object) -> logging.LogRecord:
    record = log.makeRecord(log.name, logging.INFO, __file__, 1, msg, args or ("x",), None)
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def _logged(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_text_format_is_the_classic_line() -> None:
    line = TextFormatter().format(_record())
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO neutrino\.test: hello x", line)


def test_text_format_appends_the_request_id_before_a_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = log.makeRecord(log.name, logging.ERROR, __file__, 1, "failed", (), None)
        record.exc_info = sys.exc_info()
    record.request_id = "chatcmpl-1"
    first, *rest = TextFormatter().format(record).splitlines()
    assert first.endswith("ERROR neutrino.test: failed [chatcmpl-1]")
    assert rest[0].startswith("Traceback") and rest[-1] == "ValueError: boom"


def test_json_line_has_the_keys_and_plain_extras() -> None:
    record = _record(request_id="r-1", tokens=3, ok=True, models=["a", "b"], obj=object())
    doc = json.loads(JsonFormatter().format(record))
    assert doc.pop("ts") == iso_utc(record.created, record.msecs)
    assert doc == {
        "level": "INFO",
        "logger": "neutrino.test",
        "message": "hello x",
        "request_id": "r-1",
        "tokens": 3,
        "ok": True,
        "models": ["a", "b"],
    }


def test_json_timestamp_is_iso_8601_utc_with_milliseconds() -> None:
    assert iso_utc(0.5, 500.0) == "1970-01-01T00:00:00.500Z"
    stamp = json.loads(JsonFormatter().format(_record()))["ts"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp)


def test_json_line_carries_the_traceback_and_survives_odd_values() -> None:
    try:
        raise KeyError("k")
    except KeyError:
        log_record = log.makeRecord(log.name, logging.ERROR, __file__, 1, "x\ny", (), None)
        log_record.exc_info = sys.exc_info()
    log_record.big = 2**70  # over orjson's 64 bits
    log_record.odd = "\ud800"  # a lone surrogate
    line = JsonFormatter().format(log_record)
    assert "\n" not in line
    doc = json.loads(line)
    assert doc["message"] == "x\ny" and doc["big"] == 2**70 and doc["odd"] == "\ud800"
    assert doc["exception"].startswith("Traceback") and "KeyError: 'k'" in doc["exception"]


def test_configure_logging_json_to_a_file(root: logging.Logger, tmp_path: Path) -> None:
    path = tmp_path / "n.log"
    configure_logging(LoggingConfig(format="json", file=str(path)), "warning")
    log.info("not at warning")
    log.warning("kept %d", 1, extra={"request_id": "r-9"})
    warnings.warn("a python warning", UserWarning, stacklevel=1)
    lines = [json.loads(line) for line in _logged(path)]
    assert len(lines) == 2 and (lines[0]["level"], lines[0]["message"]) == ("WARNING", "kept 1")
    assert lines[0]["request_id"] == "r-9"
    assert lines[1]["logger"] == "py.warnings" and "a python warning" in lines[1]["message"]


def test_configure_logging_again_replaces_its_handler(root: logging.Logger, tmp_path: Path) -> None:
    first, second = tmp_path / "1.log", tmp_path / "2.log"
    configure_logging(LoggingConfig(file=str(first)), "info")
    configure_logging(LoggingConfig(file=str(second)), "info")
    log.info("once")
    assert not _logged(first) and len(_logged(second)) == 1
    assert [h.get_name() for h in root.handlers].count("neutrino") == 1


async def test_request_id_follows_the_task_that_bound_it(
    root: logging.Logger, tmp_path: Path
) -> None:
    path = tmp_path / "n.log"
    configure_logging(LoggingConfig(format="json", file=str(path)), "info")

    async def handler(rid: str) -> None:
        bind_request_id(rid)
        await asyncio.sleep(0)
        log.info("in %s", rid)
        await asyncio.get_running_loop().create_task(child(rid))  # inherits the context
        await asyncio.to_thread(log.info, "thread of %s", rid)

    async def child(rid: str) -> None:
        await asyncio.sleep(0)
        log.info("child of %s", rid)

    await asyncio.gather(handler("a"), handler("b"))
    log.info("outside")
    lines = [json.loads(line) for line in _logged(path)]
    for doc in lines[:-1]:
        assert doc["message"].endswith(doc["request_id"]), doc
    assert len(lines) == 7 and "request_id" not in lines[-1]
    assert REQUEST_ID.get() is None


def test_extra_request_id_wins_over_the_context() -> None:
    token = bind_request_id("from-context")
    try:
        named, unnamed = _record(request_id="named"), _record()
        RequestIdFilter().filter(named)
        RequestIdFilter().filter(unnamed)
    finally:
        REQUEST_ID.reset(token)
    assert getattr(named, "request_id", None) == "named"
    assert getattr(unnamed, "request_id", None) == "from-context"


def test_the_file_rotates_by_size(root: logging.Logger, tmp_path: Path) -> None:
    path = tmp_path / "n.log"
    configure_logging(LoggingConfig(file=str(path), max_bytes=1024, backups=2), "info")
    for i in range(100):
        log.info("line %03d %s", i, "x" * 40)
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == ["n.log", "n.log.1", "n.log.2"]
    for name in kept:
        assert (tmp_path / name).stat().st_size <= 1024
    assert _logged(path)[-1].endswith("line 099 " + "x" * 40)


def test_no_backups_means_the_full_file_starts_afresh(root: logging.Logger, tmp_path: Path) -> None:
    path = tmp_path / "n.log"
    configure_logging(LoggingConfig(file=str(path), max_bytes=1024, backups=0), "info")
    for i in range(100):
        log.info("line %03d %s", i, "x" * 40)
    assert [p.name for p in tmp_path.iterdir()] == ["n.log"]
    assert 0 < path.stat().st_size <= 1024


def test_two_writers_of_one_file_rotate_it_once(root: logging.Logger, tmp_path: Path) -> None:
    """Two handlers on one file, as two worker processes have: the one that rotates
    moves the file away, the other notices and writes to the new file, and no line is
    lost or written into a rotated file after its rotation."""
    path = tmp_path / "n.log"
    cfg = LoggingConfig(file=str(path), max_bytes=2048, backups=10)
    configure_logging(cfg, "info")
    (first,) = [h for h in root.handlers if h.get_name() == "neutrino"]
    root.removeHandler(first)
    configure_logging(cfg, "info")
    (second,) = [h for h in root.handlers if h.get_name() == "neutrino"]
    root.addHandler(first)  # both now write every line; the ids tell them apart
    first.addFilter(lambda r: r.getMessage().startswith("A"))
    second.addFilter(lambda r: r.getMessage().startswith("B"))
    for i in range(60):
        log.info("%s %03d %s", "AB"[i % 2], i, "y" * 30)
    first.close()
    oldest_first = sorted(tmp_path.glob("n.log*"), key=lambda p: -int(p.name[6:] or 0))
    assert len(oldest_first) > 2
    seen = [
        re.search(r": [AB] (\d+) ", line)[1]  # type: ignore[index]
        for p in oldest_first
        for line in _logged(p)
    ]
    assert seen == [f"{i:03d}" for i in range(60)]
    for p in oldest_first:
        assert p.stat().st_size <= 2048, p


@pytest.mark.parametrize(
    ("where", "reason"),
    [("missing/n.log", "no such file or directory"), ("", "is a directory")],
)
def test_a_log_file_that_cannot_be_opened_is_one_clear_error(
    root: logging.Logger, tmp_path: Path, where: str, reason: str
) -> None:
    target = str(tmp_path / where) if where else str(tmp_path)
    before = list(root.handlers)
    with pytest.raises(StartupError) as caught:
        configure_logging(LoggingConfig(file=target), "info")
    message = str(caught.value)
    assert message == f"cannot open log file {target}: {reason} (set [logging] file)"
    assert root.handlers == before
