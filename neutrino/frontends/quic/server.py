"""The HTTP/3 listener (``[server] quic_address``): UDP socket, TLS, connections."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aioquic.asyncio.server import QuicServer
from aioquic.h3.connection import H3_ALPN, ErrorCode
from aioquic.quic.configuration import QuicConfiguration

from neutrino.config import Config
from neutrino.config.checks import split_address
from neutrino.errors import StartupError, os_reason
from neutrino.frontends.http.to_aiohttp import HandlerFactory
from neutrino.frontends.quic import tls
from neutrino.frontends.quic.protocol import H3Protocol, Route, Settings

log = logging.getLogger("neutrino.http")

_CLOSE_S = 0.05  # at stop: for the connections' CONNECTION_CLOSE to leave


class Http3Server:
    """HTTP/3 in front of the same routes as HTTP/1.1: ``routes`` (path -> handler of an
    Exchange) for the generation routes, ``relay_factory`` (the aiohttp runner's
    ``web.Server``) for the rest."""

    def __init__(
        self,
        cfg: Config,
        routes: dict[bytes, Callable[[Any], Awaitable[None]]],
        relay_factory: HandlerFactory,
    ) -> None:
        self.cfg = cfg
        self.address = cfg.server.quic_address
        http = cfg.http
        fast: dict[bytes, Route] = dict(routes)
        self.settings = Settings(
            routes=fast,
            relay_factory=relay_factory,
            max_body_bytes=cfg.limits.max_body_bytes,
            header_timeout_s=http.header_timeout_s,
            body_timeout_s=http.body_timeout_s,
            idle_timeout_s=http.keepalive_timeout_s,
        )
        self.port = 0
        self.fingerprint = ""
        self._server: QuicServer | None = None

    def _configuration(self, host: str) -> QuicConfiguration:
        server = self.cfg.server
        creds = tls.load(server.tls_cert, server.tls_key, server.tls_dir, host)
        self.fingerprint = creds.fingerprint
        kind = "self-signed, in" if creds.self_signed else "from"
        log.info(
            "HTTP/3 certificate (%s %s): SHA-256 fingerprint %s",
            kind,
            creds.source,
            creds.fingerprint,
        )
        config = QuicConfiguration(
            is_client=False,
            alpn_protocols=list(H3_ALPN),
            idle_timeout=self.settings.idle_timeout_s,
        )
        config.certificate = creds.chain[0]
        config.certificate_chain = creds.chain[1:]
        config.private_key = creds.key
        return config

    async def start(self) -> None:
        quic_log = logging.getLogger("quic")  # aioquic's: a few lines per connection
        if quic_log.level == logging.NOTSET and not log.isEnabledFor(logging.DEBUG):
            quic_log.setLevel(logging.WARNING)
        host, port = split_address(self.address, "[server] quic_address")
        if port == 0 and self.cfg.worker.active:
            raise StartupError(
                "under --workers, HTTP/3 needs a fixed port ([server] quic_address or "
                "--quic-address HOST:PORT): each worker would pick its own"
            )
        config = self._configuration(host)
        create = functools.partial(H3Protocol, settings=self.settings)
        loop = asyncio.get_running_loop()
        try:
            transport, server = await loop.create_datagram_endpoint(
                lambda: QuicServer(configuration=config, create_protocol=create),
                local_addr=(host, port),
                reuse_port=self.cfg.worker.active or None,  # shared by the --workers
            )
        except OSError as exc:
            raise StartupError(
                f"cannot listen for HTTP/3 on udp {self.address}: {os_reason(exc)} "
                '(set [server] quic_address or --quic-address; "" turns HTTP/3 off)'
            ) from exc
        self._server = server
        self.port = transport.get_extra_info("sockname")[1]
        log.info("Neutrino HTTP/3 listening on udp %s:%d", host, self.port)

    @property
    def busy(self) -> bool:
        """A connection still answering a request."""
        return any(c.busy for c in self.settings.connections)

    async def stop(self) -> None:
        """Close every connection (their requests have been ended by the drain) and the
        socket."""
        server, self._server = self._server, None
        if server is None:
            return
        conns = list(self.settings.connections)
        for conn in conns:
            conn.close(error_code=ErrorCode.H3_NO_ERROR, reason_phrase="server shutting down")
        if conns:
            await asyncio.sleep(_CLOSE_S)
        for conn in conns:
            conn.stopped()
        server.close()
