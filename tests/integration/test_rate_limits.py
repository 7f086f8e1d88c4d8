"""Per-key rate limits through the official SDKs, gRPC, and a real ``redis-server``
shared by two instances of two workers each.

The per-minute limits count in 2-second windows here (``[limits] rate_window_s = 2``,
each allowed its share: 90 requests a minute are 3 a window), so that waiting for a
window's reset is short.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import grpc
import openai
import pytest

from tests.support.procs import MockIE, NeutrinoProc, free_port, wait_for

MODEL = "qwen2.5-mock"
REDIS = shutil.which("redis-server")
KEYS = """
[[auth.keys]]
key = "sk-rpm"
name = "rpm"
requests_per_minute = 90
[[auth.keys]]
key = "sk-anth"
name = "anth"
requests_per_minute = 90
tokens_per_minute = 60000
[[auth.keys]]
key = "sk-day"
name = "day"
tokens_per_day = 400
[[auth.keys]]
key = "sk-shared"
name = "shared"
requests_per_minute = 300
"""


def _config(mock: MockIE, redis: str = "") -> str:
    head = f'[[engines]]\nsocket = "{mock.socket}"\n'
    limits = "[limits]\nrate_window_s = 2\n" + (f'redis = "{redis}"\n' if redis else "")
    return head + limits + '[auth]\nadmin_keys = ["sk-admin"]\n' + KEYS


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockIE]:
    started = MockIE(tmp_path_factory.mktemp("limits"), "--reply-tokens", "3").start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def grpc_address() -> str:
    return f"127.0.0.1:{free_port()}"


@pytest.fixture(scope="module")
def server(
    mock: MockIE, grpc_address: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NeutrinoProc]:
    proc = NeutrinoProc(
        tmp_path_factory.mktemp("limited"), "--grpc-address", grpc_address, config=_config(mock)
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def _at_window_start() -> None:
    """Wait for the next 2-second window to begin, with all of it ahead: a fresh one,
    where nothing an earlier test sent counts (the window in which the last test's retry
    landed may have begun only just now)."""
    time.sleep(2 - time.time() % 2 + 0.01)


def _chat(client: openai.OpenAI) -> Any:
    return client.chat.completions.with_raw_response.create(
        model=MODEL, max_tokens=3, messages=[{"role": "user", "content": "hi"}]
    )


def test_every_answer_carries_openais_headers_and_the_limit_is_a_429(
    server: NeutrinoProc,
) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="sk-rpm", max_retries=0)
    _at_window_start()
    seen = [_chat(client).headers for _ in range(3)]
    assert [h["x-ratelimit-limit-requests"] for h in seen] == ["3", "3", "3"]
    assert [h["x-ratelimit-remaining-requests"] for h in seen] == ["2", "1", "0"]
    for h in seen:
        assert re.fullmatch(r"\d+ms|\d+s", h["x-ratelimit-reset-requests"]), h
        assert "x-ratelimit-limit-tokens" not in h  # this key has no token limit
    with pytest.raises(openai.RateLimitError) as refused:
        _chat(client)
    err = refused.value
    assert err.status_code == 429 and err.code == "rate_limit_exceeded"
    assert err.response.headers["x-ratelimit-remaining-requests"] == "0"
    assert 1 <= int(err.response.headers["retry-after"]) <= 2
    with pytest.raises(openai.RateLimitError):  # a stream is refused before it opens
        client.chat.completions.create(
            model=MODEL, max_tokens=3, messages=[{"role": "user", "content": "hi"}], stream=True
        )
    time.sleep(2.1)  # the next window
    with client.chat.completions.with_streaming_response.create(
        model=MODEL, max_tokens=3, messages=[{"role": "user", "content": "hi"}], stream=True
    ) as resp:
        assert resp.headers["x-ratelimit-remaining-requests"] == "2"
        assert any("[DONE]" in line for line in resp.iter_lines())


def test_the_sdks_retry_honours_retry_after(server: NeutrinoProc) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="sk-rpm", max_retries=0)
    _at_window_start()
    while True:  # spend the window
        try:
            _chat(client)
        except openai.RateLimitError:
            break
    retrying = openai.OpenAI(base_url=server.base_url + "/v1", api_key="sk-rpm", max_retries=2)
    t0 = time.monotonic()
    answer = retrying.chat.completions.create(
        model=MODEL, max_tokens=3, messages=[{"role": "user", "content": "hi"}]
    )
    took = time.monotonic() - t0
    assert answer.choices[0].message.content
    assert 1.0 <= took < 6, took  # it waited the window out, as Retry-After said


def test_anthropics_headers_on_messages(server: NeutrinoProc) -> None:
    client = anthropic.Anthropic(base_url=server.base_url, api_key="sk-anth", max_retries=0)
    _at_window_start()
    raw = client.messages.with_raw_response.create(
        model=MODEL, max_tokens=3, messages=[{"role": "user", "content": "hi"}]
    )
    h = raw.headers
    assert h["anthropic-ratelimit-requests-limit"] == "3"
    assert h["anthropic-ratelimit-requests-remaining"] == "2"
    assert h["anthropic-ratelimit-tokens-limit"] == "2000"  # 60,000 a minute: 2 s of it
    remaining = int(h["anthropic-ratelimit-tokens-remaining"])
    assert 0 < remaining < 2000 - raw.parse().usage.input_tokens
    reset = datetime.datetime.fromisoformat(h["anthropic-ratelimit-requests-reset"])
    assert 0 <= reset.timestamp() - time.time() <= 3
    assert "x-ratelimit-limit-requests" not in h
    for _ in range(2):
        client.messages.create(
            model=MODEL, max_tokens=3, messages=[{"role": "user", "content": "x"}]
        )
    with pytest.raises(anthropic.RateLimitError) as refused:
        client.messages.create(
            model=MODEL, max_tokens=3, messages=[{"role": "user", "content": "x"}]
        )
    assert refused.value.response.headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert refused.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]


def test_a_daily_budget_is_spent_and_corrected_by_what_was_used(server: NeutrinoProc) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="sk-day", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="tokens per day"):  # could never fit
        client.chat.completions.create(
            model=MODEL, max_tokens=1000, messages=[{"role": "user", "content": "hi"}]
        )
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    used = raw.parse().usage
    assert used is not None
    charged = 400 - int(raw.headers["x-neutrino-budget-remaining-tokens"])
    assert charged == used.prompt_tokens + 100  # its estimate: the prompt and max_tokens
    # At its end it was corrected to what it used (3 tokens, not 100): room for more.
    served = 1
    while True:
        try:
            _chat(client)
            served += 1
        except openai.RateLimitError as exc:
            retry, code = int(exc.response.headers["retry-after"]), exc.code
            break
    per = used.prompt_tokens + 3
    assert served >= 400 // per - 1, served
    assert 0 < retry <= 86400 and code == "rate_limit_exceeded"  # until midnight UTC


def test_grpc_gets_resource_exhausted_with_the_retry_delay(
    server: NeutrinoProc, grpc_address: str
) -> None:
    from neutrino.v1 import inference_pb2 as pb
    from neutrino.v1 import inference_pb2_grpc

    md = (("authorization", "Bearer sk-rpm"),)
    req = pb.GenerateRequest(
        model=MODEL, chat=pb.Chat(messages=[pb.ChatMessage(role="user", content="hi")]),
        max_tokens=3,
    )  # fmt: skip
    _at_window_start()
    with grpc.insecure_channel(grpc_address) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)
        codes = []
        trailers: dict[str, Any] = {}
        for _ in range(4):
            try:
                stub.Generate(req, metadata=md, timeout=10)
                codes.append(grpc.StatusCode.OK)
            except grpc.RpcError as exc:
                call: Any = exc  # a grpc.Call as well
                codes.append(call.code())
                trailers = dict(call.trailing_metadata() or ())
    assert codes == [grpc.StatusCode.OK] * 3 + [grpc.StatusCode.RESOURCE_EXHAUSTED], codes
    assert 1000 <= int(trailers["grpc-retry-pushback-ms"]) <= 2000
    assert trailers["neutrino-error-code"] == "rate_limit_exceeded"


# ---------------------------------------------------------------------- shared in Redis


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    if REDIS is None:
        pytest.fail("redis-server is missing: `make test` installs Debian's redis-server")
    port = free_port()
    proc = subprocess.Popen(
        [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert wait_for(lambda: _answers(port), timeout=10), "redis-server did not start"
        yield f"redis://127.0.0.1:{port}/0", proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)


def _answers(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


async def _burst(urls: list[str], key: str, n: int) -> list[int]:
    async with aiohttp.ClientSession() as client:

        async def one(i: int) -> int:
            async with client.post(
                urls[i % len(urls)] + "/v1/chat/completions",
                headers={"Authorization": f"Bearer {key}"},
                json={"model": MODEL, "max_tokens": 3,
                      "messages": [{"role": "user", "content": f"hi {i}"}]},
            ) as r:  # fmt: skip
                await r.read()
                return r.status

        return list(await asyncio.gather(*(one(i) for i in range(n))))


def test_two_instances_of_two_workers_share_one_limit_in_redis_and_survive_its_loss(
    mock: MockIE, redis_server: tuple[str, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    url, redis_proc = redis_server
    instances = [
        NeutrinoProc(tmp_path, "--workers", "2", config=_config(mock, redis=url)) for _ in range(2)
    ]
    try:
        for inst in instances:
            inst.start()
        urls = [inst.base_url for inst in instances]
        _at_window_start()
        statuses = asyncio.run(_burst(urls, "sk-shared", 24))  # 300 a minute: 10 a window
        assert statuses.count(200) == 10 and statuses.count(429) == 14, statuses
        redis_proc.terminate()  # Redis goes away mid-test
        redis_proc.wait(10)
        time.sleep(2.1)
        statuses = asyncio.run(_burst(urls, "sk-shared", 8))
        assert set(statuses) == {200}, statuses  # counted locally now, never refused for it
        states = [_admin(inst, "/neutrino/v1/app_state") for inst in instances]
        assert any("down" in s["rate_limits"]["store"] for s in states), states
    finally:
        for inst in instances:
            inst.stop()


def _admin(server: NeutrinoProc, path: str) -> Any:
    req = urllib.request.Request(
        server.base_url + path, headers={"Authorization": "Bearer sk-admin"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())
