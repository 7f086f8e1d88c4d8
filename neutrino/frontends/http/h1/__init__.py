"""The lean HTTP/1.1 transport of the generation routes: server (connections, parsing, the
relay of other routes to aiohttp), exchange (one request as the routes see it), wire
(response heads and chunks), clock (its timeouts).
"""
