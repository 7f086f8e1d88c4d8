"""HTTP/3 over QUIC: a thin asyncio adapter over aioquic's sans-IO ``H3Connection``.

The same routes and handlers as HTTP/1.1: the generation routes through the
:class:`~neutrino.frontends.http.exchange.Exchange` seam (exchange.py), every other
route relayed to the aiohttp application as HTTP/1.1 over an in-memory transport
(relay.py). protocol.py is one QUIC connection, server.py the UDP listener and its
lifecycle, tls.py the certificate, head.py the request head's checks.
"""
