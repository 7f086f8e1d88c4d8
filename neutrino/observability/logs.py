"""Log lines about requests: the request id every line carries while a request runs, and
lines that a hostile or broken client could otherwise repeat without bound.

The request id travels in a context variable: a front end binds it at the top of a
request's handler (``bind_request_id(rid)``), and every line logged while that handler's
task runs, or a task or ``asyncio.to_thread`` call started from it, carries the id
(``RequestIdFilter``, installed on the handlers ``configure_logging`` sets up, copies it
onto the record). A line may also name its request itself: ``extra={"request_id": rid}``
wins over the context's.
"""

from __future__ import annotations

import contextvars
import logging
import time

# The id of the request whose task is running; None outside any request.
REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "neutrino_request_id", default=None
)


def bind_request_id(rid: str | None) -> contextvars.Token[str | None]:
    """Make ``rid`` the id of what runs in the current context from now on, and return
    the token that ``REQUEST_ID.reset`` takes to undo it. A handler that runs in a task
    of its own (aiohttp's, grpc.aio's) need not reset it: the task's context ends with it;
    code that serves several requests in one context (a protocol's callbacks) must."""
    return REQUEST_ID.set(rid)


class RequestIdFilter(logging.Filter):
    """Puts the current request's id on a record as ``request_id`` unless the line named
    one itself (``extra=``); a line outside any request gets none. Never drops a line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            rid = REQUEST_ID.get()
            if rid is not None:
                record.request_id = rid
        return True


class RateLimited:
    """At most one line per ``interval_s`` for a kind of event; the next line that passes
    says how many were held back in between."""

    __slots__ = ("_held", "_interval", "_log", "_next")

    def __init__(self, log: logging.Logger, interval_s: float = 10.0) -> None:
        self._log = log
        self._interval = interval_s
        self._next = 0.0
        self._held = 0

    def warning(self, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now < self._next:
            self._held += 1
            return
        self._next = now + self._interval
        if self._held:
            msg += " (%d more like this in the last %.0f s)"
            args = (*args, self._held, self._interval)
            self._held = 0
        self._log.warning(msg, *args)


class ClientErrorsQuiet(logging.Filter):
    """Drops a library's traceback for a request that was the client's fault (aiohttp's
    server logs one at ERROR for every malformed request it refuses with a 4xx): any
    client could fill the log with them. The client got its 400 all the same."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        code = getattr(exc, "code", None)
        return not (isinstance(code, int) and 400 <= code < 500)
