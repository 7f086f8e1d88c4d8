"""Sans-IO: whether a request to an admin route may come from a web browser.

With no admin key, any web page the operator opens could drive a local server's admin
routes (cross-site request forgery), as it could those of Ollama or Jupyter. Browsers
name the page that makes a request in ``Origin``; a request from a page of another
origin than the server's own is refused unless that origin is allowed. A request that
changes state must also be one a page of another origin cannot send without asking the
server first (a CORS preflight, which Neutrino never grants): a JSON body, or an
``X-Requested-With`` header. Clients that are not browsers (curl, SDKs) send no
``Origin``; they only need the JSON content type to change state.
"""

from __future__ import annotations

from collections.abc import Collection

_DEFAULT_PORTS = {"http": "80", "https": "443"}


def _authority(scheme: str, authority: str) -> str:
    """``authority`` lowercased, without the scheme's default port."""
    authority = authority.lower()
    default = _DEFAULT_PORTS.get(scheme)
    if default is not None and authority.endswith(":" + default):
        return authority[: -len(default) - 1]
    return authority


def foreign_origin(origin: str | None, host: str, allowed: Collection[str]) -> str | None:
    """The page's origin if it may not call admin routes: neither the server's own (its
    authority is the request's ``Host``) nor allowed (``"*"`` allows any). None: fine."""
    if origin is None or "*" in allowed:
        return None
    if origin in allowed or origin.lower() in allowed:
        return None
    scheme, sep, authority = origin.partition("://")
    if sep and authority and host:
        scheme = scheme.lower()
        if _authority(scheme, authority) == _authority(scheme, host):
            return None
    return origin


def is_json(content_type: str | None) -> bool:
    """``application/json`` or ``application/<x>+json``, with any parameters."""
    media = (content_type or "").partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def preflighted(content_type: str | None, requested_with: str | None) -> bool:
    """Whether a browser would have had to ask first (CORS) before sending this request:
    its body is JSON, or it carries ``X-Requested-With``."""
    return bool(requested_with) or is_json(content_type)
