"""SIGTERM with requests still running: every one ends as a failed request would.

Past ``[shutdown] grace_s``, each live stream gets an SSE error event (code
``shutting_down``), ``data: [DONE]`` and the end of its chunked body; a non-streamed
request a 503; a gRPC stream UNAVAILABLE; the engine one cancel per request with the
reason "shutdown"; the process exits 0 with nothing left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import time
from collections.abc import Callable

import grpc

from neutrino.v1 import inference_pb2, inference_pb2_grpc
from tests.support.procs import MockIE, NeutrinoProc, free_port
from tests.support.raw import chat_request, read_all

STREAMS = 20


def _request(stream: bool) -> bytes:
    story = [{"role": "user", "content": "Tell me a long story"}]
    return chat_request({"stream": stream, "max_tokens": 2000, "messages": story})


def _dechunk(body: bytes) -> tuple[bytes, bool]:
    """The chunked body's payload, and whether it ended with its terminating chunk."""
    out = b""
    while body:
        size_line, sep, rest = body.partition(b"\r\n")
        if not sep:
            return out, False
        size = int(size_line, 16)
        if size == 0:
            return out, rest == b"\r\n"
        out += rest[:size]
        body = rest[size + 2 :]
    return out, False


async def _grpc_stream(address: str) -> grpc.StatusCode:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)
        msgs = [inference_pb2.ChatMessage(role="user", content="Tell me a long story")]
        call = stub.GenerateStream(
            inference_pb2.GenerateRequest(
                model="qwen2.5-mock", chat=inference_pb2.Chat(messages=msgs), max_tokens=2000
            ),
            timeout=30,
        )
        try:
            async for _ in call:
                pass
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK


async def test_sigterm_ends_twenty_live_streams_cleanly(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    mock = mock_factory("--itl-ms", "20", "--reply-tokens", "2000")
    address = f"127.0.0.1:{free_port()}"
    server = neutrino_factory(
        "--grpc-address",
        address,
        config=f'[[engines]]\nsocket = "{mock.socket}"\n[shutdown]\ngrace_s = 1.0\n',
    )
    streams = [
        socket.create_connection(("127.0.0.1", server.port), timeout=15) for _ in range(STREAMS)
    ]
    for s in streams:
        s.sendall(_request(stream=True))
    plain = socket.create_connection(("127.0.0.1", server.port), timeout=15)
    plain.sendall(_request(stream=False))
    rpc = asyncio.ensure_future(_grpc_stream(address))
    assert await asyncio.to_thread(mock.wait_event, "query", STREAMS + 2, 10)
    await asyncio.sleep(0.3)  # tokens are flowing
    assert server.proc is not None
    t0 = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    answers = await asyncio.gather(*(asyncio.to_thread(read_all, s) for s in streams))
    plain_answer = await asyncio.to_thread(read_all, plain)
    assert await rpc is grpc.StatusCode.UNAVAILABLE
    assert server.proc.wait(15) == 0
    took = time.monotonic() - t0
    for s in [*streams, plain]:
        s.close()

    for raw in answers:
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ")
        payload, terminated = _dechunk(body)
        assert terminated, body[-200:]  # curl would say: transfer closed (exit 18)
        events = [e for e in payload.split(b"\n\n") if e.startswith(b"data: ")]
        assert events[-1] == b"data: [DONE]"
        err = json.loads(events[-2][6:])["error"]
        assert err["code"] == "shutting_down" and err["type"] == "server_error"
        assert len(events) > 3  # tokens had flowed before the error
    head, _, body = plain_answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 5" in head
    assert json.loads(body)["error"]["code"] == "shutting_down"

    cancels = mock.events("cancel")
    assert len(cancels) == STREAMS + 2
    assert {c["reason"] for c in cancels} == {"shutdown"}
    assert len({(c["conn"], c["request_id"]) for c in cancels}) == STREAMS + 2
    assert 1.0 <= took < 8.0
    assert "ended 22 requests still running after the grace period" in server.log()


def test_an_upload_still_dribbling_in_does_not_hold_the_shutdown(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    """A request relayed to aiohttp whose body keeps arriving, a byte at a time within
    the body timeout, is cancelled a second after the grace, not after aiohttp's 60 s."""
    mock = mock_factory()
    server = neutrino_factory(
        config=f'[[engines]]\nsocket = "{mock.socket}"\n[shutdown]\ngrace_s = 1.0\n'
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=15) as s:
        s.sendall(
            b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"model": "embed-mock", '
        )
        time.sleep(0.2)
        assert server.proc is not None
        t0 = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        while server.proc.poll() is None and time.monotonic() - t0 < 15:
            with contextlib.suppress(OSError):
                s.sendall(b" ")
            time.sleep(0.2)
        assert server.proc.wait(15) == 0
    assert time.monotonic() - t0 < 6
