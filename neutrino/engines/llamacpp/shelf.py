"""The llama.cpp engine serving every GGUF file of a folder (``--models-dir``), each loaded
on the client's request within ``--memory-budget`` (the files' sizes count against it).

Each model, once loaded, is a :class:`LlamaEngine` of its own (its llama.cpp context and
decode thread); a load runs on a worker thread, so the event loop keeps serving the other
models meanwhile. An unload waits for the model's requests to end, then frees it. Every
connection is told the new table (``modelsChanged``) after each load and unload; a query
of a model that is not loaded is refused. What to load and evict is the client's choice
(Neutrino's ``engine/fleet/lifecycle.py``); the budget is only enforced here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from neutrino.engine.messages import (
    Capability,
    EngineError,
    ErrorCode,
    Hello,
    HelloAck,
    LoadModel,
    ModelInfo,
    ModelsChanged,
    ModelState,
    Query,
    TextQuery,
    UnloadModel,
)
from neutrino.engine.wire.schema import PROTOCOL_VERSION
from neutrino.engines.llamacpp.handler import ENGINE_NAME, LlamaEngine
from neutrino.engines.serve import ServerConnection
from neutrino.engines.session import EngineHandler, not_served

log = logging.getLogger("neutrino.engines.llamacpp")

# Builds a model's engine from its file and name (on a worker thread: it loads weights).
MakeEngine = Callable[[Path, str], LlamaEngine]


class Shelf:
    """The folder's models: which are loaded, and their engines."""

    def __init__(self, folder: Path, budget: int, ctx: int, slots: int, make: MakeEngine) -> None:
        self.files = {p.stem: p for p in sorted(folder.glob("*.gguf"))}
        self.budget = budget
        self.ctx = ctx
        self.slots = slots
        self.loaded: dict[str, LlamaEngine] = {}
        self.loading: set[str] = set()
        self.handlers: set[ShelfHandler] = set()
        self._make = make

    def size(self, name: str) -> int:
        return self.files[name].stat().st_size

    def infos(self) -> list[ModelInfo]:
        out: list[ModelInfo] = []
        for name in self.files:
            engine = self.loaded.get(name)
            state = ModelState.LOADED if engine is not None else ModelState.UNLOADED
            if name in self.loading:
                state = ModelState.LOADING
            ctx = engine.backend.n_ctx_seq if engine is not None else self.ctx
            out.append(ModelInfo(name, ctx, 0, (Capability.GENERATE,), 0, state, self.size(name)))
        return out

    def hello_ack(self) -> HelloAck:
        return HelloAck(
            ENGINE_NAME, PROTOCOL_VERSION, self.infos(), self.slots, memory_budget=self.budget
        )

    def engine_for(self, name: str) -> LlamaEngine | EngineError:
        engine = self.loaded.get(name)
        if engine is not None:
            return engine
        if name in self.files:
            return EngineError(ErrorCode.UNSUPPORTED, f"the model {name!r} is not loaded")
        return EngineError(ErrorCode.UNKNOWN_MODEL, f"unknown model {name!r}")

    async def load(self, name: str) -> EngineError | None:
        if name not in self.files:
            return EngineError(ErrorCode.UNKNOWN_MODEL, f"unknown model {name!r}")
        if name in self.loaded:
            return None
        if name in self.loading:
            return EngineError(ErrorCode.OVERLOADED, f"the model {name!r} is being loaded")
        held = sum(self.size(n) for n in (*self.loaded, *self.loading))
        if held + self.size(name) > self.budget:
            return EngineError(ErrorCode.OVERLOADED, f"no memory left to load {name!r}")
        self.loading.add(name)
        try:
            engine = await asyncio.to_thread(self._make, self.files[name], name)
        except Exception as exc:
            log.exception("loading %s failed", name)
            return EngineError(ErrorCode.INTERNAL, f"loading {name!r} failed: {exc}")
        finally:
            self.loading.discard(name)
        engine.start()
        self.loaded[name] = engine
        log.info("loaded %s (%d bytes)", name, self.size(name))
        return None

    async def unload(self, name: str) -> EngineError | None:
        if name not in self.files:
            return EngineError(ErrorCode.UNKNOWN_MODEL, f"unknown model {name!r}")
        engine = self.loaded.get(name)
        if engine is None:
            return None
        while engine.busy:  # its requests end first
            await asyncio.sleep(0.02)
        del self.loaded[name]
        await asyncio.to_thread(engine.close)
        log.info("unloaded %s", name)
        return None

    async def close(self) -> None:
        for name in list(self.loaded):
            await asyncio.to_thread(self.loaded.pop(name).close)


class ShelfHandler(EngineHandler):
    """One client connection's requests, each sent to its model's engine."""

    def __init__(self, shelf: Shelf) -> None:
        self.shelf = shelf
        self.conn: ServerConnection | None = None
        self._keys: dict[int, tuple[LlamaEngine, int]] = {}  # request id -> engine, key
        self._controls: set[asyncio.Task[None]] = set()
        shelf.handlers.add(self)

    def hello_ack(self, hello: Hello) -> HelloAck:
        return self.shelf.hello_ack()

    def start(self, rid: int, query: Query) -> EngineError | None:
        if not isinstance(query, TextQuery):
            return not_served(query)
        engine = self.shelf.engine_for(query.model)
        if isinstance(engine, EngineError):
            return engine
        refused = engine.check(query)
        if refused is not None:
            return refused
        assert self.conn is not None
        if len(self._keys) > 2 * self.shelf.slots * max(1, len(self.shelf.loaded)):
            active = self.conn.session.active
            self._keys = {r: k for r, k in self._keys.items() if r in active}
        self._keys[rid] = (engine, engine.submit(self.conn, rid, query))
        return None

    def cancel(self, rid: int, reason: str) -> None:
        got = self._keys.pop(rid, None)
        if got is not None:
            got[0].cancel(got[1])

    def control(self, rid: int, msg: LoadModel | UnloadModel) -> EngineError | None:
        task = asyncio.get_running_loop().create_task(self._control(rid, msg))
        self._controls.add(task)
        task.add_done_callback(self._controls.discard)
        return None

    async def _control(self, rid: int, msg: LoadModel | UnloadModel) -> None:
        shelf = self.shelf
        load = isinstance(msg, LoadModel)
        err = await (shelf.load(msg.name) if load else shelf.unload(msg.name))
        if self.conn is None:
            return
        if err is not None:
            self.conn.send(rid, err)
            return
        table = ModelsChanged(shelf.infos())
        self.conn.send(rid, table)
        for other in shelf.handlers:
            if other is not self and other.conn is not None:
                other.conn.send(0, table)

    def lost(self) -> None:
        for engine, key in self._keys.values():
            engine.cancel(key)
        self._keys.clear()
        self.shelf.handlers.discard(self)


def connection(shelf: Shelf) -> ServerConnection:
    handler = ShelfHandler(shelf)
    handler.conn = ServerConnection(handler)
    return handler.conn
