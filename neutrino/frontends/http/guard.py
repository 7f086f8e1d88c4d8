"""A last-resort wrapper for route handlers (cheaper than an aiohttp middleware).

Any :class:`NeutrinoError` becomes its OpenAI error response; anything unexpected
becomes a plain 500 that carries no stack trace or path.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web

from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.http.headers import error_headers
from neutrino.pipeline.auth import KeyRing, Principal

log = logging.getLogger("neutrino.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# What counts a refused request: Observer.refused(protocol, route, error).
Refusals = Callable[[str, str, NeutrinoError], None]
REFUSALS: web.AppKey[Refusals] = web.AppKey("refusals")
# The inference routes' metric labels (other routes are not requests of a model).
ROUTES = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "completion",
    "/v1/embeddings": "embed",
    "/v1/rerank": "rerank",
    "/rerank": "rerank",
    "/v1/audio/transcriptions": "transcribe",
    "/v1/audio/translations": "transcribe",
    "/v1/audio/speech": "speak",
    "/v1/detect": "detect",
}


def error_response(err: NeutrinoError, body: bytes | None = None) -> web.Response:
    """``body`` (default: OpenAI's error JSON), with the error's status and headers
    (Retry-After, WWW-Authenticate)."""
    return web.Response(
        body=orjson.dumps(err.openai_body()) if body is None else body,
        status=err.http_status,
        content_type="application/json",
        headers=dict(error_headers(err)) or None,
    )


def caller(keys: KeyRing, request: web.Request) -> Principal | None:
    """The API key's principal for an aiohttp request (None: keys are off; 401 raised)."""
    headers = request.headers
    return keys.authenticate(headers.get("Authorization", ""), headers.get("x-api-key", ""))


_RECEIVED: web.RequestKey[int] = web.RequestKey("received_ns")


def received_at(request: web.Request) -> int:
    """When the guarded handler of ``request`` started (monotonic ns), for its span and
    its latency metrics."""
    received: int = request.get(_RECEIVED, 0)
    return received


def guarded(handler: Handler) -> Handler:
    @functools.wraps(handler)
    async def run(request: web.Request) -> web.StreamResponse:
        request[_RECEIVED] = time.monotonic_ns()
        try:
            return await handler(request)
        except NeutrinoError as err:
            refused = request.app.get(REFUSALS)
            route = ROUTES.get(request.path)
            if refused is not None and route is not None:
                refused("http", route, err)
            return error_response(err)
        except (web.HTTPException, ConnectionError):
            raise
        except Exception:
            log.exception("unhandled error on %s %s", request.method, request.path)
            return error_response(NeutrinoError(ErrorKind.INTERNAL, "internal server error"))

    return run
