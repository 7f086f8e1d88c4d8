"""Reading the JSON values of the metrics' raws (``metrics.py``, ``fleet_metrics.py``)
where a part's shape is another module's (routing counts, a node agent's report): a
value of another kind than expected reads as empty or zero."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def table(value: object) -> Mapping[str, object]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def rows(value: object) -> Sequence[object]:
    """``value`` if it is a JSON array, else an empty one."""
    return value if isinstance(value, list | tuple) else ()


def number(value: object) -> float:
    """``value`` if it is a number, else 0."""
    return value if isinstance(value, int | float) else 0
