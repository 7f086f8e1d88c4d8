"""HTTP/3 over QUIC: a real Neutrino process and mock_ie, through an aioquic client
(``neutrino.loadgen.h3``), with the answers compared to HTTP/1.1's."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import signal
import ssl
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, ErrorCode, H3Connection
from aioquic.h3.events import HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import QuicEvent

from neutrino.loadgen.h3 import H3Client, H3Error, H3Response
from tests.support.procs import MockIE, NeutrinoProc, serving

MODEL = "qwen2.5-mock"
MAX_BODY = 65536
BUFFER = 16384  # [limits] stream_buffer_bytes: what a client may leave unread
JSON = {"content-type": "application/json"}
SEND_TIMEOUT_S = 8  # [limits] send_timeout_s: how long a relayed speech write may wait


class Stack:
    def __init__(self, mock: MockIE, server: NeutrinoProc, tls_dir: Path) -> None:
        self.mock = mock
        self.server = server
        self.tls_dir = tls_dir
        self.port = server.quic_port()

    def client(self) -> H3Client:
        return H3Client("127.0.0.1", self.port)

    def cancels(self) -> list[dict[str, Any]]:
        return self.mock.events("cancel")

    def wait_cancels(self, before: int) -> list[dict[str, Any]]:
        """The cancels after the first ``before``, once one arrived (and a moment more,
        for a second that should not come)."""
        deadline = time.monotonic() + 10
        while len(self.cancels()) <= before and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)
        return self.cancels()[before:]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("h3")
    mock = MockIE(work, "--itl-ms", "5").start()
    tls_dir = work / "tls"
    config = f"""
[[engines]]
socket = "{mock.socket}"
[server]
tls_dir = "{tls_dir}"
[limits]
max_body_bytes = {MAX_BODY}
stream_buffer_bytes = {BUFFER}
send_timeout_s = {SEND_TIMEOUT_S}
"""
    server = NeutrinoProc(work, "--quic-address", "127.0.0.1:0", config=config)
    with serving(mock, server):
        yield Stack(mock, server, tls_dir)


def chat(**extra: Any) -> bytes:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hello"}], "seed": 7}
    return json.dumps({**body, **extra}).encode()


async def post(client: H3Client, path: str, body: bytes) -> tuple[H3Response, Any]:
    resp = await client.request("POST", path, JSON, body)
    return resp, json.loads(await resp.read())


def http1_bytes(stack: Stack, path: str, body: bytes) -> bytes:
    req = urllib.request.Request(stack.server.base_url + path, data=body, headers=JSON)
    with urllib.request.urlopen(req, timeout=60) as r:
        data: bytes = r.read()
        return data


def sse_events(raw: bytes) -> list[str]:
    return [line[6:] for line in raw.decode().split("\n") if line.startswith("data: ")]


async def test_chat_matches_http1(stack: Stack) -> None:
    async with stack.client() as client:
        resp, answer = await post(client, "/v1/chat/completions", chat(max_tokens=12))
    assert resp.status == 200
    assert resp.headers["content-type"] == "application/json"
    assert resp.headers["x-request-id"] == answer["id"]
    status, h1 = stack.server.post_json("/v1/chat/completions", chat(max_tokens=12))
    assert status == 200
    assert answer["choices"] == h1["choices"]
    assert answer["usage"]["completion_tokens"] == h1["usage"]["completion_tokens"] == 12


async def test_streamed_chat_is_sse_in_data_frames(stack: Stack) -> None:
    async with stack.client() as client:
        resp = await client.request(
            "POST", "/v1/chat/completions", JSON, chat(max_tokens=10, stream=True)
        )
        assert resp.status == 200
        assert resp.headers["content-type"] == "text/event-stream"
        pieces = [c async for c in resp.chunks()]
    assert len(pieces) > 2  # streamed as it was made, not in one piece
    events = sse_events(b"".join(pieces))
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    _, h1 = stack.server.post_json("/v1/chat/completions", chat(max_tokens=10))
    assert text == h1["choices"][0]["message"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


async def test_completions(stack: Stack) -> None:
    body = json.dumps({"model": MODEL, "prompt": "Once upon", "max_tokens": 6, "seed": 3}).encode()
    async with stack.client() as client:
        resp, answer = await post(client, "/v1/completions", body)
    assert resp.status == 200 and answer["object"] == "text_completion"
    _, h1 = stack.server.post_json("/v1/completions", body)
    assert answer["choices"][0]["text"] == h1["choices"][0]["text"]


async def test_relayed_routes(stack: Stack) -> None:
    """Routes served by the aiohttp handlers: models, embeddings, status."""
    async with stack.client() as client:
        models = await client.request("GET", "/v1/models")
        listed = json.loads(await models.read())
        emb, vectors = await post(
            client, "/v1/embeddings", json.dumps({"model": "embed-mock", "input": "hi"}).encode()
        )
        status = await client.request("GET", "/neutrino/v1/status")
        status_body = json.loads(await status.read())
    assert models.status == 200
    assert listed == stack.server.get_json("/v1/models")
    assert "connection" not in models.headers and "transfer-encoding" not in models.headers
    assert emb.status == 200 and len(vectors["data"][0]["embedding"]) > 0
    assert status.status == 200 and status_body["status"] == "ok"


async def test_many_requests_on_one_connection(stack: Stack) -> None:
    async with stack.client() as client:
        results = await asyncio.gather(
            *(post(client, "/v1/chat/completions", chat(max_tokens=3, seed=i)) for i in range(40))
        )
    assert [r.status for r, _ in results] == [200] * 40
    assert len({a["id"] for _, a in results}) == 40


async def test_unknown_model_is_openai_404(stack: Stack) -> None:
    async with stack.client() as client:
        resp, answer = await post(client, "/v1/chat/completions", chat(model="no-such-model"))
    assert resp.status == 404
    assert answer["error"]["code"] == "model_not_found"
    assert answer["error"]["type"] == "invalid_request_error"


async def test_a_bad_field_three_levels_deep_is_named_as_over_http1(stack: Stack) -> None:
    """HTTP/3 carries the HTTP API: the same typed request, the same OpenAI param."""
    bad = chat(messages=[{"role": "user", "content": [{"type": "text", "text": 7}]}])
    async with stack.client() as client:
        resp, answer = await post(client, "/v1/chat/completions", bad)
    assert resp.status == 400
    assert answer["error"]["param"] == "messages[0].content[0].text"
    assert answer["error"]["message"] == "messages[0].content[0].text must be a string"
    status, h1 = stack.server.post_json("/v1/chat/completions", bad)
    assert status == 400 and h1["error"] == answer["error"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/embeddings"])
async def test_body_over_the_limit_is_413(stack: Stack, path: str) -> None:
    big = b'{"model": "x", "input": "' + b"a" * (MAX_BODY + 10) + b'"}'
    async with stack.client() as client:
        resp, answer = await post(client, path, big)
        assert resp.status == 413
        assert answer["error"]["code"] == "request_too_large"
        again, _ = await post(client, "/v1/chat/completions", chat(max_tokens=1))
        assert again.status == 200  # the connection serves on


async def test_reset_mid_stream_cancels_once(stack: Stack) -> None:
    before = len(stack.cancels())
    async with stack.client() as client:
        resp = await client.request(
            "POST",
            "/v1/chat/completions",
            JSON,
            chat(max_tokens=5000, stream=True, ignore_eos=True),
        )
        received = b""
        async for piece in resp.chunks():
            received += piece
            if received.count(b"data: ") >= 3:
                break
        resp.reset()
        cancels = await asyncio.to_thread(stack.wait_cancels, before)
        history = await asyncio.to_thread(stack.server.history, 1)
        # The connection goes on serving after one of its streams was reset.
        again, _ = await post(client, "/v1/chat/completions", chat(max_tokens=1))
        assert again.status == 200
    assert len(cancels) == 1 and cancels[0]["reason"] == "client disconnected"
    assert history[0]["state"] == "cancelled"


async def test_connection_closed_mid_stream_cancels_once(stack: Stack) -> None:
    before = len(stack.cancels())
    async with stack.client() as client:
        resp = await client.request(
            "POST",
            "/v1/chat/completions",
            JSON,
            chat(max_tokens=5000, stream=True, ignore_eos=True),
        )
        async for _ in resp.chunks():
            break
        client.close()
    cancels = await asyncio.to_thread(stack.wait_cancels, before)
    assert len(cancels) == 1 and cancels[0]["reason"] == "client disconnected"


async def test_client_that_stops_reading_is_dropped(stack: Stack) -> None:
    """A client that acknowledges nothing: what it has not taken grows past the stream
    buffer limit, its stream is reset and its engine request cancelled once."""
    before = len(stack.cancels())
    async with stack.client() as client:
        resp = await client.request(
            "POST",
            "/v1/chat/completions",
            JSON,
            chat(max_tokens=5000, stream=True, ignore_eos=True),
        )
        assert resp.status == 200
        client.stop_receiving()
        cancels = await asyncio.to_thread(stack.wait_cancels, before)
    assert len(cancels) == 1 and cancels[0]["reason"] == "client too slow"
    assert "not reading its stream" in stack.server.log_path.read_text(errors="replace")


def test_alt_svc_on_http1(stack: Stack) -> None:
    want = f'h3=":{stack.port}"; ma=86400'
    # The lean server's own answer, and one of aiohttp's (a route it relays).
    req = urllib.request.Request(
        stack.server.base_url + "/v1/chat/completions", data=chat(max_tokens=1), headers=JSON
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.headers["Server"] == "neutrino" and r.headers["Alt-Svc"] == want
    with urllib.request.urlopen(stack.server.base_url + "/v1/models", timeout=10) as r:
        assert r.headers["Alt-Svc"] == want


def test_self_signed_certificate_is_kept_and_its_fingerprint_logged(stack: Stack) -> None:
    from cryptography import x509

    cert = x509.load_pem_x509_certificate((stack.tls_dir / "selfsigned-cert.pem").read_bytes())
    fingerprint = hashlib.sha256(cert.public_bytes(_der())).hexdigest().upper()
    log = stack.server.log_path.read_text(errors="replace")
    shown = re.search(r"HTTP/3 certificate .*SHA-256 fingerprint ([0-9A-F:]+)", log)
    assert shown is not None and shown.group(1).replace(":", "") == fingerprint
    assert (stack.tls_dir.stat().st_mode & 0o777) == 0o700
    assert ((stack.tls_dir / "selfsigned-key.pem").stat().st_mode & 0o777) == 0o600


def _der() -> Any:
    from cryptography.hazmat.primitives.serialization import Encoding

    return Encoding.DER


async def test_error_when_the_stream_is_reset_before_the_answer(stack: Stack) -> None:
    """A non-streamed request abandoned while it runs: one cancel, connection intact."""
    before = len(stack.cancels())
    queries = len(stack.mock.events("query"))
    async with stack.client() as client:
        task = asyncio.ensure_future(
            client.request(
                "POST", "/v1/chat/completions", JSON, chat(max_tokens=3000, ignore_eos=True)
            )
        )
        deadline = time.monotonic() + 5
        while len(stack.mock.events("query")) == queries and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        task.cancel()  # request() resets the stream of a request it gives up on
        with pytest.raises((asyncio.CancelledError, H3Error)):
            await task
        cancels = await asyncio.to_thread(stack.wait_cancels, before)
    assert len(cancels) == 1 and cancels[0]["reason"] == "client disconnected"


async def test_sigterm_lets_a_stream_finish_and_exits_cleanly(tmp_path: Path) -> None:
    """Drain: a stream in flight on HTTP/3 ends with [DONE] within the grace, no engine
    cancel, and the process exits 0 (the QUIC listener closes with the rest)."""
    mock = MockIE(tmp_path, "--itl-ms", "10").start()
    config = f'[[engines]]\nsocket = "{mock.socket}"\n[server]\ntls_dir = "{tmp_path / "tls"}"\n'
    server = NeutrinoProc(tmp_path, "--quic-address", "127.0.0.1:0", config=config)
    with serving(mock, server):
        async with H3Client("127.0.0.1", server.quic_port()) as client:
            body = chat(max_tokens=60, stream=True, ignore_eos=True)
            resp = await client.request("POST", "/v1/chat/completions", JSON, body)
            pieces = [await anext(aiter(resp.chunks()))]
            assert server.proc is not None
            server.proc.send_signal(signal.SIGTERM)
            pieces += [c async for c in resp.chunks()]
        code = await asyncio.to_thread(server.proc.wait, 20)  # a second SIGTERM would kill it
    events = sse_events(b"".join(pieces))
    assert events[-1] == "[DONE]"
    assert json.loads(events[-2])["choices"][0]["finish_reason"] == "length"  # all 60 tokens
    assert code == 0
    assert mock.events("cancel") == []


async def test_anthropic_messages_and_its_error_shape(stack: Stack) -> None:
    """Every generation route of the HTTP/1.1 server is served: Anthropic's Messages,
    its errors (a body over the limit too) in Anthropic's shape."""
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    headers = {**JSON, "anthropic-version": "2023-06-01"}
    big = json.dumps({**body, "system": "a" * (MAX_BODY + 10)}).encode()
    async with stack.client() as client:
        ok = await client.request("POST", "/v1/messages", headers, json.dumps(body).encode())
        message = json.loads(await ok.read())
        over = await client.request("POST", "/v1/messages", headers, big)
        refused = json.loads(await over.read())
    assert ok.status == 200 and message["type"] == "message"
    assert message["usage"]["output_tokens"] == 5
    assert over.status == 413
    assert refused["type"] == "error" and refused["error"]["type"] == "request_too_large"


async def test_large_relayed_answer_equals_http1(stack: Stack) -> None:
    """An answer far over the relay's high-water mark (the handler's writes pause until
    the client takes it) comes whole, as HTTP/1.1 gives it."""
    inputs = [f"sentence number {i} to embed" for i in range(200)]
    body = json.dumps({"model": "embed-mock", "input": inputs}).encode()
    h1 = await asyncio.to_thread(http1_bytes, stack, "/v1/embeddings", body)
    assert len(h1) > 1_000_000
    async with stack.client() as client:
        resp = await client.request("POST", "/v1/embeddings", JSON, body)
        got = await resp.read()
    assert resp.status == 200
    assert got == h1


async def test_a_large_answer_written_in_pieces_equals_http1(stack: Stack) -> None:
    """An answer whose logprobs are large is written as it is rendered (pieces.py): over
    HTTP/3 as DATA frames without a length, whole all the same."""
    body = chat(max_tokens=300, n=2, logprobs=True, top_logprobs=20, ignore_eos=True)
    h1 = json.loads(await asyncio.to_thread(http1_bytes, stack, "/v1/chat/completions", body))
    async with stack.client() as client:
        resp = await client.request("POST", "/v1/chat/completions", JSON, body)
        got = json.loads(await resp.read())
    assert resp.status == 200 and "content-length" not in resp.headers
    assert got["choices"] == h1["choices"]
    assert [len(c["logprobs"]["content"]) for c in got["choices"]] == [300, 300]


async def test_speech_stream_resumes_after_the_client_stalls(stack: Stack) -> None:
    """A relayed stream (text to speech) whose client takes nothing for a while: the
    handler's writes pause past the high-water mark and resume once the client reads
    again, so the stream ends whole (not cut at ``send_timeout_s`` as a slow client)."""
    body = json.dumps(
        {
            "model": "tts-mock",
            "input": "hello world " * 60,
            "voice": "alloy",
            "response_format": "pcm",
        }
    ).encode()
    h1 = await asyncio.to_thread(http1_bytes, stack, "/v1/audio/speech", body)
    finished = len(stack.mock.events("finish"))
    cancels = len(stack.cancels())
    async with stack.client() as client:
        request = asyncio.ensure_future(client.request("POST", "/v1/audio/speech", JSON, body))
        await asyncio.sleep(0.1)  # the request went out
        client.stop_receiving()
        # The engine sent all of it: the server holds far more than the high-water mark.
        done = await asyncio.to_thread(stack.mock.wait_event, "finish", finished + 1, 20)
        assert len(done) > finished
        client.resume_receiving()
        resp = await request
        got = await resp.read()
    assert resp.status == 200
    assert len(got) == len(h1) and got == h1
    assert len(stack.cancels()) == cancels


async def test_a_relayed_answer_cut_short_is_a_reset_not_an_end(tmp_path: Path) -> None:
    """The engine dies in the middle of a speech stream: HTTP/1.1 cuts its connection
    before the last chunk; HTTP/3 resets the stream (the body must not end as if whole)."""
    mock = MockIE(tmp_path, "--itl-ms", "20").start()
    config = f'[[engines]]\nsocket = "{mock.socket}"\n[server]\ntls_dir = "{tmp_path / "tls"}"\n'
    server = NeutrinoProc(tmp_path, "--quic-address", "127.0.0.1:0", config=config)
    body = json.dumps(
        {"model": "tts-mock", "input": "hello world " * 60, "voice": "alloy"}
    ).encode()
    with serving(mock, server):
        async with H3Client("127.0.0.1", server.quic_port()) as client:
            resp = await client.request("POST", "/v1/audio/speech", JSON, body)
            assert resp.status == 200
            chunks = aiter(resp.chunks())
            received = await anext(chunks)
            await asyncio.to_thread(mock.kill)
            with pytest.raises(H3Error, match=r"reset the stream \(0x102\)"):  # internal error
                async for piece in chunks:
                    received += piece
    whole = 44 + int(720 * 0.06 * 24000) * 2  # the mock's speech: a WAV header, 16-bit PCM
    assert 0 < len(received) < whole


class _ResetOnly(QuicConnectionProtocol):
    """A raw HTTP/3 client that gives up on a request with RESET_STREAM alone (no
    STOP_SENDING), its request stream still open."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.heads: dict[int, asyncio.Future[bytes]] = {}

    def quic_event_received(self, event: QuicEvent) -> None:
        for h3_event in self.h3.handle_event(event):
            if isinstance(h3_event, HeadersReceived):
                head = self.heads.get(h3_event.stream_id)
                if head is not None and not head.done():
                    head.set_result(dict(h3_event.headers)[b":status"])

    async def request(self, path: str, body: bytes, *, reset: bool) -> bytes:
        """Send the request and wait for the response's status. ``reset``: the stream is
        left open (the body is whole by its length), then our side is reset, alone."""
        sid = self._quic.get_next_available_stream_id()
        self.heads[sid] = head = asyncio.get_running_loop().create_future()
        fields = [
            (b":method", b"POST"),
            (b":scheme", b"https"),
            (b":authority", b"localhost"),
            (b":path", path.encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        self.h3.send_headers(sid, fields)
        self.h3.send_data(sid, body, end_stream=not reset)
        self.transmit()
        try:
            return await asyncio.wait_for(head, 20)
        finally:
            del self.heads[sid]
            if reset:
                self._quic.reset_stream(sid, ErrorCode.H3_REQUEST_CANCELLED)
                self.transmit()


async def test_streams_reset_by_the_client_alone_give_their_credit_back(tmp_path: Path) -> None:
    """More requests than the connection's stream limit (100), each abandoned with
    RESET_STREAM alone while its speech streams: the server resets its side too, so the
    streams are discarded and the client may open new ones; one engine cancel each."""
    mock = MockIE(tmp_path, "--itl-ms", "50").start()  # each speech streams for ~0.7 s
    config = f'[[engines]]\nsocket = "{mock.socket}"\n[server]\ntls_dir = "{tmp_path / "tls"}"\n'
    server = NeutrinoProc(tmp_path, "--quic-address", "127.0.0.1:0", config=config)
    body = json.dumps({"model": "tts-mock", "input": "hello " * 10, "voice": "alloy"}).encode()
    quic = QuicConfiguration(
        is_client=True, alpn_protocols=list(H3_ALPN), verify_mode=ssl.CERT_NONE
    )
    batches, per_batch = 11, 10
    with serving(mock, server):
        async with connect(
            "127.0.0.1", server.quic_port(), configuration=quic, create_protocol=_ResetOnly
        ) as proto:
            assert isinstance(proto, _ResetOnly)
            for _ in range(batches):
                heads = await asyncio.gather(
                    *(proto.request("/v1/audio/speech", body, reset=True) for _ in range(per_batch))
                )
                assert heads == [b"200"] * per_batch
            # The connection still serves a request from end to end.
            ok = await proto.request("/v1/chat/completions", chat(max_tokens=1), reset=False)
            assert ok == b"200"
        total = batches * per_batch
        cancels = await asyncio.to_thread(mock.wait_event, "cancel", total, 20)
        await asyncio.sleep(0.3)  # a second cancel for one of them would show now
        cancels = mock.events("cancel")
    assert len(cancels) == total
    assert {c["reason"] for c in cancels} == {"client disconnected"}
    assert len({(c["conn"], c["request_id"]) for c in cancels}) == total
