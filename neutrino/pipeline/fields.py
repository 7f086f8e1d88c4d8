"""Where a bad request field is, and what is wrong with it (sans-IO).

A location (:data:`Loc`) is a path of keys and indexes in the client's own request:
``("messages", 2, "content", 1)``. A front end hands a validator each value together with
where that value sits in its protocol, so an error names the field in the client's terms
and nothing is renamed afterwards. :func:`path` writes a location the way OpenAI's
``param`` and gRPC field paths do (``messages[2].content[1]``); the checks of plain values
(:func:`number`, :func:`integer`, :func:`boolean`, :func:`string`) are the ones every
validator builds on.
"""

from __future__ import annotations

from typing import TypeGuard

from neutrino.errors import ErrorKind, NeutrinoError

Loc = tuple[str | int, ...]

MAX_INT = (1 << 31) - 1


def path(loc: Loc) -> str:
    """``("messages", 2, "content")`` -> ``messages[2].content``."""
    out = ""
    for step in loc:
        if isinstance(step, int):
            out += f"[{step}]"
        else:
            out += f".{step}" if out else step
    return out


def invalid(
    at: Loc, text: str, *, kind: ErrorKind = ErrorKind.BAD_REQUEST, param: Loc | None = None
) -> NeutrinoError:
    """The error of the field at ``at``: ``text`` with ``{at}`` standing for its path;
    its ``param`` is ``param`` (a shorter path, for an API that names only the top field)
    or the field's own."""
    where = path(at)
    return NeutrinoError(
        kind,
        text.replace("{at}", where),
        param=where if param is None else path(param),
        loc=at,
    )


def is_int(v: object) -> TypeGuard[int]:
    """A JSON integer (a boolean is not one)."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v: object) -> TypeGuard[int | float]:
    """A JSON number (a boolean is not one)."""
    return isinstance(v, int | float) and not isinstance(v, bool)


def number(v: object, at: Loc, lo: float, hi: float) -> float:
    """A number from ``lo`` to ``hi`` (NaN is refused)."""
    if not is_num(v):
        raise invalid(at, "{at} must be a number")
    if not lo <= v <= hi:
        raise invalid(at, f"{{at}} must be between {lo:g} and {hi:g}")
    return float(v)


def integer(v: object, at: Loc, lo: int, hi: int = MAX_INT) -> int:
    """An integer from ``lo`` to ``hi``; a whole number written as a float (``100.0``,
    ``1e30``) is taken as its integer, as vLLM's validation does, so a huge one hears the
    limit."""
    if v.__class__ is int and lo <= v <= hi:  # the common case
        return v
    if isinstance(v, float) and v.is_integer():
        if not lo <= v <= hi:
            raise invalid(at, f"{{at}} must be an integer between {lo} and {hi}")
        v = int(v)
    if not is_int(v):
        raise invalid(at, "{at} must be an integer")
    assert isinstance(v, int)
    if not lo <= v <= hi:
        raise invalid(at, f"{{at}} must be between {lo} and {hi}")
    return v


def boolean(v: object, at: Loc) -> bool:
    if not isinstance(v, bool):
        raise invalid(at, "{at} must be a boolean")
    return v


def string(v: object, at: Loc) -> str:
    if not isinstance(v, str):
        raise invalid(at, "{at} must be a string")
    return v
