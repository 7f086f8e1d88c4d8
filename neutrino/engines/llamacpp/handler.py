"""The llama.cpp engine's protocol side: an :class:`EngineHandler` per client connection
over one shared :class:`LlamaEngine`, whose decode thread runs the :class:`Scheduler`.

The event loop never waits on llama.cpp: queries and cancels go into the scheduler's
queue; each step's frames come back in one ``call_soon_threadsafe`` and leave, per
connection, in one write (one ``tokenBatch`` frame for the step's plain tokens).
Checks that need no model (the model's name, ids in the vocabulary, the context, the
queue's bound) answer at once, before the query reaches the thread.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
import threading

from neutrino.engine.messages import (
    Capability,
    EngineError,
    ErrorCode,
    HelloAck,
    ModelInfo,
    Pong,
    Query,
    TextQuery,
)
from neutrino.engine.wire.schema import PROTOCOL_VERSION
from neutrino.engines.llamacpp.backend import Backend
from neutrino.engines.llamacpp.scheduler import Frames, Scheduler
from neutrino.engines.serve import ConnectionHandler, ServerConnection
from neutrino.engines.session import text_query

log = logging.getLogger("neutrino.engines.llamacpp")

ENGINE_NAME = "neutrino-llamacpp/0.1.0"
MAX_TOP_LOGPROBS = 20


class LlamaEngine:
    """The model, its decode thread, and the requests of every connection."""

    def __init__(
        self,
        backend: Backend,
        model: str,
        *,
        max_waiting: int = 256,
        stats_path: str | None = None,
    ) -> None:
        self.backend = backend
        self.model = model
        self.max_waiting = max_waiting
        self.scheduler = Scheduler(backend, self._emit, stats_path)
        self._owners: dict[int, tuple[ServerConnection, int]] = {}
        self._keys = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._decode, name="decode", daemon=True)
        self._thread.start()

    def _decode(self) -> None:
        """The decode thread; if its loop ever dies, the process stops (SIGTERM to itself)
        so that whoever runs it (Neutrino's managed engines) starts a sound one."""
        try:
            self.scheduler.run()
        except BaseException:
            log.exception("the decode loop died; stopping the engine")
            os.kill(os.getpid(), signal.SIGTERM)

    def stop(self, timeout: float = 5.0) -> None:
        self.scheduler.stop()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def busy(self) -> bool:
        """Requests of any connection are running or waiting."""
        return bool(self._owners)

    def close(self) -> None:
        """Stop the decode thread and free the model (an unload)."""
        self.stop()
        self.backend.close()

    def hello_ack(self) -> HelloAck:
        info = ModelInfo(self.model, self.backend.n_ctx_seq, 0, (Capability.GENERATE,))
        return HelloAck(
            ENGINE_NAME,
            PROTOCOL_VERSION,
            [info],
            self.backend.cfg.slots,
            continues=True,
            continues_guided=True,
        )

    # ------------------------------------------------------------------ requests

    def check(self, q: TextQuery) -> EngineError | None:
        """What can be refused without the model (answered at once)."""
        if q.model != self.model:
            return EngineError(ErrorCode.UNKNOWN_MODEL, f"this engine serves {self.model!r}")
        if q.images:
            return EngineError(ErrorCode.UNSUPPORTED, "this engine takes no images")
        prompt, ctx = q.prompt_tokens, self.backend.n_ctx_seq
        if not prompt:
            return EngineError(ErrorCode.INVALID_REQUEST, "the prompt is empty")
        forced = q.forced_tokens
        if len(prompt) + len(forced) >= ctx:
            return EngineError(
                ErrorCode.CONTEXT_LENGTH,
                f"the prompt has {len(prompt)} tokens; this engine's context is {ctx}",
            )
        ids = [*prompt, *forced] if forced else prompt
        if min(ids) < 0 or max(ids) >= self.backend.n_vocab:
            return EngineError(ErrorCode.INVALID_REQUEST, "a token id is outside the vocabulary")
        s = q.sampling
        if len(forced) >= s.max_tokens:
            return EngineError(ErrorCode.INVALID_REQUEST, "the forced tokens reach max_tokens")
        if s.max_tokens < 1 or not 0 <= s.top_logprobs <= MAX_TOP_LOGPROBS:
            return EngineError(ErrorCode.INVALID_REQUEST, "bad max_tokens or top_logprobs")
        if s.temperature < 0 or not 0 < s.top_p <= 1 or s.repetition_penalty <= 0:
            return EngineError(ErrorCode.INVALID_REQUEST, "bad temperature, top_p or penalty")
        if len(self._owners) >= self.backend.cfg.slots + self.max_waiting:
            return EngineError(ErrorCode.OVERLOADED, "the engine's queue is full")
        return None

    def submit(self, conn: ServerConnection, rid: int, q: TextQuery) -> int:
        key = next(self._keys)
        self._owners[key] = (conn, rid)
        self.scheduler.start(key, q)
        return key

    def cancel(self, key: int) -> None:
        if self._owners.pop(key, None) is not None:
            self.scheduler.cancel(key)

    # ------------------------------------------------------------------ results

    def _emit(self, frames: Frames) -> None:
        """From the decode thread: one step's frames, handed to the loop at once."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._deliver, frames)

    def _deliver(self, frames: Frames) -> None:
        owners = self._owners
        for key, msg in frames:
            owner = owners.get(key)
            if owner is None:  # cancelled meanwhile
                continue
            conn, rid = owner
            conn.send(rid, msg)
            if rid not in conn.session.active:  # its final frame (or the connection is gone)
                del owners[key]


class LlamaHandler(ConnectionHandler[LlamaEngine]):
    """One client connection's requests."""

    def __init__(self, engine: LlamaEngine) -> None:
        super().__init__(engine)
        self._keys: dict[int, int] = {}  # request id -> engine key

    def ping(self, rid: int, nonce: int) -> Pong:
        """The pong, with the engine's load: sequences decoding and waiting for a slot,
        from every client (read from the decode thread's lists: a count may be a step
        old)."""
        sched = self.engine.scheduler
        waiting = len(sched.waiting) + sched.inbox.qsize()
        return Pong(nonce, running=len(sched.running), waiting=waiting)

    def start(self, rid: int, query: Query) -> EngineError | None:
        text = text_query(query, self.engine.check)
        if isinstance(text, EngineError):
            return text
        assert self.conn is not None
        if len(self._keys) > 2 * self.engine.backend.cfg.slots:  # drop finished requests
            active = self.conn.session.active
            self._keys = {r: k for r, k in self._keys.items() if r in active}
        self._keys[rid] = self.engine.submit(self.conn, rid, text)
        return None

    def cancel(self, rid: int, reason: str) -> None:
        key = self._keys.pop(rid, None)
        if key is not None:
            self.engine.cancel(key)

    def lost(self) -> None:
        for key in self._keys.values():
            self.engine.cancel(key)
        self._keys.clear()


def connection(engine: LlamaEngine) -> ServerConnection:
    """A client connection's protocol object."""
    return LlamaHandler(engine).connect()
