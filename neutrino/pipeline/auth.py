"""API keys: who may call, which models, how many requests at once; and admin keys.

Keys are held only as SHA-256 digests (``neutrino.config.keys``). A presented key is
hashed and looked up by its digest, then compared with ``hmac.compare_digest``; the key
itself is never stored, logged or echoed (a refusal says only that a key is missing or
wrong). A key may be limited to some models (403 for the others) and to a number of
requests in flight (429 past it, Retry-After 1). Admin routes (state, history) want an
admin key, or live on a listener of their own.

With no key configured the API is open, as before; :meth:`KeyRing.describe` says so
once at start. Front ends call :meth:`KeyRing.authenticate` with the request's headers
(or gRPC metadata); the orchestrator calls :meth:`KeyRing.admit` for each request.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

from neutrino.config import KeyConfig
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.observability.counters import Counters


def digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


class Principal:
    """The caller a valid key stands for; counts its requests in flight."""

    __slots__ = ("inflight", "key")

    def __init__(self, key: KeyConfig) -> None:
        self.key = key
        self.inflight = 0

    @property
    def name(self) -> str:
        return self.key.name

    def allows(self, model: str) -> bool:
        models = self.key.models
        return models is None or model in models

    def release(self) -> None:
        """One of its requests ended."""
        self.inflight -= 1


def presented_key(authorization: str, x_api_key: str) -> str:
    """The key a request presents: ``Authorization: Bearer KEY`` (OpenAI's SDKs) or
    ``x-api-key: KEY`` (Anthropic's); "" for none."""
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return x_api_key.strip()


class KeyRing:
    def __init__(
        self,
        keys: Iterable[KeyConfig] = (),
        admin_listener: bool = False,
        counters: Counters | None = None,
    ) -> None:
        self._counters = counters if counters is not None else Counters()
        self._by_digest: dict[bytes, Principal] = {}
        for key in keys:
            self._by_digest.setdefault(key.digest, Principal(key))
        # The API wants a key once any key that is not only an admin key is set (admin
        # keys alone protect the admin routes only); an admin key is valid on both.
        self.enabled = any(not p.key.admin for p in self._by_digest.values())
        self._admins = any(p.key.admin for p in self._by_digest.values())
        # The admin routes have a listener of their own ([admin] address).
        self.admin_listener = admin_listener

    def describe(self) -> str:
        """One line for the log at start: whether and how the routes are protected."""
        where = "their own listener" if self.admin_listener else "the public listener"
        admin = "behind an admin key" if self._admins else "with no admin key"
        if not self.enabled:
            return (
                "no API keys configured: the API is open to whoever can reach the listener "
                "(set [auth] api_keys or api_keys_file to require keys); admin routes on "
                f"{where}, {admin}"
            )
        keys = len(self._by_digest)
        return f"API keys required ({keys} configured); admin routes on {where}, {admin}"

    # ------------------------------------------------------------------ callers

    def _refuse(
        self, kind: ErrorKind, message: str, param: str | None = None, code: str | None = None
    ) -> NeutrinoError:
        self._counters.auth_refused += 1
        return NeutrinoError(kind, message, param=param, code=code)

    def _lookup(self, key: str) -> Principal | None:
        want = digest(key)
        found = self._by_digest.get(want)
        if found is None or not hmac.compare_digest(found.key.digest, want):
            return None
        return found

    def authenticate(self, authorization: str, x_api_key: str) -> Principal | None:
        """The caller of an API route: None when no keys are required, else the principal
        of a valid key (401 for a missing or unknown one)."""
        if not self.enabled:
            return None
        key = presented_key(authorization, x_api_key)
        if not key:
            raise self._refuse(
                ErrorKind.UNAUTHENTICATED,
                "an API key is required: send it as 'Authorization: Bearer KEY' or 'x-api-key'",
            )
        principal = self._lookup(key)
        if principal is None:
            raise self._refuse(ErrorKind.UNAUTHENTICATED, "the API key is not valid")
        return principal

    def admit(self, principal: Principal | None, model: str, choices: int = 1) -> None:
        """A request of ``principal`` for ``model`` (one of its ``choices``: each counts)
        starts: 403 for a model its key may not use, 400 for more choices than its key may
        ever have in flight, 429 past its key's requests in flight; else it counts
        (``release`` at its end)."""
        if principal is None:
            return
        if not principal.allows(model):
            shown = model if len(model) <= 128 else model[:125] + "..."
            raise self._refuse(
                ErrorKind.PERMISSION_DENIED,
                f"this API key may not use the model {shown!r}",
                param="model",
                code="model_not_allowed",
            )
        limit = principal.key.max_concurrency
        if limit and choices > limit:  # a 429 would invite retries that cannot succeed
            raise self._refuse(
                ErrorKind.BAD_REQUEST,
                f"n is {choices}, but this API key may have at most {limit} requests in "
                "flight (each choice is one)",
                param="n",
            )
        if limit and principal.inflight >= limit:
            raise self._refuse(
                ErrorKind.KEY_CONCURRENCY,
                f"this API key has {limit} requests in flight, its limit; retry when one ends",
            )
        principal.inflight += 1

    @property
    def admin_keys(self) -> bool:
        """Whether an admin key is configured (the admin routes then want one)."""
        return self._admins

    def authorize_admin(self, authorization: str, x_api_key: str, on_admin_listener: bool) -> None:
        """Let a call of an admin route through, or raise: 404 on the public listener when
        the admin routes have their own, 403 where no admin key can exist, 401 without
        an admin key."""
        if self.admin_listener and not on_admin_listener:
            raise NeutrinoError(ErrorKind.NOT_FOUND, "no such route on this listener")
        if not self._admins:
            if on_admin_listener or not self.enabled:
                return  # open as before, or guarded by the admin listener's address
            raise self._refuse(
                ErrorKind.PERMISSION_DENIED,
                "the admin routes need an admin key ([auth] admin_keys) or a listener of "
                "their own ([admin] address)",
            )
        key = presented_key(authorization, x_api_key)
        principal = self._lookup(key) if key else None
        if principal is None:
            raise self._refuse(ErrorKind.UNAUTHENTICATED, "an admin API key is required")
        if not principal.key.admin:
            raise self._refuse(ErrorKind.PERMISSION_DENIED, "this API key is not an admin key")
