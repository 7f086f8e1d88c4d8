"""The loop-budget probe (``bench/loop_hold.py``) against a live server: every hostile or
large request gets its right answer (400s name their param, the admin case a 403) while
a watcher pings the status route every 20 ms; how long the loop was held is the bench's
figure (``make bench``'s loop-hold table), never asserted here. The large answers are
the same streamed or not, over HTTP and gRPC, and the server's memory comes back to
within 64 MB of where it was."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest

from bench.loop_hold import BIG_LOGPROBS, CASES, Target, Watcher, idle_connections, run_case
from neutrino.v1 import inference_pb2, inference_pb2_grpc
from tests.reliability.test_memory import MB, _settles
from tests.support.procs import NeutrinoProc, free_port


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NeutrinoProc, Target]]:
    work: Path = tmp_path_factory.mktemp("loop")
    grpc_port = free_port()
    server = NeutrinoProc(work, "--grpc-address", f"127.0.0.1:{grpc_port}")  # the embedded mock
    server.start()
    try:
        yield server, Target("127.0.0.1", server.port, f"127.0.0.1:{grpc_port}")
    finally:
        server.stop()


def test_every_probe_case_is_answered_right(live: tuple[NeutrinoProc, Target]) -> None:
    server, target = live
    asyncio.run(run_case(CASES["template syntax in content"][0], target, _Null()))  # type: ignore[arg-type]
    baseline = _settles(server)
    watcher = Watcher(target)
    cases = dict(CASES)
    cases["2,000 idle connections"] = (idle_connections(2000), 200, None)
    try:
        for name, (case, status, param) in cases.items():
            outcome, worst, _ = asyncio.run(run_case(case, target, watcher))
            assert outcome.status == status, (name, outcome)
            if param is not None:
                assert outcome.param == param, (name, outcome)
            assert not math.isnan(worst), f"{name}: the watcher got no answer meanwhile"
            print(f"{name}: {outcome.status} {outcome.param or ''} worst {1000 * worst:.1f} ms")
    finally:
        watcher.close()
    after = _settles(server)
    print(f"RSS warm {baseline / MB:.0f} MB, after the probe {after / MB:.0f} MB")
    assert after <= baseline + 64 * MB
    assert server.status_code() == 200


def test_the_big_answer_is_the_same_streamed_or_not(live: tuple[NeutrinoProc, Target]) -> None:
    """n=8 with 20 alternatives for each of 4,000 tokens: the non-streamed answer (written
    in pieces) holds what the stream sends, choice by choice, token by token."""
    _, target = live
    whole, streamed = asyncio.run(_both(target))
    assert len(whole["choices"]) == 8
    for choice in whole["choices"]:
        i = choice["index"]
        text, entries, finish = streamed[i]
        assert choice["message"]["content"] == text and choice["finish_reason"] == finish
        assert choice["logprobs"]["content"] == entries
        assert len(entries) == 4000 and {len(e["top_logprobs"]) for e in entries} == {20}
    texts = {c["message"]["content"] for c in whole["choices"]}
    assert len(texts) == 8  # seed + i per choice


async def _both(target: Target) -> tuple[dict[str, Any], dict[int, tuple[str, list[Any], str]]]:
    body = {"model": "qwen2.5-mock", "messages": [{"role": "user", "content": "hi"}]}
    body.update(BIG_LOGPROBS)
    url = target.base + "/v1/chat/completions"
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(timeout=timeout) as s:
        async with s.post(url, json=body) as r:
            assert r.status == 200 and r.headers["Transfer-Encoding"] == "chunked"
            whole = json.loads(await r.read())
        streamed: dict[int, tuple[str, list[Any], str]] = {}
        async with s.post(url, json={**body, "stream": True}) as r:
            raw = await r.read()  # read as fast as it comes, then parsed (54 MB of events)
        for line in raw.split(b"\n"):
            if not line.startswith(b"data: {"):
                continue
            for c in json.loads(line[6:])["choices"]:
                text, entries, finish = streamed.get(c["index"], ("", [], ""))
                text += c["delta"].get("content") or ""
                entries += (c.get("logprobs") or {}).get("content") or []
                streamed[c["index"]] = (text, entries, c.get("finish_reason") or finish)
    return whole, streamed


async def test_the_big_answer_over_grpc_is_whole(live: tuple[NeutrinoProc, Target]) -> None:
    _, target = live
    chat = inference_pb2.Chat(messages=[inference_pb2.ChatMessage(role="user", content="hi")])
    req = inference_pb2.GenerateRequest(model="qwen2.5-mock", chat=chat, **BIG_LOGPROBS)
    options = [("grpc.max_receive_message_length", 64 * MB)]
    async with grpc.aio.insecure_channel(target.grpc, options=options) as ch:
        stub = inference_pb2_grpc.InferenceStub(ch)
        whole = await stub.Generate(req, timeout=120)
        texts: dict[int, str] = {}
        tokens: dict[int, list[str]] = {}
        async for msg in stub.GenerateStream(req, timeout=120):
            texts[msg.index] = texts.get(msg.index, "") + msg.delta
            tokens.setdefault(msg.index, []).extend(e.token for e in msg.logprobs.content)
    assert len(whole.choices) == 8
    for c in whole.choices:
        assert c.text == texts[c.index]
        assert [e.token for e in c.logprobs.content] == tokens[c.index]
        assert len(c.logprobs.content) == 4000
        assert {len(e.top_logprobs) for e in c.logprobs.content} == {20}


class _Null:
    """A watcher that sees nothing (the warm-up request)."""

    def worst(self, start: float, end: float) -> float:
        return 0.0
