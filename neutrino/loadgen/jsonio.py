"""Small readers of JSON answers shared by the protocols' wire modules."""

from __future__ import annotations

import json
from typing import Any

from neutrino.loadgen.errors import RequestFailed


def json_object(data: bytes | str) -> dict[str, Any]:
    """``data`` as a JSON object; an answer that is not one fails the request."""
    try:
        obj = json.loads(data)
    except ValueError:
        raise RequestFailed("bad answer", "an answer that is not JSON") from None
    if not isinstance(obj, dict):
        raise RequestFailed("bad answer", "an answer that is not a JSON object")
    return obj


def count(v: Any) -> int | None:
    """A token count, or None where the answer has none."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None
