"""Headers an HTTP error response carries beside its OpenAI JSON body."""

from __future__ import annotations

from neutrino.errors import ErrorKind, NeutrinoError

_AUTHENTICATE = ("WWW-Authenticate", 'Bearer realm="neutrino"')


def error_headers(err: NeutrinoError) -> list[tuple[str, str]]:
    """Retry-After on the refusals that say "not now" (429, 503); WWW-Authenticate on a
    401, as RFC 9110 asks of it."""
    out = []
    if err.retry_after_s is not None:
        out.append(("Retry-After", str(err.retry_after_s)))
    if err.kind is ErrorKind.UNAUTHENTICATED:
        out.append(_AUTHENTICATE)
    return out
