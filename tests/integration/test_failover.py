"""Failover over three ``mock_ie`` replicas (round robin, so each takes its share):

- a replica killed under load: the requests it held before their first token are answered
  by the others, none fails; with migration off, one killed in the middle of its streams
  ends those streams cleanly (an error event) and no other (test_migration.py: with it
  on, they go on elsewhere);
- a replica that fails every request is ejected after three failures in a row, its
  requests retried elsewhere meanwhile, and comes back in rotation once healthy;
- when every replica fails, retries stay within the retry budget.

What each replica received is read from its own event log.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.procs import MockIE, NeutrinoProc, wait_for

pytestmark = pytest.mark.timeout(120)

FAIL_ALL = {"rules": [{"match": "*", "fault": "error", "fault_after": 0, "error_code": "internal",
                       "error_message": "rigged to fail"}]}  # fmt: skip


def _config(mocks: list[MockIE], routing: str = "") -> str:
    engines = "".join(f'[[engines]]\nname = "r{i}"\nsocket = "{m.socket}"\n'
                      for i, m in enumerate(mocks))  # fmt: skip
    return engines + '[routing]\npolicy = "round_robin"\n' + routing


def _mocks(work: Path, *args: str, scripts: tuple[dict[str, Any] | None, ...] = ()) -> list[MockIE]:
    out = []
    for i in range(3):
        script = scripts[i] if i < len(scripts) else None
        extra: list[str] = []
        if script is not None:
            path = work / f"script{i}.json"
            path.write_text(json.dumps(script))
            extra = ["--script", str(path)]
        out.append(MockIE(work, *args, *extra, name=f"r{i}").start())
    return out


@pytest.fixture
def stack(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[list[MockIE], NeutrinoProc]]:
    """Three replicas (``request.param``: their mock_ie arguments, scripts, routing
    settings) and Neutrino in front of them."""
    args, scripts, routing = request.param
    mocks = _mocks(tmp_path, *args, scripts=scripts)
    server = NeutrinoProc(tmp_path, config=_config(mocks, routing))
    try:
        server.start(timeout=30)
        yield mocks, server
    finally:
        server.stop()
        for m in mocks:
            m.stop()


def _queries(m: MockIE) -> int:
    return len(m.events("query"))


def _chat_all(
    base_url: str, n: int, *, stream: bool = False, started: list[int] | None = None
) -> list[str | BaseException]:
    """``n`` chats at once: each one's text, or the error it raised (``started``: the
    streams that received their first text, as they do)."""

    async def run() -> list[str | BaseException]:
        async with openai.AsyncOpenAI(
            base_url=base_url + "/v1", api_key="x", max_retries=0
        ) as client:

            async def one(i: int) -> str:
                messages: Any = [{"role": "user", "content": f"Request {i}."}]
                if not stream:
                    r = await client.chat.completions.create(
                        model="qwen2.5-mock", messages=messages
                    )
                    return r.choices[0].message.content or ""
                text = ""
                chunks = await client.chat.completions.create(
                    model="qwen2.5-mock", messages=messages, stream=True
                )
                async for c in chunks:
                    piece = (c.choices[0].delta.content or "") if c.choices else ""
                    if piece and not text and started is not None:
                        started.append(i)
                    text += piece
                return text

            return list(await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True))

    return asyncio.run(run())


@pytest.mark.parametrize("stack", [(("--ttft-ms", "1500", "--reply-tokens", "3"), (), "")],
                         indirect=True)  # fmt: skip
def test_a_replica_killed_before_the_first_tokens_fails_no_request(
    stack: tuple[list[MockIE], NeutrinoProc],
) -> None:
    mocks, server = stack
    answers: list[str | BaseException] = []
    load = threading.Thread(target=lambda: answers.extend(_chat_all(server.base_url, 30)))
    load.start()
    assert wait_for(lambda: _queries(mocks[1]) == 10, timeout=10)  # its share, no token yet
    mocks[1].kill()
    load.join()
    assert all(isinstance(a, str) and a for a in answers), answers
    # The two left answered every request: theirs first, and those r1 held, once more.
    assert _queries(mocks[0]) + _queries(mocks[2]) == 30
    failover = server.get_json("/neutrino/v1/app_state")["routing"]["failover"]
    assert failover["retries"] == 10
    assert server.get_json("/neutrino/v1/app_state")["requests"]["finished"].get("failed", 0) == 0


@pytest.mark.parametrize(
    "stack",
    [(("--itl-ms", "40", "--reply-tokens", "60"), (), "migration_limit = 0\n")],
    indirect=True,
)
def test_a_replica_killed_mid_stream_ends_only_its_streams(
    stack: tuple[list[MockIE], NeutrinoProc],
) -> None:
    mocks, server = stack
    answers: list[str | BaseException] = []
    started: list[int] = []
    load = threading.Thread(
        target=lambda: answers.extend(_chat_all(server.base_url, 9, stream=True, started=started))
    )
    load.start()
    assert wait_for(lambda: len(started) == 9, timeout=10)  # every stream has its first text
    mocks[2].kill()
    load.join()
    failed = [a for a in answers if isinstance(a, BaseException)]
    assert len(failed) == 3, answers  # its three streams, after their first tokens
    assert all(isinstance(e, openai.APIError) and "engine" in str(e).lower() for e in failed)
    assert all(isinstance(a, str) and len(a) > 20 for a in answers if a not in failed)
    assert server.get_json("/neutrino/v1/app_state")["routing"]["failover"]["retries"] == 0


@pytest.mark.parametrize(
    "stack",
    [((), (None, FAIL_ALL, None), "eject_after = 3\neject_base_s = 1.5\n")],
    indirect=True,
)
def test_a_failing_replica_is_ejected_then_comes_back(
    stack: tuple[list[MockIE], NeutrinoProc], tmp_path: Path
) -> None:
    mocks, server = stack
    for _ in range(4):  # 12 requests: r1's four fail there and are answered elsewhere
        assert all(isinstance(a, str) and a for a in _chat_all(server.base_url, 3))
    assert _queries(mocks[1]) == 3  # ejected after three failures in a row
    engines = server.get_json("/neutrino/v1/app_state")["routing"]["failover"]["engines"]
    assert engines["r1"]["ejected"] is True and engines["r1"]["ejections"] == 1
    for _ in range(3):
        assert all(isinstance(a, str) and a for a in _chat_all(server.base_url, 2))
    assert _queries(mocks[1]) == 3  # out of rotation meanwhile
    mocks[1].stop()  # the replica is fixed: a healthy one on the same socket
    healthy = MockIE(tmp_path, name="r1").start()
    try:
        assert wait_for(lambda: server.get_json("/neutrino/v1/status")["status"] == "ok", 10)
        time.sleep(1.6)  # its time out of rotation ends
        assert all(isinstance(a, str) and a for a in _chat_all(server.base_url, 6))
        assert wait_for(lambda: len(healthy.events("finish")) >= 1, 5)  # back in rotation
        engines = server.get_json("/neutrino/v1/app_state")["routing"]["failover"]["engines"]
        assert engines["r1"]["ejected"] is False and engines["r1"]["failures_in_a_row"] == 0
    finally:
        healthy.stop()


@pytest.mark.parametrize(
    "stack",
    [
        (
            (),
            (FAIL_ALL, FAIL_ALL, FAIL_ALL),
            "retry_budget = 0.1\nretry_burst = 5\neject_after = 1000\n",
        )
    ],
    indirect=True,
)
def test_retries_stay_within_the_budget_when_every_replica_fails(
    stack: tuple[list[MockIE], NeutrinoProc],
) -> None:
    mocks, server = stack
    answers = [a for _ in range(20) for a in _chat_all(server.base_url, 5)]
    assert all(isinstance(a, openai.InternalServerError) for a in answers), answers[:3]
    retries = sum(_queries(m) for m in mocks) - 100
    assert 5 <= retries <= 5 + 0.1 * 100, retries  # the burst, then a tenth of the requests
    failover = server.get_json("/neutrino/v1/app_state")["routing"]["failover"]
    assert failover["retries"] == retries and failover["retries_refused"] == 100 - retries
