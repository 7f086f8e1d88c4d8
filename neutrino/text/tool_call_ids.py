"""Tool-call ids for families whose chat templates accept only some (``tool_call_ids``).

Mistral's published templates (``mistral-v3``, ``mistral-nemo``, ``mistral-v7``) refuse a
tool call whose id is not 9 characters long ("Tool call IDs should be alphanumeric strings
with length 9!"; v7 accepts 9 or more and renders the last 9), and their message, like
Mistral's own API, asks for 9 ASCII letters and digits. For such a family (``"alnum9"``):

* Output: the ids Neutrino gives the calls it parses are 9 base62 characters, a function of
  the request id and the call's index (:func:`alnum9_ids`), so a streamed and a non-streamed
  parse of the same output agree, the calls of one response all differ, and ids of other
  requests differ but by chance (53 bits).
* Input: the ids of the conversation a client sends (``tool_calls[].id`` of assistant turns,
  ``tool_call_id`` of tool turns) are made to fit before rendering (:func:`fit_alnum9`).
  The rule: an id of 9 ASCII letters and digits is left as it is. Any other string id, in
  order of first appearance, becomes its last 9 characters when those are ASCII letters and
  digits (what vLLM does for Mistral models, and what the v7 template renders itself), else
  9 base62 characters of a hash of the whole id; in either case, if that value is already an
  id of the conversation or the value of another id, the hash is taken again with a counter
  until it is not. So an id maps to one value wherever it appears (a call and the tool turn
  that answers it stay paired), different ids keep different values, and ids that fit are
  untouched. Ids that are not strings are left to the template.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Final

__all__ = ["alnum9_ids", "fit_alnum9", "fits_alnum9"]

_DIGITS: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_WIDTH: Final = 9
_SPACE: Final = len(_DIGITS) ** _WIDTH  # 62**9, about 1.35e16 (53.6 bits)
_FITS: Final = re.compile(r"[A-Za-z0-9]{9}")


def fits_alnum9(value: object) -> bool:
    """Whether ``value`` is a string of exactly 9 ASCII letters and digits."""
    return isinstance(value, str) and _FITS.fullmatch(value) is not None


def _base62(n: int) -> str:
    chars = []
    for _ in range(_WIDTH):
        n, digit = divmod(n, 62)
        chars.append(_DIGITS[digit])
    return "".join(reversed(chars))


def _hash(text: str) -> int:
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % _SPACE


def alnum9_ids(request_id: str) -> Callable[[int], str]:
    """The id of call ``i`` of the response to ``request_id``: 9 base62 characters.

    Consecutive numbers from a starting point hashed from the request id, so the calls of
    one response never share an id.
    """
    start = _hash(request_id)

    def call_id(index: int) -> str:
        return _base62((start + index) % _SPACE)

    return call_id


def _ids(messages: Sequence[Mapping[str, object]]) -> list[str]:
    """Every string tool-call id of ``messages``, in order (repeats included)."""
    found: list[str] = []
    for message in messages:
        if message.get("role") in ("tool", "tool_results"):
            value = message.get("tool_call_id")
            if isinstance(value, str):
                found.append(value)
        calls = message.get("tool_calls")
        if isinstance(calls, list | tuple):
            for call in calls:
                if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                    found.append(call["id"])
    return found


def _mapping(ids: list[str]) -> dict[str, str]:
    """A fitting value for each id that does not fit (see the module's rule)."""
    taken = {i for i in ids if fits_alnum9(i)}
    out: dict[str, str] = {}
    for old in ids:
        if old in taken or old in out:
            continue
        new = old[-_WIDTH:]
        counter = 0
        while not fits_alnum9(new) or new in taken:
            new = _base62(_hash(f"{counter}:{old}"))
            counter += 1
        taken.add(new)
        out[old] = new
    return out


def fit_alnum9(messages: list[dict[str, object]]) -> list[dict[str, object]]:
    """``messages`` with tool-call ids that fit (a new list; changed messages and calls are
    new dicts, nothing given is modified). Without an id to change, ``messages`` itself."""
    mapping = _mapping(_ids(messages))
    if not mapping:
        return messages

    def new_id(value: object) -> str | None:
        return mapping.get(value) if isinstance(value, str) else None

    out: list[dict[str, object]] = []
    for message in messages:
        if message.get("role") in ("tool", "tool_results"):
            value = new_id(message.get("tool_call_id"))
            if value is not None:
                message = {**message, "tool_call_id": value}
        calls = message.get("tool_calls")
        if isinstance(calls, list | tuple):
            fitted = [
                {**c, "id": new_id(c.get("id"))}
                if isinstance(c, Mapping) and new_id(c.get("id")) is not None
                else c
                for c in calls
            ]
            if any(a is not b for a, b in zip(fitted, calls, strict=True)):
                message = {**message, "tool_calls": fitted}
        out.append(message)
    return out
