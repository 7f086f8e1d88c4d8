"""The gRPC server: ``neutrino.v1`` services, ``grpc.health.v1`` and reflection (v1 and
v1alpha).

It runs on the process's event loop beside the HTTP server (``grpc.aio``) and is
started and stopped by :class:`neutrino.app.Neutrino`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from neutrino.config import Config
from neutrino.errors import StartupError, os_reason
from neutrino.frontends.grpc import reflection
from neutrino.frontends.grpc.audio import AudioService
from neutrino.frontends.grpc.embeddings import EmbeddingsService
from neutrino.frontends.grpc.register import add_service
from neutrino.frontends.grpc.service import InferenceService
from neutrino.frontends.grpc.stubs import (
    audio_pb2,
    audio_pb2_grpc,
    embeddings_pb2,
    embeddings_pb2_grpc,
    inference_pb2,
    inference_pb2_grpc,
    vision_pb2,
    vision_pb2_grpc,
)
from neutrino.frontends.grpc.vision import VisionService
from neutrino.pipeline.orchestrator import Orchestrator

log = logging.getLogger("neutrino.grpc")

INFERENCE_SERVICE: str = inference_pb2.DESCRIPTOR.services_by_name["Inference"].full_name
EMBEDDINGS_SERVICE: str = embeddings_pb2.DESCRIPTOR.services_by_name["Embeddings"].full_name
AUDIO_SERVICE: str = audio_pb2.DESCRIPTOR.services_by_name["Audio"].full_name
VISION_SERVICE: str = vision_pb2.DESCRIPTOR.services_by_name["Vision"].full_name
NEUTRINO_SERVICES = (INFERENCE_SERVICE, EMBEDDINGS_SERVICE, AUDIO_SERVICE, VISION_SERVICE)
HEALTH_SERVICE: str = health.SERVICE_NAME
# Health is reported for the whole server ("") and for each neutrino.v1 service.
_HEALTH_NAMES = (health.OVERALL_HEALTH, *NEUTRINO_SERVICES)


_HINT = " (set [grpc] address, --grpc-address, or [grpc] enabled = false)"


def _probe(address: str, reuse_port: bool = False) -> None:
    """Bind ``address`` as gRPC will, to fail with a clear reason (and before gRPC's core
    logs its own error lines) when it cannot be had. As for gRPC, one of the addresses the
    host resolves to is enough (``::`` may be missing where IPv6 is off); port 0 always is.
    ``reuse_port``: a worker of ``--workers`` shares the port (SO_REUSEPORT)."""
    host, _, port = address.rpartition(":")
    if int(port) == 0:
        return
    failure: OSError | None = None
    try:
        infos = socket.getaddrinfo(
            host.strip("[]") or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except OSError as exc:
        failure, infos = exc, []
    for family, kind, proto, _, sockaddr in infos:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, int(reuse_port))
                sock.bind(sockaddr)
            return
        except OSError as exc:
            failure = failure or exc
    if failure is not None:
        reason = os_reason(failure)
        raise StartupError(f"cannot listen for gRPC on {address}: {reason}{_HINT}") from failure


class GrpcServer:
    def __init__(self, cfg: Config, orchestrator: Orchestrator) -> None:
        self.cfg = cfg
        self.orch = orchestrator
        self.address = cfg.grpc.address
        self.port = 0
        self._server: grpc.aio.Server | None = None
        self._health: Any = None  # grpc_health's aio HealthServicer (untyped package)
        self._serving: bool | None = None
        self._refresh: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._draining = False

    async def start(self) -> None:
        limit = self.cfg.grpc.max_message_bytes
        shared = self.cfg.worker.active  # the workers of --workers share the port
        _probe(self.address, shared)
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", limit),
                # A port already taken is an error, not a port silently shared (but by
                # the workers of --workers, whose supervisor holds the port for them).
                ("grpc.so_reuseport", int(shared)),
                ("grpc.server.max_pending_requests", self.cfg.grpc.max_pending_calls),
                ("grpc.server.max_pending_requests_hard_limit", self.cfg.grpc.max_pending_calls),
            ]
        )
        try:
            self.port = server.add_insecure_port(self.address)
        except RuntimeError as exc:  # taken between the probe and here: gRPC's own words
            raise StartupError(f"cannot listen for gRPC on {self.address}: {exc}{_HINT}") from exc
        orch = self.orch
        add_service(
            inference_pb2_grpc.add_InferenceServicer_to_server, InferenceService(orch), server
        )
        add_service(
            embeddings_pb2_grpc.add_EmbeddingsServicer_to_server,
            EmbeddingsService(orch),
            server,
        )
        add_service(audio_pb2_grpc.add_AudioServicer_to_server, AudioService(orch), server)
        add_service(vision_pb2_grpc.add_VisionServicer_to_server, VisionService(orch), server)
        self._health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        reflection.enable((*NEUTRINO_SERVICES, HEALTH_SERVICE), server)
        # An engine that connects while the server starts sets the event; the watcher
        # then updates at once instead of one health interval later.
        self._refresh = asyncio.Event()
        await self._update()  # NOT_SERVING until an engine is there
        await server.start()
        self._server = server
        self._task = asyncio.create_task(self._watch(), name="grpc-health")
        host = self.address.rpartition(":")[0]
        log.info("Neutrino gRPC listening on %s:%d", host, self.port)

    def engines_changed(self) -> None:
        """Engines came or went: bring the health status up to date now."""
        if self._refresh is not None:
            self._refresh.set()

    def _wanted(self) -> bool:
        return not self._draining and not self.orch.draining and self.orch.engines.has_engine()

    async def _update(self) -> None:
        serving = self._wanted()
        if serving == self._serving:
            return
        self._serving = serving
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in _HEALTH_NAMES:
            await self._health.set(name, status)
        log.info("gRPC health: %s", "SERVING" if serving else "NOT_SERVING")

    async def _watch(self) -> None:
        assert self._refresh is not None
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.cfg.grpc.health_interval_s):
                    await self._refresh.wait()
            self._refresh.clear()
            await self._update()

    async def drain(self) -> None:
        """Report NOT_SERVING from now on; calls in flight go on."""
        self._draining = True
        if self._health is not None:
            await self._update()
            await self._health.enter_graceful_shutdown()

    async def stop(self, grace_s: float = 1.0) -> None:
        await self.drain()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._server is not None:
            t0 = time.monotonic()
            await self._server.stop(grace_s)
            log.debug("gRPC server stopped in %.3fs", time.monotonic() - t0)
            self._server = None
