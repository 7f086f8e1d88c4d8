"""Where Neutrino's log goes and in what shape (``[logging]``), set up once at start.

``configure_logging`` gives the root logger one handler: stderr, or a file rotated by size
(``max_bytes``; ``backups`` old files kept as FILE.1, FILE.2, ...; with 0 the full file
starts afresh). Two formats:

- ``text``: ``2024-05-01 12:00:00,123 INFO neutrino.http: message [request-id]``, the
  request id in brackets where the line is about a request;
- ``json``: one object a line, ``{"ts": "2024-05-01T12:00:00.123Z", "level": "INFO",
  "logger": "neutrino.http", "message": "...", "request_id": "...", "exception": "..."}``,
  ``request_id`` and ``exception`` (the formatted traceback) only where there is one, plus
  the line's ``extra=`` fields whose values are plain JSON (strings, numbers, booleans,
  null, and lists and objects of them).

Several processes (``--workers``) may log to the same file: a process that finds the
file rotated by another reopens it, and only one of them rotates it (``_SharedRotatingFile``).
"""

from __future__ import annotations

import fcntl
import json
import logging
import logging.handlers
import os
import sys
import time

import orjson

from neutrino.config import LoggingConfig
from neutrino.errors import StartupError, os_reason
from neutrino.observability.logs import RequestIdFilter

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# What every LogRecord carries by itself: anything else on a record came from ``extra=``.
_RECORD_FIELDS = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys()
    | {"message", "asctime", "request_id", "taskName"}
)
_SCALARS = (str, int, float, bool, type(None))


class TextFormatter(logging.Formatter):
    """The classic one-line format, then `` [request-id]`` for a line about a request."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        rid = getattr(record, "request_id", None)
        return line if rid is None else f"{line} [{rid}]"


def _plain(value: object, depth: int = 0) -> bool:
    """A value JSON has a form for by itself, nested at most a few levels."""
    if isinstance(value, _SCALARS):
        return True
    if depth >= 4:
        return False
    if isinstance(value, list | tuple):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


def iso_utc(created: float, msecs: float) -> str:
    """``2024-05-01T12:00:00.123Z`` for a record's ``created`` and ``msecs``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(msecs):03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object a line (see the module's doc for its keys)."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "ts": iso_utc(record.created, record.msecs),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = getattr(record, "request_id", None)
        if rid is not None:
            doc["request_id"] = rid if isinstance(rid, str) else str(rid)
        if record.exc_info:
            record.exc_text = record.exc_text or self.formatException(record.exc_info)
        if record.exc_text:
            doc["exception"] = record.exc_text
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        for key, value in record.__dict__.items():
            if key not in _RECORD_FIELDS and key not in doc and _plain(value):
                doc[key] = value
        try:
            return orjson.dumps(doc).decode()
        except TypeError:  # an integer over 64 bits, a lone surrogate: json takes them
            return json.dumps(doc, default=str)


class _SharedRotatingFile(logging.handlers.RotatingFileHandler):
    """A size-rotated file that several processes may write: before each line a process
    checks that its open file is still the one at the path (another may have rotated it)
    and reopens it if not; a rotation holds a lock on the full file and is skipped by a
    process that finds, under the lock, that another rotated it first."""

    def _moved(self) -> bool:
        if self.stream is None:
            return False
        try:
            at_path = os.stat(self.baseFilename)
        except FileNotFoundError:
            return True
        return at_path.st_ino != os.fstat(self.stream.fileno()).st_ino

    def _reopen(self) -> None:
        if self.stream is not None:
            self.stream.close()
        self.stream = self._open()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self._moved():
                self._reopen()
        except OSError:
            self.handleError(record)
            return
        super().emit(record)

    def doRollover(self) -> None:
        if self.stream is None:
            super().doRollover()
            return
        full = self.stream
        fcntl.flock(full.fileno(), fcntl.LOCK_EX)
        try:
            if self._moved():  # rotated by another process while this one waited
                self.stream = self._open()
            else:
                self.stream = None  # as the base class does
                if self.backupCount == 0:  # no old file kept: the full one starts afresh
                    os.unlink(self.baseFilename)
                super().doRollover()
        finally:
            fcntl.flock(full.fileno(), fcntl.LOCK_UN)
            full.close()


def _handler(cfg: LoggingConfig) -> logging.Handler:
    if not cfg.file:
        return logging.StreamHandler(sys.stderr)
    try:
        return _SharedRotatingFile(
            cfg.file, maxBytes=cfg.max_bytes, backupCount=cfg.backups, encoding="utf-8"
        )
    except OSError as exc:
        raise StartupError(
            f"cannot open log file {cfg.file}: {os_reason(exc)} (set [logging] file)"
        ) from exc


def configure_logging(cfg: LoggingConfig, level: str) -> None:
    """Send the root logger's lines at ``level`` and above (debug, info, warning, error)
    to stderr or ``cfg.file``, formatted as ``cfg.format`` says, each line about a request
    with its id. Replaces the handlers a previous call installed (a reload may call it
    again). A file that cannot be opened is a StartupError naming it."""
    handler = _handler(cfg)
    handler.setFormatter(JsonFormatter() if cfg.format == "json" else TextFormatter())
    handler.addFilter(RequestIdFilter())
    handler.set_name("neutrino")
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "neutrino"]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.captureWarnings(True)  # Python's warnings, in the same shape as every line
