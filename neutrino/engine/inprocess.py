"""An :class:`EngineClient` that runs a sans-IO engine core in the same event loop.

The in-process counterpart of the UNIX-socket router, like an HTTP client's mock
transport: the pipeline above it runs unchanged, frames are not serialised, and
the core (for example ``mocks.mock_ie.core.MockEngine``) decides every token.
Each result is delivered from its own loop callback, as a socket would.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from typing import Any, Protocol

from neutrino.engine.connection import StreamSink, classify_engine_error, sink_failure
from neutrino.engine.messages import (
    EngineError,
    FinishReason,
    HelloAck,
    ModalQuery,
    ModalResult,
    ModelInfo,
    Query,
    SpeechResult,
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
    __slots__ = ("cancelled", "client", "gen", "handle", "rid", "sink")

    def __init__(
        self, client: InProcessEngineClient, rid: int, gen: CoreGeneration, sink: StreamSink
    ) -> None:
        self.client = client
        self.rid = rid
        self.gen = gen
        self.sink = sink
        self.cancelled = False
        self.handle: asyncio.Handle | None = None

    def step(self) -> None:
        self.handle = None
        if self.cancelled:
            return
        item = self.gen.next()
        if isinstance(item, TextResult):
            final = item.finish_reason is not FinishReason.NONE
            if final:
                self.client.runs.pop(self.rid, None)
            try:
                if self.sink.on_result(item):
                    self.sink.flush()
            except Exception as exc:
                self.cancel("output rejected")  # a no-op once the engine has finished
                self.sink.on_error(sink_failure(exc))
                return
            if not final:
                self.handle = asyncio.get_running_loop().call_soon(self.step)
            return
        kind = getattr(item, "kind", "error")
        if kind == "stall":
            return  # still in flight as far as the engine is concerned
        self.client.runs.pop(self.rid, None)
        if kind == "drop":
            self.sink.on_error(
                NeutrinoError(ErrorKind.ENGINE_DISCONNECTED, "the engine connection was lost")
            )
            return
        self.sink.on_error(
            classify_engine_error(EngineError(item.code, item.message), "in-process")
        )

    def cancel(self, reason: str) -> bool:
        if self.client.runs.pop(self.rid, None) is None:
            return False
        self.cancelled = True
        if self.handle is not None:
            self.handle.cancel()
        self.client.cancels.append((self.rid, reason))
        return True

    def forget(self) -> None:
        self.client.runs.pop(self.rid, None)


class InProcessEngineClient:
    def __init__(self, core: EngineCore) -> None:
        self.core = core
        self.hello = core.hello_ack()
        self._models = {m.name: m for m in self.hello.models}
        self._ids = itertools.count(1)
        self.runs: dict[int, _Run] = {}
        self.queries: list[Query] = []
        self.cancels: list[tuple[int, str]] = []
        self.connected = True

    def models(self) -> Mapping[str, ModelInfo]:
        return self._models if self.connected else {}

    def has_engine(self) -> bool:
        return self.connected

    def capacity(self) -> int:
        return self.hello.capacity if self.connected else 0

    def submit(self, query: Query, sink: StreamSink) -> _Run:
        if not self.connected:
            raise NeutrinoError(ErrorKind.NO_ENGINE, "no inference engine is connected")
        self.queries.append(query)
        rid = next(self._ids)
        if not isinstance(query, TextQuery):
            return self._answer(rid, query, sink)
        started = self.core.start(query)
        if isinstance(started, EngineError):
            err = classify_engine_error(started, "in-process")
            run = _Run(self, rid, _Failed(), sink)
            asyncio.get_running_loop().call_soon(sink.on_error, err)
            return run
        run = _Run(self, rid, started, sink)
        self.runs[rid] = run
        run.handle = asyncio.get_running_loop().call_soon(run.step)
        return run

    def _answer(self, rid: int, query: ModalQuery, sink: StreamSink) -> _Run:
        """Modality queries: the core's ``answer(query)`` gives every frame at once."""
        answer = getattr(self.core, "answer", None)
        loop = asyncio.get_running_loop()
        run = _Run(self, rid, _Failed(), sink)
        got = answer(query) if answer is not None else None
        if got is None:
            err = NeutrinoError(ErrorKind.UNSUPPORTED, "this engine does not serve that query")
            loop.call_soon(sink.on_error, err)
        elif isinstance(got, EngineError):
            loop.call_soon(sink.on_error, classify_engine_error(got, "in-process"))
        else:
            self.runs[rid] = run
            for frame in got:
                loop.call_soon(self._deliver, run, frame)
        return run

    def _deliver(self, run: _Run, frame: ModalResult) -> None:
        if run.cancelled or self.runs.get(run.rid) is not run:
            return
        if not isinstance(frame, SpeechResult) or frame.final:
            self.runs.pop(run.rid, None)
        try:
            run.sink.on_modal(frame)
        except Exception as exc:
            run.cancel("output rejected")
            run.sink.on_error(sink_failure(exc))

    def disconnect(self) -> None:
        """Fail every request in flight, as a lost engine connection does."""
        self.connected = False
        runs, self.runs = self.runs, {}
        for run in runs.values():
            run.cancelled = True
            run.sink.on_error(
                NeutrinoError(ErrorKind.ENGINE_DISCONNECTED, "the engine connection was lost")
            )

    def snapshot(self) -> list[dict[str, Any]]:
        return [{"name": "in-process", "connected": self.connected, "inflight": len(self.runs)}]

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        self.disconnect()


class _Failed:
    def next(self) -> Any:  # pragma: no cover - never stepped
        raise RuntimeError("failed run")

    def cancel(self) -> TextResult:  # pragma: no cover
        return TextResult([], FinishReason.CANCELLED)
