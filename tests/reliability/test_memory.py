"""Large requests, refused or served, leave the server's memory where it was.

Before, every refused 8 MB chat kept ~90 MB (its history entry held the raised error,
whose traceback held the request's frames), and gRPC's abort kept a 20 MB prompt's
frames in a cycle; prompts far over the context were encoded whole (~70 MB of ids).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import aiohttp
import grpc

from tests.support.procs import MockIE, NeutrinoProc, free_port

MODEL = "qwen2.5-mock"
MB = 1024 * 1024
BODY = 8_000_000  # under the default 8 MiB limit
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa "


def _bodies() -> list[tuple[str, bytes]]:
    text = (WORDS * (BODY // len(WORDS)))[: BODY - 300]
    hi = [{"role": "user", "content": "hi"}]
    ids = list(range(1000, 1000 + 1_000_000))
    bodies = [
        ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": text}]}),
        ("/v1/completions", {"model": MODEL, "prompt": text, "max_tokens": 4}),
        ("/v1/completions", {"model": MODEL, "prompt": ids, "max_tokens": 4}),
        ("/v1/chat/completions", {"model": MODEL, "messages": hi, "max_tokens": 4, "x": text}),
        ("/v1/chat/completions", {"model": MODEL, "messages": hi * 200_000, "max_tokens": 4}),
    ]
    out = [(path, json.dumps(body).encode()) for path, body in bodies]
    spaces = b" " * (BODY - 200)  # JSON whitespace: a small request in a large body
    out.append(
        (
            "/v1/chat/completions",
            b'{"model": "%s",%b"messages": [{"role": "user",'
            b' "content": "hi"}], "max_tokens": 4}' % (MODEL.encode(), spaces),
        )
    )
    assert all(6 * MB < len(b) <= 8 * MB for _, b in out)
    return out


def _rss(server: NeutrinoProc) -> int:
    rss: int = server.get_json("/neutrino/v1/app_state")["process"]["rss_bytes"]
    return rss


def _settles(server: NeutrinoProc, timeout: float = 12.0) -> int:
    """The server's resident size once it stops falling (freed memory goes back to the
    system within a few seconds of a burst: neutrino.observability.memory)."""
    deadline = time.monotonic() + timeout
    low = _rss(server)
    calm = 0
    while calm < 6 and time.monotonic() < deadline:
        time.sleep(0.5)
        rss = _rss(server)
        calm = calm + 1 if rss >= low - MB else 0
        low = min(low, rss)
    return low


async def _send_all(base: str, bodies: list[tuple[str, bytes]], n: int) -> list[int]:
    sem = asyncio.Semaphore(6)
    statuses: list[int] = []
    async with aiohttp.ClientSession() as s:

        async def one(path: str, body: bytes) -> None:
            async with (
                sem,
                s.post(base + path, data=body, headers={"Content-Type": "application/json"}) as r,
            ):
                await r.read()
                statuses.append(r.status)

        await asyncio.gather(*(one(*bodies[i % len(bodies)]) for i in range(n)))
    return statuses


async def test_fifty_8mb_requests_leave_rss_within_64mb_of_the_warm_baseline(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    mock = mock_factory()
    server = neutrino_factory("--engine", mock.socket)
    bodies = _bodies()
    warm = await _send_all(server.base_url, bodies, len(bodies))  # tokenizer caches, arenas
    assert sorted(set(warm)) == [200, 400]
    baseline = _settles(server)
    statuses = await _send_all(server.base_url, bodies, 50)
    assert len(statuses) == 50 and set(statuses) <= {200, 400}
    assert statuses.count(200) >= 16  # the served ones (unknown field, whitespace)
    after = _settles(server)
    print(f"RSS warm {baseline / MB:.0f} MB, after 50 x 8 MB {after / MB:.0f} MB")
    assert after <= baseline + 64 * MB
    records = server.history(60)
    assert all(len(json.dumps(r)) < 2000 for r in records)


def test_three_20mb_grpc_prompts_leave_rss_within_64mb(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    from neutrino.v1 import inference_pb2 as pb
    from neutrino.v1 import inference_pb2_grpc

    mock = mock_factory()
    address = f"127.0.0.1:{free_port()}"
    server = neutrino_factory("--engine", mock.socket, "--grpc-address", address)
    text = (WORDS * (20_000_000 // len(WORDS)))[:20_000_000]
    options = [("grpc.max_send_message_length", 64 * MB)]
    with grpc.insecure_channel(address, options=options) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)

        def send() -> grpc.StatusCode:
            req = pb.GenerateRequest(
                model=MODEL,
                chat=pb.Chat(messages=[pb.ChatMessage(role="user", content=text)]),
                max_tokens=4,
            )
            try:
                stub.Generate(req, timeout=30)
            except grpc.RpcError as exc:
                code: grpc.StatusCode = exc.code()
                return code
            return grpc.StatusCode.OK

        assert send() is grpc.StatusCode.INVALID_ARGUMENT
        baseline = _settles(server)
        assert [send() for _ in range(3)] == [grpc.StatusCode.INVALID_ARGUMENT] * 3
    after = _settles(server)
    print(f"RSS warm {baseline / MB:.0f} MB, after 3 x 20 MB gRPC {after / MB:.0f} MB")
    assert after <= baseline + 64 * MB
