"""A bounded cache of token ids for the text between special tokens of a prompt.

Rendered chat prompts repeat most of their text from request to request: the system
prompt, tool definitions, the earlier turns of a conversation and the template's
own glue (``"\\n"``, ``"assistant\\n"``). A byte-level BPE encodes the text between
two special tokens independently of what surrounds it, so those pieces can be
encoded once and reused; only the new turn pays for BPE.
"""

from __future__ import annotations

import threading


class SegmentCache:
    """Segment text -> token ids, bounded by the characters it holds (oldest out first).

    Lookups take no lock; inserts and evictions do, as large prompts are encoded
    on worker threads.
    """

    __slots__ = ("_chars", "_lock", "_map", "max_chars", "max_segment")

    def __init__(self, max_chars: int = 1 << 21, max_segment: int = 1 << 16) -> None:
        self.max_chars = max_chars
        self.max_segment = max_segment
        self._map: dict[str, list[int]] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, segment: str) -> list[int] | None:
        return self._map.get(segment)

    def put(self, segment: str, ids: list[int]) -> None:
        n = len(segment)
        if n > self.max_segment:
            return
        with self._lock:
            if segment in self._map:
                return
            m = self._map
            while m and self._chars + n > self.max_chars:
                oldest = next(iter(m))
                del m[oldest]
                self._chars -= len(oldest)
            m[segment] = ids
            self._chars += n

    def __len__(self) -> int:
        return len(self._map)

    @property
    def chars(self) -> int:
        return self._chars
