"""The Responses API's optional store of finished responses (sans-IO, in memory).

Off by default (``[responses] store_entries = 0``): Neutrino is stateless, and a
``previous_response_id`` is refused. When on, each finished response asked to be stored
(``store``, true unless the client says otherwise) is kept with its conversation, so a
later request can continue it by id and ``GET /v1/responses/{id}`` can return it. Both the
number of entries and their bytes are bounded: the oldest go first; one response larger
than the whole byte bound is not kept. Per worker process, lost at a restart.
"""

from __future__ import annotations

from collections import OrderedDict

import orjson

from neutrino.frontends.http.responses.parse import Stored
from neutrino.pipeline.auth import Principal


def owner_of(principal: Principal | None) -> str:
    """Whose a stored response is: the API key's name ("" when keys are off)."""
    return "" if principal is None else principal.name


class ResponseStore:
    """Responses by id, least recently stored first, within ``max_entries`` and
    ``max_bytes``."""

    __slots__ = ("_bytes", "_entries", "max_bytes", "max_entries")

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, Stored] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        return self._bytes

    def get(self, resp_id: str) -> Stored | None:
        return self._entries.get(resp_id)

    def lookup(self, owner: str, resp_id: str) -> Stored | None:
        """The stored response ``owner`` may see (None: unknown, or someone else's)."""
        stored = self._entries.get(resp_id)
        return stored if stored is not None and stored.owner == owner else None

    def put(self, owner: str, items: list[object], response: dict[str, object]) -> bool:
        """Keep ``response`` (and the conversation it ends); False when it is larger than
        the whole bound (nothing kept)."""
        resp_id = str(response["id"])
        size = len(orjson.dumps(items)) + len(orjson.dumps(response))
        self.delete(resp_id)
        if size > self.max_bytes or self.max_entries <= 0:
            return False
        self._entries[resp_id] = Stored(owner, items, response, size)
        self._bytes += size
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            _, old = self._entries.popitem(last=False)
            self._bytes -= old.size
        return True

    def delete(self, resp_id: str) -> bool:
        old = self._entries.pop(resp_id, None)
        if old is None:
            return False
        self._bytes -= old.size
        return True
