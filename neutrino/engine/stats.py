"""What one engine's connections did, summed over the connections it has had.

A connection's own counts die with it; these live as long as the engine's pool. Plain
integers bumped on the event loop by the link and its adapter; read when metrics are
scraped (``observability/metrics.py``) and shown in ``/neutrino/v1/app_state``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# Cancel reasons that mean the client is gone: tokens after them are pure waste.
CLIENT_GONE = frozenset({"client disconnected", "client too slow"})


@dataclass(slots=True)
class EngineStats:
    reconnects: int = 0  # connections lost and opened again
    connects: int = 0  # connections opened (handshakes done)
    heartbeat_misses: int = 0  # connections dropped for showing no sign of life
    cancels_sent: int = 0  # cancel frames queued for the engine
    # Token ids the engine sent for a request after it was cancelled because its client
    # had gone: what the engine spent past the client (see EngineLink.cancel).
    tokens_after_disconnect: int = 0
    # ... and after any other cancel (a stop string, a timeout, a shutdown).
    tokens_after_cancel: int = 0

    def snapshot(self) -> dict[str, int]:
        return asdict(self)
