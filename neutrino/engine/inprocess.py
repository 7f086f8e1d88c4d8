"""An :class:`EngineClient` that runs a sans-IO engine core in the same event loop.

The in-process counterpart of the UNIX-socket router, like an HTTP client's mock
transport: frames are not serialised, but they pass through the same
:class:`neutrino.engine.link.EngineLink` as on a socket, so the protocol's rules
(late frames, final frames, failing sinks, engine errors, a lost connection) are
the real ones. The core (for example ``mocks.mock_ie.core.MockEngine``) decides
every token; each engine frame is delivered from its own loop callback, as a
socket read would be.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

from neutrino.engine.client import LinkSubmission, StreamSink
from neutrino.engine.link import EngineLink, Handshaken
from neutrino.engine.messages import (
    Cancel,
    EngineError,
    ErrorCode,
    FinishReason,
    HelloAck,
    Message,
    ModalQuery,
    ModelInfo,
    Query,
    TextQuery,
    TextResult,
)
from neutrino.errors import ErrorKind, NeutrinoError


class CoreGeneration(Protocol):
    def next(self) -> Any:
        """A TextResult, or a fault object with a ``kind`` of drop/error/stall."""
        ...

    def cancel(self) -> TextResult: ...


class EngineCore(Protocol):
    def hello_ack(self) -> HelloAck: ...

    def start(self, query: TextQuery) -> Any:
        """A CoreGeneration or an EngineError."""
        ...


class _Run:
    """One query on the in-process engine: stepped one frame per loop callback."""

    __slots__ = ("client", "gen", "handle", "rid")

    def __init__(self, client: InProcessEngineClient, rid: int, gen: CoreGeneration) -> None:
        self.client = client
        self.rid = rid
        self.gen = gen
        self.handle: asyncio.Handle | None = asyncio.get_running_loop().call_soon(self.step)

    def step(self) -> None:
        self.handle = None
        item = self.gen.next()
        if isinstance(item, TextResult):
            if item.finish_reason is FinishReason.NONE:
                self.handle = asyncio.get_running_loop().call_soon(self.step)
            else:
                self.client.runs.pop(self.rid, None)
            self.client.deliver(self.rid, item)
            return
        kind = getattr(item, "kind", "error")
        if kind == "stall":
            return  # still in flight as far as the engine is concerned
        self.client.runs.pop(self.rid, None)
        if kind == "drop":
            self.client.drop()
        else:
            self.client.deliver(self.rid, EngineError(item.code, item.message))

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


class InProcessEngineClient:
    def __init__(self, core: EngineCore) -> None:
        self.core = core
        self.hello = core.hello_ack()
        self._models = {m.name: m for m in self.hello.models}
        self.runs: dict[int, _Run] = {}
        self.queries: list[Query] = []
        self.cancels: list[tuple[int, str]] = []
        self.link = self._connect()

    def _connect(self) -> EngineLink:
        link = EngineLink("in-process")
        link.messages_to_send()  # the hello, which the core answers at once
        if not isinstance(link.receive_messages([(0, self.hello)]), Handshaken):
            raise ConnectionError("the in-process engine refused the hello")
        return link

    @property
    def connected(self) -> bool:
        return self.link.ready

    def models(self) -> Mapping[str, ModelInfo]:
        return self._models if self.connected else {}

    def has_engine(self) -> bool:
        return self.connected

    async def wait_for(self, model: str, timeout: float) -> bool:
        return model in self.models()  # nothing here restarts

    def capacity(self) -> int:
        return self.hello.capacity if self.connected else 0

    # ------------------------------------------------------------------ client side

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

    def deliver(self, rid: int, msg: Message) -> None:
        """An engine frame reaches the link (a 'read')."""
        self.receive([(rid, msg)])

    def receive(self, frames: list[tuple[int, Message]]) -> None:
        """Engine frames that reach the link together, as in one socket read."""
        self.link.receive_messages(frames)
        self._pump()

    def _pump(self) -> None:
        """Hand what the link sends to the engine core."""
        for rid, msg in self.link.messages_to_send():
            if isinstance(msg, TextQuery):
                self.queries.append(msg)
                self._start(rid, msg)
            elif isinstance(msg, ModalQuery):
                self.queries.append(msg)
                self._answer(rid, msg)
            elif isinstance(msg, Cancel):
                self.cancels.append((rid, msg.reason))
                run = self.runs.pop(rid, None)
                if run is not None:
                    run.stop()

    # ------------------------------------------------------------------ engine side

    def _start(self, rid: int, query: TextQuery) -> None:
        started = self.core.start(query)
        if isinstance(started, EngineError):
            asyncio.get_running_loop().call_soon(self.deliver, rid, started)
        else:
            self.runs[rid] = _Run(self, rid, started)

    def _answer(self, rid: int, query: ModalQuery) -> None:
        """Modality queries: the core's ``answer(query)`` gives every frame at once."""
        answer = getattr(self.core, "answer", None)
        got = answer(query) if answer is not None else None
        if got is None:
            got = EngineError(ErrorCode.UNSUPPORTED, "this engine does not serve that query")
        frames = [got] if isinstance(got, EngineError) else got
        loop = asyncio.get_running_loop()
        for frame in frames:
            loop.call_soon(self.deliver, rid, frame)

    def disconnect(self) -> None:
        """Fail every request in flight, as a lost engine connection does."""
        runs, self.runs = self.runs, {}
        for run in runs.values():
            run.stop()
        self.link.connection_lost()

    def drop(self) -> None:
        """The connection breaks and the client reconnects at once, as a pool does."""
        self.disconnect()
        self.link = self._connect()

    def snapshot(self) -> list[dict[str, object]]:
        return [{"name": "in-process", "connected": self.connected, "inflight": len(self.runs)}]

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        self.disconnect()
