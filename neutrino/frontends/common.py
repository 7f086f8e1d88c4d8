"""What every front end shares: request ids, JSON number checks, SSE headers."""

from __future__ import annotations

import itertools
import secrets
from typing import Any

# Request ids are unique across processes (the tag) and within one (the counter), and
# shared by every protocol: an id names one request wherever it came in.
_PROCESS_TAG = secrets.token_hex(8)
_COUNTER = itertools.count(1)

SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}


def new_id(prefix: str) -> str:
    return f"{prefix}-{_PROCESS_TAG}{next(_COUNTER):08x}"


def is_int(v: Any) -> bool:
    """A JSON integer (a boolean is not one)."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v: Any) -> bool:
    """A JSON number (a boolean is not one)."""
    return isinstance(v, int | float) and not isinstance(v, bool)
