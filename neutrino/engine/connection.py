"""One connection to an engine (a UNIX socket, or TCP), multiplexing many requests.

A thin asyncio adapter around the sans-IO :class:`neutrino.engine.link.EngineLink`,
which holds every rule of the protocol: bytes in go to the link (which hands
results to the requests' sinks synchronously, no task per request); what the link
queues goes out in one write per loop iteration; a timer drives its heartbeat.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import cast

from neutrino.engine.client import StreamSink
from neutrino.engine.link import EngineLink, Handshaken, LinkEvent, ModelsUpdated, Refused
from neutrino.engine.messages import HelloAck, LoadModel, ModelInfo, Query, UnloadModel
from neutrino.engine.stats import EngineStats
from neutrino.engine.wire.schema import MAX_FRAME_BYTES
from neutrino.errors import ErrorKind, NeutrinoError

log = logging.getLogger("neutrino.engine")


class EngineConnection(asyncio.Protocol):
    """A connected, handshaken link to one engine: :class:`EngineLink` on a socket."""

    def __init__(
        self,
        name: str,
        *,
        on_lost: Callable[[EngineConnection, Exception | None], None] | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        stats: EngineStats | None = None,
        token: str = "",
    ) -> None:
        self.name = name
        self.link = EngineLink(name, max_frame_bytes=max_frame_bytes, stats=stats, token=token)
        self._on_lost = on_lost
        self._transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flush_due = False
        self._slicing = False  # reading paused while a read's frames are handled in slices
        self._ack: asyncio.Future[HelloAck] | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self._open = False  # handshaken and not lost (the pool asks on every request)
        # The engine is not reading as fast as we write: the pool sends new queries to
        # another connection while it can (what is queued here is bounded by admission).
        self.write_paused = False
        # Told the engine's models whenever they change (it loaded or unloaded one).
        self.on_models: Callable[[list[ModelInfo]], None] | None = None

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def open(
        cls,
        target: str | tuple[str, int],
        name: str,
        *,
        timeout: float,
        heartbeat_interval: float,
        heartbeat_timeout: float,
        on_lost: Callable[[EngineConnection, Exception | None], None] | None = None,
        stats: EngineStats | None = None,
        token: str = "",
    ) -> EngineConnection:
        """Connect to ``target`` (a UNIX socket's path, or a TCP host and port, whose
        engine asks for ``token`` in the hello) and wait for the handshake."""
        loop = asyncio.get_running_loop()
        conn = cls(name, on_lost=on_lost, stats=stats, token=token)
        conn._ack = loop.create_future()
        async with asyncio.timeout(timeout):
            if isinstance(target, tuple):
                await loop.create_connection(lambda: conn, target[0], target[1])
            else:
                await loop.create_unix_connection(lambda: conn, target)
            try:
                await conn._ack
            except BaseException:
                conn.close()
                raise
        if heartbeat_interval > 0:
            conn._heartbeat = loop.create_task(
                conn._heartbeat_loop(heartbeat_interval, heartbeat_timeout)
            )
        return conn

    @property
    def hello(self) -> HelloAck | None:
        return self.link.hello

    @property
    def cancels_sent(self) -> int:
        return self.link.cancels_sent

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        self._loop = asyncio.get_running_loop()
        self._flush()  # the hello

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._open = False
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        if self._ack is not None and not self._ack.done():
            self._ack.set_exception(ConnectionError("engine closed the connection during hello"))
        self.link.connection_lost()
        if self._on_lost is not None:
            self._on_lost(self, exc)

    def close(self) -> None:
        if self._transport is not None:
            self._flush()  # queued cancels still reach the engine
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    @property
    def is_open(self) -> bool:
        return self._open

    @property
    def inflight(self) -> int:
        return len(self.link.streams)

    # ------------------------------------------------------------------ requests

    def submit(self, query: Query, sink: StreamSink) -> int:
        """Send a query; results go to ``sink``. Returns the request id."""
        if self._transport is None:
            raise NeutrinoError(ErrorKind.NO_ENGINE, "no engine connection is available")
        rid = self.link.submit(query, sink)
        self._flush_soon()
        return rid

    def cancel(self, rid: int, reason: str) -> bool:
        """Send one cancel frame if the request is still in flight; forget it."""
        sent = self.link.cancel(rid, reason)
        if sent:
            self._flush_soon()
        return sent

    def forget(self, rid: int) -> None:
        self.link.forget(rid)

    # ------------------------------------------------------------------ I/O

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False

    def _flush_soon(self) -> None:
        """Frames queued in one loop iteration leave in one write (one system call
        for the many requests that share a connection)."""
        if not self._flush_due and self._loop is not None:
            self._flush_due = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        t = self._transport
        if t is not None and self.link.wants_to_send and not t.is_closing():
            t.write(self.link.data_to_send())

    def data_received(self, data: bytes) -> None:
        link = self.link
        event = link.receive_data(data)
        if event is not None:
            self._on_event(event)
        if link.pending:  # the rest of this read on the loop's next turns
            self._slice_soon()
        if link.wants_to_send:
            self._flush_soon()

    def _slice_soon(self) -> None:
        """Stop reading while frames already read wait; handle them a slice per turn of
        the event loop, so that one large read never holds it."""
        t, loop = self._transport, self._loop
        if t is None or loop is None or self._slicing:
            return
        self._slicing = True
        t.pause_reading()
        loop.call_soon(self._next_slice)

    def _next_slice(self) -> None:
        link = self.link
        event = link.receive_pending()
        if event is not None:
            self._on_event(event)
        if link.wants_to_send:
            self._flush_soon()
        t = self._transport
        if link.pending and t is not None and self._loop is not None:
            self._loop.call_soon(self._next_slice)
            return
        self._slicing = False
        if t is not None and not t.is_closing():
            t.resume_reading()

    async def control(self, msg: LoadModel | UnloadModel) -> None:
        """Load or unload a model; returns once the engine did it (raises NeutrinoError:
        the engine's refusal, or the connection lost)."""
        loop = self._loop or asyncio.get_running_loop()
        done: asyncio.Future[NeutrinoError | None] = loop.create_future()

        def told(error: NeutrinoError | None) -> None:
            if not done.done():
                done.set_result(error)

        self.link.control(msg, told)
        self._flush_soon()
        error = await done
        if error is not None:
            raise error

    def _on_event(self, event: LinkEvent) -> None:
        if isinstance(event, ModelsUpdated):
            if self.on_models is not None:
                self.on_models(event.models)
            return
        if isinstance(event, Handshaken):
            self._open = True
            if self._ack is not None and not self._ack.done():
                self._ack.set_result(event.ack)
            return
        self._open = False
        if isinstance(event, Refused) and self._ack is not None and not self._ack.done():
            self._ack.set_exception(ConnectionError(event.reason))
        self.abort()

    async def _heartbeat_loop(self, interval: float, timeout: float) -> None:
        """Ping every ``interval``; abort once the engine has shown no sign of life
        (a read from it, or its reading of ours: liveness.py) for ``timeout + interval``."""
        loop = asyncio.get_running_loop()
        self.link.watch(loop.time(), timeout + interval)
        while self.is_open:
            await asyncio.sleep(interval)
            t = self._transport
            pending = t.get_write_buffer_size() if t is not None else 0
            if not self.link.heartbeat(loop.time(), pending):
                self.link.stats.heartbeat_misses += 1
                log.error(
                    "engine %s showed no sign of life for %.1f s (nothing received, %d bytes "
                    "for it unread); closing the connection",
                    self.name,
                    loop.time() - self.link.silent_since,
                    pending,
                )
                self.abort()
                return
            self._flush_soon()
