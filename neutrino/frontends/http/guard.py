"""A last-resort wrapper for route handlers (cheaper than an aiohttp middleware).

Any :class:`NeutrinoError` becomes its OpenAI error response; anything unexpected
becomes a plain 500 that carries no stack trace or path.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web

from neutrino.errors import ErrorKind, NeutrinoError

log = logging.getLogger("neutrino.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(err: NeutrinoError) -> web.Response:
    """OpenAI's error JSON, with Retry-After on the refusals that say "not now"."""
    retry = err.retry_after_s
    return web.Response(
        body=orjson.dumps(err.openai_body()),
        status=err.http_status,
        content_type="application/json",
        headers=None if retry is None else {"Retry-After": str(retry)},
    )


def guarded(handler: Handler) -> Handler:
    @functools.wraps(handler)
    async def run(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except NeutrinoError as err:
            return error_response(err)
        except (web.HTTPException, ConnectionError):
            raise
        except Exception:
            log.exception("unhandled error on %s %s", request.method, request.path)
            return error_response(NeutrinoError(ErrorKind.INTERNAL, "internal server error"))

    return run
