"""A bounded cache of token ids for the text between special tokens of a prompt.

Rendered chat prompts repeat most of their text from request to request: the system
prompt, tool definitions, the earlier turns of a conversation and the template's
own glue (``"\\n"``, ``"assistant\\n"``). A byte-level BPE encodes the text between
two special tokens independently of what surrounds it, so those pieces can be
encoded once and reused; only the new turn pays for BPE.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

ENTRY_BYTES = 120  # an entry's dict slot and the string's and list's own headers
ID_BYTES = 36  # a list slot and an int object (ids above 256 are objects of their own)


def entry_bytes(segment: str, ids: list[int]) -> int:
    """What a cached segment holds in memory, roughly (ASCII-sized text)."""
    return ENTRY_BYTES + len(segment) + ID_BYTES * len(ids)


class SegmentCache:
    """Segment text -> token ids, bounded by the memory its entries hold (oldest out
    first). Counted in bytes, not characters: a stream of short unique segments (each
    request's own turn) costs mostly in per-entry overhead and ids, ~10x its characters.

    Lookups take no lock; inserts and evictions do, as large prompts are encoded
    on worker threads.
    """

    __slots__ = ("_bytes", "_lock", "_map", "max_bytes", "max_segment")

    def __init__(self, max_bytes: int = 8 << 20, max_segment: int = 1 << 16) -> None:
        self.max_bytes = max_bytes
        self.max_segment = max_segment
        # Ordered by insertion, oldest first: popitem(last=False) takes it in O(1) (a plain
        # dict scans past every slot already emptied at its front to find its first key).
        self._map: OrderedDict[str, list[int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, segment: str) -> list[int] | None:
        return self._map.get(segment)

    def put(self, segment: str, ids: list[int]) -> None:
        if len(segment) > self.max_segment:
            return
        cost = entry_bytes(segment, ids)
        with self._lock:
            if segment in self._map:
                return
            m = self._map
            while m and self._bytes + cost > self.max_bytes:
                oldest, old_ids = m.popitem(last=False)
                self._bytes -= entry_bytes(oldest, old_ids)
            m[segment] = ids
            self._bytes += cost

    def __len__(self) -> int:
        return len(self._map)

    @property
    def nbytes(self) -> int:
        return self._bytes
