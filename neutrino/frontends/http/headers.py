"""Headers an HTTP answer carries beyond its body: an error's (Retry-After,
WWW-Authenticate) and a rate-limited key's (each protocol's rate-limit headers)."""

from __future__ import annotations

import time

from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.pipeline.quota import QuotaState

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


def _duration(seconds: float) -> str:
    """OpenAI's reset format: ``1s``, ``6m0s``, ``17ms``, ``1h2m3s``."""
    if seconds < 1:
        return f"{max(1, round(seconds * 1000))}ms"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def _instant(seconds: float) -> str:
    """Anthropic's reset format: the moment, in RFC 3339 (UTC)."""
    at = time.gmtime(time.time() + seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", at)


def rate_headers(state: QuotaState | None, style: str) -> list[tuple[str, str]]:
    """A key's rate limits as its clients read them: OpenAI's ``x-ratelimit-*`` or, on
    Anthropic's routes (``style`` "anthropic"), ``anthropic-ratelimit-*``; the daily
    budget as ``x-neutrino-budget-*`` on both."""
    if state is None:
        return []
    out: list[tuple[str, str]] = []
    for name, w in (("requests", state.requests), ("tokens", state.tokens)):
        if w is None:
            continue
        if style == "anthropic":
            prefix = f"anthropic-ratelimit-{name}"
            out += [(f"{prefix}-limit", str(w.limit)), (f"{prefix}-remaining", str(w.remaining)),
                    (f"{prefix}-reset", _instant(w.reset_s))]  # fmt: skip
        else:
            out += [(f"x-ratelimit-limit-{name}", str(w.limit)),
                    (f"x-ratelimit-remaining-{name}", str(w.remaining)),
                    (f"x-ratelimit-reset-{name}", _duration(w.reset_s))]  # fmt: skip
    day = state.day
    if day is not None:
        out += [("x-neutrino-budget-limit-tokens", str(day.limit)),
                ("x-neutrino-budget-remaining-tokens", str(day.remaining)),
                ("x-neutrino-budget-reset-tokens", _duration(day.reset_s))]  # fmt: skip
    return out
