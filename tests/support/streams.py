"""A streamed chat answer read whole, as the migration tests read one: its text (each piece
appended to ``pieces`` as it arrives, for a test that acts mid-stream), its tokens (from
the chunks' logprobs), the chunks' ids and the usage of its last chunk."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def read_stream(chunks: Iterable[Any], pieces: list[str]) -> dict[str, Any]:
    tokens: list[str] = []
    ids, usage = set(), None
    for c in chunks:
        ids.add(c.id)
        usage = c.usage or usage
        if c.choices and c.choices[0].logprobs and c.choices[0].logprobs.content:
            tokens += [t.token for t in c.choices[0].logprobs.content]
        if c.choices and c.choices[0].delta.content:
            pieces.append(c.choices[0].delta.content)
    return {"text": "".join(pieces), "tokens": tokens, "ids": ids, "usage": usage}
