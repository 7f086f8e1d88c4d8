"""Log lines that a hostile or broken client could otherwise repeat without bound."""

from __future__ import annotations

import logging
import time


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
