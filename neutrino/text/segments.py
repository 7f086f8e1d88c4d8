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
from collections.abc import Iterable

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


class Head:
    """A remembered prompt head: its text and its ids, the first ``n`` of ``ids`` (the list
    may run on: the head of the same conversation's next turn extends it in place)."""

    __slots__ = ("ids", "n", "serial", "text")

    def __init__(self, text: str, ids: list[int], serial: int, n: int | None = None) -> None:
        self.text = text
        self.ids = ids  # never handed out: callers take ids[:n]
        self.n = len(ids) if n is None else n
        self.serial = serial


class PrefixCache:
    """The heads of recent prompts and their token ids: a prompt's text up to the start
    of its last special token (in a chat, where the generation prompt begins), so that
    the next turn of the same conversation, which repeats that text whole, tokenizes
    only what follows it. Bounded by the memory its entries hold (oldest out first); a
    head that a longer one of the same conversation extends is dropped.

    A head is used for a text only where the text has a special token at the head's end:
    the text between specials is encoded apart, so head ids + the rest's ids = the whole
    text's ids. Lookups take no lock; changes do (prompts are also encoded on worker
    threads).
    """

    __slots__ = ("_by_len", "_bytes", "_lock", "_order", "_serial", "max_bytes", "min_chars")

    def __init__(self, max_bytes: int = 32 << 20, min_chars: int = 2048) -> None:
        self.max_bytes = max_bytes
        self.min_chars = min_chars  # shorter heads are not worth an entry
        self._by_len: dict[int, list[Head]] = {}
        self._order: OrderedDict[int, Head] = OrderedDict()  # by serial, oldest first
        self._serial = 0
        self._bytes = 0
        self._lock = threading.Lock()

    def find(self, text: str, starts: Iterable[int]) -> Head | None:
        """The longest remembered head that ``text`` starts with, among those that end at
        one of ``starts``: where a special token starts in ``text``, last first (a dict
        lookup each, however many conversations the cache holds)."""
        by_len = self._by_len
        for at in starts:
            for head in by_len.get(at, ()):
                if text.startswith(head.text):
                    return head
        return None

    def put(self, text: str, ids: list[int]) -> None:
        """Remember the head ``text`` and its ``ids`` (kept as given: pass a copy)."""
        if len(text) < self.min_chars:
            return
        with self._lock:
            self._insert(text, ids, len(ids))

    def extend(self, head: Head, text: str, more: list[int]) -> None:
        """Remember ``text``, which ``head`` begins, with ``head``'s ids and ``more``, in
        place of ``head``. Its list grows in place when no other head has grown it yet
        (readers take only their first ``n``), else it is copied."""
        with self._lock:
            self._drop(head)
            ids = head.ids
            if len(ids) == head.n:
                ids += more
            else:
                ids = ids[: head.n] + more
            self._insert(text, ids, head.n + len(more))

    def _insert(self, text: str, ids: list[int], n: int) -> None:
        cost = ENTRY_BYTES + len(text) + ID_BYTES * n
        while self._order and self._bytes + cost > self.max_bytes:
            self._drop(next(iter(self._order.values())))
        self._serial += 1
        head = Head(text, ids, self._serial, n)
        self._order[head.serial] = head
        self._by_len.setdefault(len(text), []).append(head)
        self._bytes += cost

    def _drop(self, head: Head) -> None:
        if self._order.pop(head.serial, None) is None:
            return  # dropped already (another thread's eviction)
        same = self._by_len[len(head.text)]
        for i, h in enumerate(same):
            if h is head:
                del same[i]
                break
        if not same:
            del self._by_len[len(head.text)]
        self._bytes -= ENTRY_BYTES + len(head.text) + ID_BYTES * head.n

    def __len__(self) -> int:
        return len(self._order)

    @property
    def nbytes(self) -> int:
        return self._bytes
