"""Faults at the edges, through real processes: a passthrough upstream that falls silent
after its headers or its first event, one that sends an endless line, one whose answer
is not JSON (tests/support/rogue_upstream.py); a burst of 2,000 gRPC calls on one
channel (tests/reliability/test_slow_clients.py has the dribbled body)."""

from __future__ import annotations

import asyncio
import collections
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.procs import REPO, NeutrinoProc, _env, free_port, wait_for

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NeutrinoProc]:
    work = tmp_path_factory.mktemp("rogue")
    port = free_port()
    upstream = subprocess.Popen(
        [sys.executable, "-m", "tests.support.rogue_upstream", str(port)], cwd=REPO, env=_env()
    )
    config = (
        "[limits]\nrequest_timeout_s = 2\n[http]\nsse_keepalive_s = 0.3\n"
        f'[[engines]]\nname = "rogue"\nurl = "http://127.0.0.1:{port}/v1"\n'
        'mode = "passthrough"\nidle_timeout_s = 0.5\n'
    )
    server = NeutrinoProc(work, config=config)
    try:
        assert wait_for(lambda: _up(port), timeout=20)
        server.start(timeout=30)
        yield server
    finally:
        server.stop()
        upstream.kill()  # its handlers sleep for an hour: no graceful end to wait for
        upstream.wait(10)


def _up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1):
            return True
    except OSError:
        return False


def _post(server: NeutrinoProc, what: str, stream: bool) -> tuple[int, bytes, float]:
    body = {"model": "rogue", "stream": stream, "messages": [{"role": "user", "content": what}]}
    req = urllib.request.Request(server.base_url + "/v1/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read(), time.monotonic() - t0
    except urllib.error.HTTPError as e:
        return e.code, e.read(), time.monotonic() - t0


def _error_event(raw: bytes) -> dict[str, Any]:
    events = [line[6:] for line in raw.split(b"\n") if line.startswith(b"data: {")]
    error: dict[str, Any] = json.loads(events[-1])["error"]
    return error


def test_an_upstream_silent_after_its_headers_meets_the_request_deadline(
    relay: NeutrinoProc,
) -> None:
    status, raw, took = _post(relay, "silent", stream=True)
    assert status == 200 and took < 10
    assert raw.count(b": keepalive\n\n") >= 2  # the client heard from us meanwhile
    assert _error_event(raw)["code"] == "timeout"
    status, raw, took = _post(relay, "silent", stream=False)
    assert status == 504 and took < 10 and json.loads(raw)["error"]["code"] == "timeout"


def test_an_upstream_silent_after_its_first_event_meets_the_idle_timeout(
    relay: NeutrinoProc,
) -> None:
    status, raw, took = _post(relay, "one-then-silent", stream=True)
    assert status == 200 and took < 1.8  # the idle bound (0.5 s), not the deadline (2 s)
    assert b'"content": "hi"' in raw  # the first event, as the upstream wrote it
    assert _error_event(raw)["code"] == "timeout"
    assert "stopped sending" in _error_event(raw)["message"]


def test_an_endless_line_is_never_relayed_and_ends_the_stream(relay: NeutrinoProc) -> None:
    status, raw, took = _post(relay, "endless", stream=True)
    assert status == 200 and took < 10
    assert b"xxxx" not in raw  # no part of the unbounded event reached the client
    assert _error_event(raw)["code"] == "engine_error"


def test_an_answer_that_is_not_json_is_a_502(relay: NeutrinoProc) -> None:
    status, raw, _ = _post(relay, "not-json", stream=False)
    assert status == 502 and json.loads(raw)["error"]["code"] == "engine_error"
    assert "not JSON" in relay.log()
    status, raw, _ = _post(relay, "fine", stream=False)
    assert status == 200 and json.loads(raw)["choices"][0]["message"]["content"] == "fine"


async def test_a_burst_of_grpc_calls_on_one_channel_is_served_or_refused_and_counted(
    tmp_path: Path,
) -> None:
    import grpc

    from neutrino.v1 import inference_pb2, inference_pb2_grpc

    grpc_address, metrics_port = f"127.0.0.1:{free_port()}", free_port()
    config = "[limits]\nmax_queue = 300\nmax_inflight = 64\n[mock]\nitl_ms = 2\n"
    server = NeutrinoProc(tmp_path, "--grpc-address", grpc_address, "--metrics-address",
                          f"127.0.0.1:{metrics_port}", config=config)  # fmt: skip
    server.start(timeout=30)
    try:
        msg = inference_pb2.ChatMessage(role="user", content="hi")
        req = inference_pb2.GenerateRequest(
            model="qwen2.5-mock", chat=inference_pb2.Chat(messages=[msg]), max_tokens=4
        )
        async with grpc.aio.insecure_channel(grpc_address) as channel:
            stub = inference_pb2_grpc.InferenceStub(channel)

            async def one() -> str:
                try:
                    await stub.Generate(req, timeout=60)
                    return "OK"
                except grpc.aio.AioRpcError as err:
                    return str(err.code().name)

            codes = await asyncio.gather(*(one() for _ in range(2000)))
        assert set(codes) <= {"OK", "RESOURCE_EXHAUSTED"}, collections.Counter(codes)
        assert codes.count("OK") >= 364  # the queue and the slots, at least
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
            text = r.read().decode()
        counted = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                      if line.startswith("neutrino_requests_total{")
                      and 'protocol="grpc"' in line)  # fmt: skip
        assert counted == 2000  # every call, served or refused, is in the metric
    finally:
        server.stop()
