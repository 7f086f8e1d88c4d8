"""Answers that survive their engine (engine/fleet/migration.py), through real ``mock_ie``
processes.

- Every protocol (OpenAI chat over HTTP/1.1 and HTTP/3, streamed and not, gRPC, Anthropic,
  Responses): replicas that fail each request with an engine error after every five tokens
  of their own; the answer moves at each failure, and each protocol's answer equals an
  unbroken run's (text, reasoning, tool calls, logprobs, finish, usage), a guided JSON
  answer included.
- A replica killed (SIGKILL) in the middle of its streams, and one drained by the operator:
  their streams go on elsewhere, byte-equal to an unbroken run, one id, usage right.
- ``migration_limit`` reached, and the last replica's death: today's error.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.integration.test_parity import CASES, DRIVERS, RULES, Stack, _same, chat, http_chat
from tests.support.parity import Answer
from tests.support.procs import MockIE, NeutrinoProc, free_port, wait_for

pytestmark = pytest.mark.timeout(120)

MODEL = "qwen3-mock"
MODELS = ("--model", "qwen3-mock:qwen3:32768")
EVERY = 5  # a faulty replica fails a request after this many tokens of its own
FAULT = {"fault": "error", "fault_after": EVERY, "error_code": "internal",
         "error_message": "rigged to fail mid-answer"}  # fmt: skip
# Multi-byte characters of several tokens each: some are cut by a move.
MELT = {"match": "migrate-melt", "reply": "🫠 ok 🫠 done 你好 ✓ 🫠 again ünïcödé 🫠 end"}
# The parity suite's replies (the engine-loss and stall cases left out), each failing.
PLAIN_RULES = [MELT, *(r for r in RULES if "fault" not in r)]
FAULTY_RULES = [{**r, **FAULT} for r in PLAIN_RULES] + [{"match": "*", **FAULT}]
OWN_CASES = {"melt": (chat("migrate-melt", logprobs=True, top_logprobs=2), CASES["plain"][1])}
# The parity suite's cases whose answers are longer than five tokens, and ours.
MOVED = ("plain", "seeded", "reasoning", "tools-auto", "logprobs", "n2", "structured", "melt")


def _mock(work: Path, name: str, rules: list[dict[str, Any]] | None, *args: str) -> MockIE:
    extra: list[str] = []
    if rules is not None:
        script = work / f"{name}.json"
        script.write_text(json.dumps({"rules": rules}))
        extra = ["--script", str(script)]
    return MockIE(work, *MODELS, *extra, *args, name=name).start()


def _config(mocks: list[MockIE], routing: str = "") -> str:
    engines = "".join(f'[[engines]]\nname = "r{i}"\nsocket = "{m.socket}"\n'
                      for i, m in enumerate(mocks))  # fmt: skip
    return engines + '[routing]\npolicy = "round_robin"\n' + routing


def _stack(work: Path, mocks: list[MockIE], routing: str = "") -> tuple[NeutrinoProc, Stack]:
    grpc_address, metrics_port = f"127.0.0.1:{free_port()}", free_port()
    server = NeutrinoProc(
        work, "--quic-address", "127.0.0.1:0", "--grpc-address", grpc_address,
        "--metrics-address", f"127.0.0.1:{metrics_port}", config=_config(mocks, routing),
    )  # fmt: skip
    server.start(timeout=30)
    return server, Stack(mocks[0], server, grpc_address, metrics_port)


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One healthy replica: the answers as an unbroken run gives them."""
    work = tmp_path_factory.mktemp("unbroken")
    mock = _mock(work, "plain", PLAIN_RULES, "--reply-tokens", "60")
    server, stack = _stack(work, [mock])
    try:
        yield stack
    finally:
        server.stop()
        mock.stop()


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Two replicas that each fail a request after five tokens of their own."""
    work = tmp_path_factory.mktemp("faulty")
    mocks = [_mock(work, f"f{i}", FAULTY_RULES, "--reply-tokens", "60") for i in range(2)]
    server, stack = _stack(work, mocks, "migration_limit = 30\n")
    try:
        yield stack
    finally:
        server.stop()
        for m in mocks:
            m.stop()


def _failover(server: NeutrinoProc) -> dict[str, Any]:
    """The app state's failover counts (shown once a model's requests were routed)."""
    routing = server.get_json("/neutrino/v1/app_state").get("routing", {})
    state: dict[str, Any] = routing.get("failover", {"migrations": {"moved": {}, "refused": {}}})
    return state


def _moved(server: NeutrinoProc, reason: str) -> int:
    n: int = _failover(server)["migrations"]["moved"].get(reason, 0)
    return n


@pytest.mark.parametrize("case", MOVED)
async def test_an_answer_that_moves_is_an_unbroken_runs_on_every_protocol(
    unbroken: Stack, faulty: Stack, case: str
) -> None:
    body, protocols = OWN_CASES[case] if case in OWN_CASES else CASES[case]
    base = await http_chat(unbroken, body)
    assert base.error is None and (base.completion_tokens or 0) > EVERY, base
    before = _moved(faulty.server, "engine_error")
    for name in protocols:
        got: Answer = await DRIVERS[name](faulty, body)
        _same(case, name, base, got)
    moved = _moved(faulty.server, "engine_error") - before
    assert moved >= len(protocols)  # each answer moved once at least


async def test_a_moved_guided_answer_still_validates(faulty: Stack) -> None:
    body, _ = CASES["structured"]
    got = await http_chat(faulty, body)
    assert got.error is None, got
    doc = json.loads(got.choices[0].text)
    assert set(doc) == {"name", "size"} and isinstance(doc["size"], int)
    entry = next(e for e in faulty.server.history(20) if e.get("migrated_to"))
    assert all(hop.endswith("(engine_error)") for hop in entry["migrated_to"])


async def test_the_metric_counts_moves_by_reason(faulty: Stack) -> None:
    assert (await http_chat(faulty, CASES["plain"][0])).error is None  # one move at least
    with urllib.request.urlopen(faulty.metrics_url, timeout=10) as r:
        text = r.read().decode()
    line = next(x for x in text.splitlines()
                if x.startswith('neutrino_migrations_total{reason="engine_error"}'))  # fmt: skip
    assert float(line.split()[-1]) > 0


# ------------------------------------------------------ killed, drained, out of replicas


def _streams(base_url: str, n: int, started: list[int]) -> list[dict[str, Any] | BaseException]:
    """``n`` seeded streams at once through the openai SDK: each one's text, ids and usage."""

    async def run() -> list[dict[str, Any] | BaseException]:
        async with openai.AsyncOpenAI(base_url=base_url + "/v1", api_key="x",
                                      max_retries=0) as client:  # fmt: skip

            async def one(i: int) -> dict[str, Any]:
                chunks = await client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": f"Story {i}, please."}],
                    stream=True, seed=i, stream_options={"include_usage": True},
                )  # fmt: skip
                text, ids, usage = "", set(), None
                async for c in chunks:
                    ids.add(c.id)
                    piece = (c.choices[0].delta.content or "") if c.choices else ""
                    if piece and not text:
                        started.append(i)
                    text += piece
                    usage = c.usage or usage
                return {"text": text, "ids": ids, "usage": usage}

            return list(await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True))

    return asyncio.run(run())


def _texts(base_url: str, n: int) -> list[tuple[str, int]]:
    """Each stream's text and completion tokens."""
    return [(a["text"], a["usage"].completion_tokens)  # type: ignore[index]
            for a in _streams(base_url, n, [])]  # fmt: skip


@pytest.fixture
def three(tmp_path: Path) -> Iterator[tuple[list[MockIE], NeutrinoProc]]:
    mocks = [_mock(tmp_path, f"r{i}", None, "--reply-tokens", "60", "--itl-ms", "30")
             for i in range(3)]  # fmt: skip
    server = NeutrinoProc(tmp_path, config=_config(mocks))
    try:
        server.start(timeout=30)
        yield mocks, server
    finally:
        server.stop()
        for m in mocks:
            m.stop()


def _run_streams(server: NeutrinoProc, n: int, act: Any) -> list[dict[str, Any] | BaseException]:
    answers: list[dict[str, Any] | BaseException] = []
    started: list[int] = []
    load = threading.Thread(target=lambda: answers.extend(_streams(server.base_url, n, started)))
    load.start()
    assert wait_for(lambda: len(started) == n, timeout=10)  # every stream has its first text
    act()
    load.join()
    return answers


def _whole(answers: list[dict[str, Any] | BaseException], texts: list[tuple[str, int]]) -> None:
    for got, (text, tokens) in zip(answers, texts, strict=True):
        assert isinstance(got, dict), got
        assert got["text"] == text
        assert len(got["ids"]) == 1  # one id from the first chunk to the last
        assert got["usage"].completion_tokens == tokens


def test_a_replica_killed_mid_stream_fails_no_stream(
    unbroken: Stack, three: tuple[list[MockIE], NeutrinoProc]
) -> None:
    mocks, server = three
    texts = _texts(unbroken.http, 6)
    answers = _run_streams(server, 6, mocks[1].kill)
    _whole(answers, texts)
    assert len(mocks[1].events("query")) == 2  # its share of the six
    forced = [e for m in (mocks[0], mocks[2]) for e in m.events("query") if e["forced_tokens"]]
    assert len(forced) == 2 and all(0 < e["forced_tokens"] < 60 for e in forced)
    assert _failover(server)["migrations"]["moved"]["lost"] == 2
    assert server.get_json("/neutrino/v1/app_state")["requests"]["finished"].get("failed", 0) == 0


def test_a_drained_replica_hands_its_streams_on(
    unbroken: Stack, three: tuple[list[MockIE], NeutrinoProc]
) -> None:
    mocks, server = three
    texts = _texts(unbroken.http, 6)
    drained: list[Any] = []
    answers = _run_streams(
        server, 6, lambda: drained.append(server.post_json("/neutrino/v1/engines/r2/drain", b"{}"))
    )
    assert drained == [(200, {"engine": "r2", "draining": True, "moved": 2})]
    _whole(answers, texts)
    cancels = mocks[2].events("cancel")
    assert len(cancels) == 2 and {c["reason"] for c in cancels} == {"drained"}  # one each
    assert _failover(server)["migrations"]["moved"]["drained"] == 2
    queries = len(mocks[2].events("query"))
    _texts(server.base_url, 3)
    assert len(mocks[2].events("query")) == queries  # nothing is sent to it meanwhile
    assert server.post_json("/neutrino/v1/engines/r2/resume", b"{}")[0] == 200
    _texts(server.base_url, 3)
    assert len(mocks[2].events("query")) == queries + 1  # back in rotation
    status, body = server.post_json("/neutrino/v1/engines/nope/drain", b"{}")
    assert status == 404 and "nope" in body["error"]["message"]


def test_past_the_migration_limit_the_answer_ends_with_its_error(tmp_path: Path) -> None:
    rules = [{"match": "*", **FAULT}]
    mocks = [_mock(tmp_path, f"l{i}", rules, "--reply-tokens", "60") for i in range(2)]
    server = NeutrinoProc(tmp_path, config=_config(mocks, "migration_limit = 2\n"))
    try:
        server.start(timeout=30)
        answers = _streams(server.base_url, 1, [])
        assert isinstance(answers[0], openai.APIError), answers
        assert sum(len(m.events("query")) for m in mocks) == 3  # the first, and two moves
        migrations = _failover(server)["migrations"]
        assert migrations["moved"]["engine_error"] == 2 and migrations["refused"]["limit"] == 1
    finally:
        server.stop()
        for m in mocks:
            m.stop()


def test_the_last_replicas_death_ends_the_answer_with_its_error(
    three: tuple[list[MockIE], NeutrinoProc],
) -> None:
    mocks, server = three
    mocks[0].kill()
    mocks[1].kill()

    def connected() -> int:
        engines = server.get_json("/neutrino/v1/app_state")["engines"]
        return sum(1 for e in engines if e["connected"])

    assert wait_for(lambda: connected() == 1)
    answers = _run_streams(server, 2, mocks[2].kill)
    assert all(isinstance(a, openai.APIError) for a in answers), answers
    assert server.get_json("/neutrino/v1/app_state")["requests"]["finished"]["failed"] == 2


def test_an_answer_waits_for_its_only_engine_to_be_restarted(
    unbroken: Stack, tmp_path: Path
) -> None:
    command = ["python", "-m", "mocks.mock_ie", *MODELS, "--reply-tokens", "60",
               "--itl-ms", "30"]  # fmt: skip
    config = f'[[engines]]\nname = "only"\ncommand = {json.dumps(command)}\n'
    server = NeutrinoProc(tmp_path, config=config)
    try:
        server.start(timeout=60)
        texts = _texts(unbroken.http, 2)

        def kill() -> None:
            (engine,) = server.get_json("/neutrino/v1/app_state")["managed_engines"]
            os.kill(engine["pid"], signal.SIGKILL)

        answers = _run_streams(server, 2, kill)
        _whole(answers, texts)  # Neutrino restarted it, and the answers went on there
        (engine,) = server.get_json("/neutrino/v1/app_state")["managed_engines"]
        assert engine["restarts"] == 1
        assert _moved(server, "lost") == 2
        assert all(e["migrated_to"] == ["only (lost)"] for e in server.history(2))
    finally:
        server.stop()
