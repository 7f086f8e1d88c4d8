"""Registration with a Sombrero load balancer (``protos/sombrero/v1/sombrero.proto``).

One background task runs the protocol: Register until it succeeds (jittered exponential
backoff while the balancer is down: the server's start never waits for it), then one
Report stream with a load report every ``report_interval_s``. When the stream breaks
(balancer gone) or its ack says the balancer does not know the instance (it restarted),
the task registers again, which is idempotent, and opens a new stream. ``deregister`` (the
first step of a drain) stops the task and removes the instance, within a time limit and
without raising. The rules (delays, what is logged) live in :mod:`.state`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from typing import Any

import grpc
import grpc.aio

from neutrino.backoff import Backoff
from neutrino.config import SombreroConfig
from neutrino.registration.loop import halt, keep_registered
from neutrino.registration.record import InstanceRecord, Source
from neutrino.registration.state import Registration
from neutrino.registration.wire import pb, pb_grpc, record_to_pb, report_to_pb

__all__ = ["SombreroRegistrar"]

log = logging.getLogger("neutrino.registration")

REGISTER_TIMEOUT_S = 5.0  # one Register call
CLOSE_TIMEOUT_S = 1.0  # closing the channel at stop
_OUTCOME_TIMEOUT_S = 5.0  # reading the status of a stream that failed a write


def channel_options(cfg: SombreroConfig) -> list[tuple[str, int]]:
    """gRPC's own reconnect backoff follows ours (its default grows to 120 s, and calls
    fail at once while it waits). Keepalive pings find a balancer that vanished without
    closing the connection (a report stream sends too little to fill a flow-control
    window for many minutes); one every 330 s, as gRPC servers (C core and Go) by default
    refuse pings more often than every 5 minutes on a stream they send nothing on."""
    return [
        ("grpc.initial_reconnect_backoff_ms", max(1, int(cfg.backoff_initial_s * 1000))),
        ("grpc.min_reconnect_backoff_ms", max(1, int(cfg.backoff_initial_s * 1000))),
        ("grpc.max_reconnect_backoff_ms", max(1, int(cfg.backoff_max_s * 1000))),
        ("grpc.keepalive_time_ms", 330_000),
        ("grpc.keepalive_timeout_ms", 20_000),
    ]


def _rpc_error(e: grpc.aio.AioRpcError) -> str:
    details = (e.details() or "").splitlines()
    return f"{e.code().name}: {details[0]}" if details else e.code().name


class SombreroRegistrar:
    """Registers this instance with the balancer at ``cfg.address`` and reports its load.

    ``start()`` from the running loop; ``await deregister(timeout_s)`` first on drain;
    ``await stop()`` at the end (a no-op after deregister). ``snapshot()`` for app_state.
    """

    def __init__(
        self, cfg: SombreroConfig, source: Source, *, rng: random.Random | None = None
    ) -> None:
        if not cfg.address:
            raise ValueError("no [sombrero] address: build a registrar only when one is set")
        self._cfg = cfg
        self._source = source
        backoff = Backoff(cfg.backoff_initial_s, cfg.backoff_max_s, rng=rng)
        self._state = Registration(f"Sombrero at {cfg.address}", backoff)
        self._channel: grpc.aio.Channel | None = None
        self._stub: Any = None  # pb_grpc.SombreroStub (generated, untyped)
        self._task: asyncio.Task[None] | None = None
        self._write_timeout = max(5.0, 3 * cfg.report_interval_s)
        self._instance_id = ""
        self._record: InstanceRecord | None = None  # as last registered
        self._register_sent = False  # a Register went out: deregister on drain

    def start(self) -> None:
        """Begin registering in the background; returns at once."""
        if self._task is not None or self._state.final:
            return
        self._channel = grpc.aio.insecure_channel(
            self._cfg.address, options=channel_options(self._cfg)
        )
        self._stub = pb_grpc.SombreroStub(self._channel)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="sombrero")

    async def deregister(self, timeout_s: float) -> None:
        """Stop reporting and remove the instance from the balancer, within ``timeout_s``.
        Never raises: a balancer that is down or slow gets a warning."""
        if self._state.final:
            return
        try:
            await asyncio.wait_for(self._deregister(), timeout_s)
        except TimeoutError:
            log.warning("sombrero: deregistering timed out after %.1f s", timeout_s)
        except grpc.aio.AioRpcError as e:
            log.warning("sombrero: deregistering failed (%s)", _rpc_error(e))
        except Exception:  # a bug: say where, once, and go on draining
            log.exception("sombrero: deregistering failed")
        self._state.finish(deregistered=True)
        await self._close()

    async def stop(self) -> None:
        """Stop without deregistering (the balancer drops the instance when its reports
        stop); a no-op after ``deregister``."""
        await self._halt()
        if not self._state.final:
            self._state.finish(deregistered=False)
        await self._close()

    def snapshot(self) -> dict[str, object]:
        """For /neutrino/v1/app_state."""
        return {
            "address": self._cfg.address,
            "instance_id": self._instance_id,
            **self._state.snapshot(),
        }

    async def _deregister(self) -> None:
        await self._halt()
        if not self._register_sent or self._stub is None:
            return
        request = pb.DeregisterRequest(instance_id=self._instance_id, reason="drain")
        reply = await self._stub.Deregister(request)
        known = "" if reply.found else " (the balancer did not know it)"
        log.info("sombrero: deregistered %s%s", self._instance_id, known)

    async def _halt(self) -> None:
        task, self._task = self._task, None
        await halt("sombrero", task)

    async def _close(self) -> None:
        channel, self._channel = self._channel, None
        self._stub = None
        if channel is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(channel.close(grace=None), CLOSE_TIMEOUT_S)

    async def _run(self) -> None:
        await keep_registered(
            "sombrero",
            self._state,
            lambda: self._send_record(self._source.record()),
            self._report,
            (grpc.aio.AioRpcError,),
            _rpc_error,
        )

    async def _send_record(self, record: InstanceRecord) -> None:
        self._instance_id = record.instance_id
        self._register_sent = True
        request = pb.RegisterRequest(record=record_to_pb(record))
        await self._stub.Register(request, timeout=REGISTER_TIMEOUT_S)
        self._record = record

    async def _report(self) -> tuple[str, BaseException | None]:
        """Stream load reports until the stream ends; returns why it ended (and the
        exception where the source failed)."""
        call = self._stub.Report()
        ended = asyncio.Event()
        call.add_done_callback(lambda _call: ended.set())
        try:
            while not call.done() and await self._tick(call):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(ended.wait(), self._cfg.report_interval_s)
            return await asyncio.wait_for(_outcome(call), _OUTCOME_TIMEOUT_S), None
        except _EndStream as end:
            return end.reason, end.unexpected
        except TimeoutError:
            return "the report stream did not end cleanly", None
        finally:
            call.cancel()  # nothing when it has ended

    async def _tick(self, call: Any) -> bool:
        """Send one load report, after the record when it changed (models come and go
        with engines; registering again replaces it). False when the call has ended."""
        try:
            record, load = self._source.record(), self._source.load()
        except Exception as e:  # the app's bug: its traceback once
            raise _EndStream(f"the source failed: {type(e).__name__}: {e}", e) from e
        if record != self._record:
            try:
                await self._send_record(record)
            except grpc.aio.AioRpcError as e:
                raise _EndStream(f"updating the record failed: {_rpc_error(e)}") from e
            log.info("sombrero: the record of %s changed; registered it again", record.instance_id)
        report = report_to_pb(self._instance_id, load, self._state.next_sequence())
        try:
            await asyncio.wait_for(call.write(report), self._write_timeout)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            return False  # the call ended: its status says why
        except TimeoutError as e:
            raise _EndStream("a load report could not be sent in time") from e
        self._state.reported()
        return True


class _EndStream(Exception):
    """The report stream must end, and why."""

    def __init__(self, reason: str, unexpected: BaseException | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.unexpected = unexpected


async def _outcome(call: Any) -> str:
    """Why a finished Report call ended."""
    code = await call.code()
    if code != grpc.StatusCode.OK:
        details = (await call.details() or "").splitlines()
        return f"report stream broke: {code.name}" + (f": {details[0]}" if details else "")
    ack = await call
    if ack.status == pb.ReportAck.UNKNOWN_INSTANCE:
        return "the balancer does not know this instance"
    return "the balancer ended the report stream"
