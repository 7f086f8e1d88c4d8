"""An :class:`EngineClient` whose engine runs in the same event loop.

Like an HTTP client's mock transport, it replaces only the wire. The client's side is
the :class:`neutrino.engine.link.EngineLink` a socket connection drives; the engine's
side is the :class:`neutrino.engines.session.EngineSession` an engine process serves,
with that engine's own :class:`EngineHandler` (mock_ie's, for one). So both sides'
protocol rules are the real ones: the hello, late and unknown frames, cancels of
finished requests, failing sinks, engine errors, a lost connection. Frames cross as
messages rather than bytes; what one side queues during a loop iteration reaches the
other in one later loop callback, as one socket read would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from neutrino.engine.client import LinkSubmission, Relayed, StreamSink
from neutrino.engine.link import EngineLink, Handshaken
from neutrino.engine.messages import (
    MODAL_QUERIES,
    Cancel,
    HelloAck,
    Message,
    ModelInfo,
    ModelState,
    Query,
    TextQuery,
)
from neutrino.engines.session import EngineHandler, EngineSession, Outlet
from neutrino.errors import ErrorKind, NeutrinoError

# An engine's handler for one connection, given what it writes its frames through.
Connect = Callable[[Outlet], EngineHandler]
_QUERIES = (TextQuery, *MODAL_QUERIES)


class InProcessLine:
    """The engine's end of one in-process connection: what its handler writes through,
    with the surface of a socket connection's (``neutrino.engines.serve``)."""

    def __init__(self, client: InProcessEngineClient, connect: Connect) -> None:
        self.paused = False  # the client takes every frame at once
        self.open = True
        self._client = client
        self._due = False
        self.session = EngineSession(connect(self), batch_tokens=False)

    def send(self, rid: int, msg: Message) -> None:
        self.session.send(rid, msg)
        self.flush_soon()

    def flush_soon(self) -> None:
        if not self._due and self.open:
            self._due = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """What the engine queued reaches the client now (one 'read')."""
        self._due = False
        if self.open and self.session.wants_to_send:
            self._client.receive(self.session.messages_to_send())

    def abort(self) -> None:
        """The engine breaks the connection; the client reconnects at once."""
        if self.open:
            self._client.drop()

    async def writable(self) -> None:
        return None


class InProcessEngineClient:
    """Runs the engine that ``connect`` builds a handler of, one connection at a time
    (a dropped connection is replaced at once, as a pool replaces one)."""

    def __init__(self, connect: Connect) -> None:
        self._connect_handler = connect
        self.queries: list[Query] = []  # every query the engine received, in order
        self.cancels: list[tuple[int, str]] = []  # every cancel frame it received
        self.link, self.line, self.hello = self._connect()
        self._models = {m.name: m for m in self.hello.models}

    def _connect(self) -> tuple[EngineLink, InProcessLine, HelloAck]:
        link = EngineLink("in-process")
        line = InProcessLine(self, self._connect_handler)
        for rid, msg in link.messages_to_send():  # the hello, answered at once
            line.session.receive(rid, msg)
        event = link.receive_messages(line.session.messages_to_send())
        if not isinstance(event, Handshaken):
            raise ConnectionError("the in-process engine refused the hello")
        return link, line, event.ack

    @property
    def connected(self) -> bool:
        return self.link.ready

    @property
    def active(self) -> set[int]:
        """The requests the engine is still on."""
        return set(self.line.session.active)

    def models(self) -> Mapping[str, ModelInfo]:
        return self._models if self.connected else {}

    def has_engine(self) -> bool:
        return self.connected

    async def wait_for(self, model: str, timeout: float) -> bool:
        return model in self.models()  # nothing here restarts

    def capacity(self) -> int:
        return self.hello.capacity if self.connected else 0

    relayed: frozenset[str] = frozenset()

    def ready(self, model: str) -> bool:
        return model in self.models()

    async def ensure_loaded(self, model: str, timeout: float) -> None:
        return None

    async def load(self, model: str, timeout: float) -> None:
        raise NeutrinoError(ErrorKind.UNSUPPORTED, "the in-process engine loads no models")

    async def unload(self, model: str) -> None:
        raise NeutrinoError(ErrorKind.UNSUPPORTED, "the in-process engine loads no models")

    def drain(self, engine: str) -> int:
        raise NeutrinoError(ErrorKind.NOT_FOUND, f"no engine is named {engine!r}")

    def resume(self, engine: str) -> None:
        raise NeutrinoError(ErrorKind.NOT_FOUND, f"no engine is named {engine!r}")

    def model_engines(self, model: str) -> list[tuple[str, ModelState]]:
        return [("in-process", ModelState.LOADED)] if model in self.models() else []

    async def relay(
        self, model: str, path: str, doc: dict[str, Any], raw: bytes, traceparent: str
    ) -> Relayed:
        raise NeutrinoError(ErrorKind.MODEL_NOT_FOUND, f"no upstream relays {model!r}")

    def submit(self, query: Query, sink: StreamSink) -> LinkSubmission:
        if not self.connected:
            raise NeutrinoError(ErrorKind.NO_ENGINE, "no inference engine is connected")
        rid = self.link.submit(query, sink)
        self._pump()
        return LinkSubmission(self, rid)

    def cancel(self, rid: int, reason: str) -> bool:
        sent = self.link.cancel(rid, reason)
        self._pump()
        return sent

    def forget(self, rid: int) -> None:
        self.link.forget(rid)

    def receive(self, frames: list[tuple[int, Message]]) -> None:
        """Engine frames that reach the link together, as in one socket read."""
        self.link.receive_messages(frames)
        self._pump()

    def _pump(self) -> None:
        """What the link queued reaches the engine's session now."""
        line = self.line
        session = line.session
        for rid, msg in self.link.messages_to_send():
            if isinstance(msg, Cancel):
                self.cancels.append((rid, msg.reason))
            elif isinstance(msg, _QUERIES):
                self.queries.append(msg)
            session.receive(rid, msg)
        if session.closing is not None:  # the client broke the protocol
            line.flush()
            self.disconnect()
        elif session.wants_to_send:
            line.flush_soon()

    def disconnect(self) -> None:
        """The connection is lost: every request in flight fails, the engine stops them."""
        self.line.open = False
        self.link.connection_lost()
        self.line.session.connection_lost()

    def drop(self) -> None:
        """The connection breaks and the client reconnects at once, as a pool does."""
        self.disconnect()
        self.link, self.line, self.hello = self._connect()

    def snapshot(self) -> list[dict[str, object]]:
        return [{"name": "in-process", "connected": self.connected, "inflight": len(self.active)}]

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        if self.line.open:
            self.disconnect()
