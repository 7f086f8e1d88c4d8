"""Per-key rate limits (pipeline/quota.py) over the process's own counters, their
headers (frontends/http/headers.py), and a Redis that cannot be reached."""

from __future__ import annotations

import re
from typing import cast

import pytest

from neutrino.config import KeyConfig
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.frontends.http.headers import rate_headers
from neutrino.pipeline.quota import Quotas, QuotaState, Rates, Window
from neutrino.pipeline.quota_store import LocalStore, RedisStore


def _key(
    requests_per_minute: int = 0, tokens_per_minute: int = 0, tokens_per_day: int = 0
) -> KeyConfig:
    return KeyConfig(
        digest=b"\0" * 32, name="team", requests_per_minute=requests_per_minute,
        tokens_per_minute=tokens_per_minute, tokens_per_day=tokens_per_day,
    )  # fmt: skip


async def test_requests_per_minute_count_down_then_refuse_with_the_wait() -> None:
    quotas = Quotas(LocalStore())
    key = _key(requests_per_minute=2)
    rates = Rates()
    await quotas.admit(key, 10, rates)
    first = rates.state.requests if rates.state is not None else None
    assert first is not None and (first.limit, first.remaining) == (2, 1)
    await quotas.admit(key, 10, rates)
    with pytest.raises(NeutrinoError) as refused:
        await quotas.admit(key, 10, rates)
    err = refused.value
    assert err.kind is ErrorKind.RATE_LIMITED and "requests per minute" in err.message
    assert err.retry_after_s is not None and 1 <= err.retry_after_s <= 60
    last = rates.state
    assert last is not None and last.requests is not None and last.requests.remaining == 0


async def test_tokens_are_taken_back_when_refused_and_corrected_at_the_end() -> None:
    store = LocalStore()
    quotas = Quotas(store)
    key = _key(tokens_per_minute=100, requests_per_minute=50)
    rates = Rates()
    await quotas.admit(key, 80, rates)
    with pytest.raises(NeutrinoError):
        await quotas.admit(key, 30, rates)  # 110 > 100: refused, and counted back
    quotas.settle(key, -60)  # the first used 20 of its 80
    await quotas.admit(key, 30, rates)
    assert rates.state is not None and rates.state.tokens is not None
    assert rates.state.tokens.remaining == 100 - 20 - 30
    assert rates.state.requests is not None and rates.state.requests.remaining == 48


async def test_a_request_no_window_could_hold_is_a_400() -> None:
    quotas = Quotas(LocalStore())
    with pytest.raises(NeutrinoError) as refused:
        await quotas.admit(_key(tokens_per_day=50), 51, None)
    assert refused.value.kind is ErrorKind.BAD_REQUEST and "tokens per day" in refused.value.message


async def test_shorter_windows_get_their_share_of_the_minute() -> None:
    quotas = Quotas(LocalStore(), window_s=10)
    rates = Rates()
    await quotas.admit(_key(requests_per_minute=60), 1, rates)
    assert rates.state is not None and rates.state.requests is not None
    assert rates.state.requests.limit == 10 and rates.state.requests.reset_s <= 10


async def test_redis_down_counts_locally_and_says_so() -> None:
    store = RedisStore("redis://127.0.0.1:1/0", timeout_s=0.2)  # nothing listens there
    quotas = Quotas(store)
    key = _key(requests_per_minute=1)
    await quotas.admit(key, 1, None)  # served: counted in the process
    assert store.down and store.fallbacks == 1 and "down" in cast(str, store.describe()["store"])
    with pytest.raises(NeutrinoError):
        await quotas.admit(key, 1, None)  # the local counter still limits
    await store.close()


def test_headers_as_each_protocol_writes_them() -> None:
    state = QuotaState(Window(60, 59, 0.5), Window(1000, 0, 75.0), Window(5000, 10, 3600.0))
    openai = dict(rate_headers(state, "openai"))
    assert openai["x-ratelimit-limit-requests"] == "60"
    assert openai["x-ratelimit-remaining-requests"] == "59"
    assert openai["x-ratelimit-reset-requests"] == "500ms"
    assert openai["x-ratelimit-reset-tokens"] == "1m15s"
    assert openai["x-neutrino-budget-remaining-tokens"] == "10"
    assert openai["x-neutrino-budget-reset-tokens"] == "1h0m0s"
    anthropic = dict(rate_headers(state, "anthropic"))
    assert anthropic["anthropic-ratelimit-tokens-remaining"] == "0"
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", anthropic["anthropic-ratelimit-tokens-reset"]
    )
    assert rate_headers(None, "openai") == []
    assert state.retry_after_s == 75  # the exhausted window's reset
