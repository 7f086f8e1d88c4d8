"""The narrow seam between the pipeline and engines.

``EngineClient`` is what the pipeline needs of "the engines": which models are
served, and a way to submit a query whose results go to a sink. The real
implementation is :class:`neutrino.engine.router.EngineRouter` (UNIX sockets);
:class:`neutrino.engine.inprocess.InProcessEngineClient` runs an engine core in
the same event loop for tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from neutrino.engine.connection import StreamSink
from neutrino.engine.messages import ModelInfo, Query


class Submission(Protocol):
    """A query in flight."""

    def cancel(self, reason: str) -> bool:
        """Send one cancel to the engine if still in flight; True if one was sent."""
        ...

    def forget(self) -> None:
        """Drop the sink without telling the engine (the request already ended)."""
        ...


class EngineClient(Protocol):
    def models(self) -> Mapping[str, ModelInfo]:
        """Models served by connected engines."""
        ...

    def has_engine(self) -> bool: ...

    def capacity(self) -> int:
        """Concurrent requests the connected engines accept, in total."""
        ...

    def submit(self, query: Query, sink: StreamSink) -> Submission:
        """Send ``query``; raises NeutrinoError (NO_ENGINE, MODEL_NOT_FOUND) if it cannot."""
        ...

    def snapshot(self) -> list[dict[str, Any]]:
        """Per-engine state for /neutrino/v1/app_state."""
        ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...
