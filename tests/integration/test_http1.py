"""The lean HTTP/1.1 server in front of aiohttp, over raw sockets.

Chat and text completions are served by Neutrino's own HTTP/1.1 protocol; every
other request is relayed to the aiohttp application on the same connection. These
tests speak HTTP by hand so that keep-alive, pipelining, chunked bodies,
``Expect: 100-continue``, limits and malformed input are exercised exactly.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.openapi import validate
from tests.support.procs import MockIE, NeutrinoProc, free_port, serving

MODEL = "qwen2.5-mock"
MAX_BODY = 65536


@pytest.fixture(scope="module")
def h1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MockIE, NeutrinoProc]]:
    work: Path = tmp_path_factory.mktemp("h1")
    mock = MockIE(work, "--itl-ms", "5").start()
    server = NeutrinoProc(
        work,
        config=f"""
[[engines]]
socket = "{mock.socket}"
[limits]
max_body_bytes = {MAX_BODY}
""",
    )
    with serving(mock, server):
        yield mock, server


class Conn:
    """One client connection; reads responses one after another from a shared buffer."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self._file = self.sock.makefile("rb")

    def makefile(self, *args: Any, **kw: Any) -> Any:  # what HTTPResponse reads through
        return _Shared(self._file)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def response(self, method: str = "POST") -> tuple[http.client.HTTPResponse, bytes]:
        r = http.client.HTTPResponse(self, method=method)  # type: ignore[arg-type]
        r.begin()
        return r, r.read()

    def closed_by_server(self) -> bool:
        self.sock.settimeout(5)
        try:
            return self._file.read(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self._file.close()
        self.sock.close()


class _Shared:
    """The connection's reader, which one response must not close for the next."""

    def __init__(self, f: Any) -> None:
        self._f = f

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def close(self) -> None:
        pass


def chat_body(**kw: Any) -> bytes:
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Say something."}],
        "max_tokens": 3,
        "ignore_eos": True,
    }
    body.update(kw)
    return json.dumps(body).encode()


def post(path: str, body: bytes, *headers: str, version: str = "1.1") -> bytes:
    head = [f"POST {path} HTTP/{version}", "Host: x", "Content-Type: application/json"]
    head += [f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


@pytest.fixture
def conn(h1: tuple[MockIE, NeutrinoProc]) -> Iterator[Conn]:
    c = Conn(h1[1].port)
    yield c
    c.close()


def test_fast_and_relayed_routes_share_a_keep_alive_connection(conn: Conn) -> None:
    conn.send(post("/v1/chat/completions", chat_body()))
    r, raw = conn.response()
    assert r.status == 200 and r.getheader("Server") == "neutrino"
    assert r.getheader("Content-Type") == "application/json" and r.getheader("Date")
    body = json.loads(raw)
    validate(body, "CreateChatCompletionResponse")
    assert body["usage"]["completion_tokens"] == 3

    conn.send(get("/v1/models"))  # not a fast route: aiohttp answers it on this connection
    r, raw = conn.response("GET")
    assert r.status == 200 and "aiohttp" in (r.getheader("Server") or "")
    validate(json.loads(raw), "ListModelsResponse")

    # The connection stays with aiohttp now, and generation still works on it.
    conn.send(post("/v1/completions", json.dumps({"model": MODEL, "prompt": "a"}).encode()))
    r, raw = conn.response()
    assert r.status == 200 and "aiohttp" in (r.getheader("Server") or "")
    validate(json.loads(raw), "CreateCompletionResponse")


def test_pipelined_requests_are_answered_in_order(conn: Conn) -> None:
    sizes = [4, 1, 3]
    conn.send(b"".join(post("/v1/chat/completions", chat_body(max_tokens=n)) for n in sizes))
    for n in sizes:
        r, raw = conn.response()
        assert r.status == 200
        assert json.loads(raw)["usage"]["completion_tokens"] == n
    # A relayed request pipelined behind fast ones waits for their answers.
    conn.send(
        post("/v1/chat/completions", chat_body(max_tokens=2))
        + get("/neutrino/v1/status")
        + post("/v1/chat/completions", chat_body(max_tokens=1))
    )
    r, raw = conn.response()
    assert r.status == 200 and json.loads(raw)["usage"]["completion_tokens"] == 2
    r, raw = conn.response("GET")
    assert r.status == 200 and "aiohttp" in (r.getheader("Server") or "")
    r, raw = conn.response()
    assert r.status == 200 and json.loads(raw)["usage"]["completion_tokens"] == 1


def test_chunked_body_after_100_continue(conn: Conn) -> None:
    body = chat_body(max_tokens=2)
    conn.send(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
    )
    assert conn._file.readline() == b"HTTP/1.1 100 Continue\r\n"
    assert conn._file.readline() == b"\r\n"
    half = len(body) // 2
    for part in (body[:half], body[half:]):
        conn.send(b"%x\r\n%b\r\n" % (len(part), part))
    conn.send(b"0\r\n\r\n")
    r, raw = conn.response()
    assert r.status == 200 and json.loads(raw)["usage"]["completion_tokens"] == 2


def test_streamed_answer_is_chunked_sse_and_the_connection_is_reused(conn: Conn) -> None:
    conn.send(post("/v1/chat/completions", chat_body(stream=True, max_tokens=3)))
    r, raw = conn.response()
    assert r.status == 200 and r.getheader("Transfer-Encoding") == "chunked"
    assert r.getheader("Content-Type") == "text/event-stream"
    assert raw.startswith(b": ok\n\n") and raw.endswith(b"data: [DONE]\n\n")
    chunks = [json.loads(b[6:]) for b in raw.split(b"\n\n") if b.startswith(b"data: {")]
    for c in chunks:
        validate(c, "CreateChatCompletionStreamResponse")
    conn.send(post("/v1/chat/completions", chat_body(max_tokens=1)))
    r, raw = conn.response()
    assert r.status == 200 and json.loads(raw)["usage"]["completion_tokens"] == 1


def test_an_h2c_upgrade_offer_is_relayed_and_answered_in_http_1_1(conn: Conn) -> None:
    conn.send(
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n"
        b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQ\r\n\r\n"
        + post("/v1/chat/completions", chat_body(max_tokens=1))
    )
    r, raw = conn.response("GET")
    assert r.status == 200 and r.version == 11
    validate(json.loads(raw), "ListModelsResponse")
    r, raw = conn.response()
    assert r.status == 200 and "aiohttp" in (r.getheader("Server") or "")
    assert json.loads(raw)["usage"]["completion_tokens"] == 1


def test_connection_close_is_honoured(conn: Conn) -> None:
    conn.send(post("/v1/chat/completions", chat_body(max_tokens=1), "Connection: close"))
    r, raw = conn.response()
    assert r.status == 200 and r.getheader("Connection") == "close"
    assert json.loads(raw)["usage"]["completion_tokens"] == 1
    assert conn.closed_by_server()


def test_http_1_0_is_served_by_aiohttp(conn: Conn) -> None:
    conn.send(post("/v1/chat/completions", chat_body(max_tokens=2), version="1.0"))
    r, raw = conn.response()
    assert r.status == 200 and "aiohttp" in (r.getheader("Server") or "")
    assert json.loads(raw)["usage"]["completion_tokens"] == 2


def test_a_large_answer_is_written_in_pieces_on_both_servers(conn: Conn) -> None:
    """Large logprobs: chunked from the lean server, and through aiohttp (HTTP/1.0: no
    chunks there, the body ends with the connection); the same choices either way."""
    big = chat_body(max_tokens=200, n=2, logprobs=True, top_logprobs=20, seed=3, ignore_eos=True)
    conn.send(post("/v1/chat/completions", big))
    r, raw = conn.response()
    assert r.status == 200 and r.getheader("Transfer-Encoding") == "chunked"
    lean = json.loads(raw)
    validate(lean, "CreateChatCompletionResponse")
    conn.send(post("/v1/chat/completions", big, version="1.0"))
    r, raw = conn.response()
    assert r.status == 200 and "aiohttp" in (r.getheader("Server") or "")
    assert json.loads(raw)["choices"] == lean["choices"]
    assert [len(c["logprobs"]["content"]) for c in lean["choices"]] == [200, 200]


def _error(r: http.client.HTTPResponse, raw: bytes, status: int) -> dict[str, Any]:
    assert r.status == status, raw
    assert r.getheader("Content-Type") == "application/json"
    body = json.loads(raw)
    validate(body, "ErrorResponse")
    assert isinstance(body["error"], dict)
    err: dict[str, Any] = body["error"]
    return err


def test_declared_body_over_the_limit_gets_413_and_close(conn: Conn) -> None:
    conn.send(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % (MAX_BODY + 1)
    )
    r, raw = conn.response()
    err = _error(r, raw, 413)
    assert err["code"] == "request_too_large" and str(MAX_BODY) in err["message"]
    assert r.getheader("Connection") == "close" and conn.closed_by_server()


def test_chunked_body_over_the_limit_gets_413(conn: Conn) -> None:
    part = b"x" * 16384
    conn.send(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"%x\r\n%b\r\n" % (len(part), part) for _ in range(5))
    )
    r, raw = conn.response()
    assert _error(r, raw, 413)["code"] == "request_too_large"
    assert conn.closed_by_server()


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nX-Big: " + b"y" * 9000 + b"\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nBad Header\r\n\r\n",
    ],
    ids=["bad content-length", "header too long", "header without colon"],
)
def test_malformed_http_gets_a_400_error_json(conn: Conn, request_bytes: bytes) -> None:
    conn.send(request_bytes)
    r, raw = conn.response()
    assert _error(r, raw, 400)["type"] == "invalid_request_error"
    assert conn.closed_by_server()


def test_bad_json_on_the_fast_path_keeps_the_connection(conn: Conn) -> None:
    conn.send(post("/v1/chat/completions", b"{nope"))
    r, raw = conn.response()
    assert "not valid JSON" in _error(r, raw, 400)["message"]
    conn.send(post("/v1/chat/completions", chat_body(max_tokens=1)))
    r, raw = conn.response()
    assert r.status == 200


def test_client_gone_mid_stream_cancels_once(h1: tuple[MockIE, NeutrinoProc], conn: Conn) -> None:
    mock, server = h1
    before = len(mock.events("cancel"))
    conn.send(post("/v1/chat/completions", chat_body(stream=True, max_tokens=2000)))
    assert conn._file.readline().startswith(b"HTTP/1.1 200")
    conn.close()
    deadline = time.monotonic() + 5
    while len(mock.events("cancel")) <= before and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)  # would a second cancel arrive?
    cancels = mock.events("cancel")[before:]
    assert len(cancels) == 1 and cancels[0]["reason"] == "client disconnected"
    assert server.history(1)[0]["state"] == "cancelled"


def test_fast_path_can_be_turned_off(tmp_path: Path, h1: tuple[MockIE, NeutrinoProc]) -> None:
    server = NeutrinoProc(
        tmp_path,
        config=f"""
[[engines]]
socket = "{h1[0].socket}"
[http]
fast_path = false
""",
    )
    server.start()
    try:
        c = Conn(server.port)
        c.send(post("/v1/chat/completions", chat_body(max_tokens=2)))
        r, raw = c.response()
        assert r.status == 200 and "aiohttp" in (r.getheader("Server") or "")
        assert json.loads(raw)["usage"]["completion_tokens"] == 2
        c.close()
    finally:
        server.stop()


def _backlog(port: int) -> int:
    """The listen backlog of the TCP listener on ``port`` (``ss``: a listener's Send-Q)."""
    out = subprocess.run(
        ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[2])


def test_every_tcp_listener_takes_the_configured_backlog(
    neutrino_factory: Callable[..., NeutrinoProc],
) -> None:
    """asyncio's default backlog of 100 overflows when thousands of clients connect at
    once; [server] listen_backlog (default 511) sets it on HTTP, admin and metrics."""
    admin, metrics = free_port(), free_port()
    addresses = ("--admin-address", f"127.0.0.1:{admin}", "--metrics-address")
    server = neutrino_factory(*addresses, f"127.0.0.1:{metrics}", config="")
    assert [_backlog(p) for p in (server.port, admin, metrics)] == [511] * 3
    server.stop()
    server = neutrino_factory(
        *addresses, f"127.0.0.1:{metrics}", config="[server]\nlisten_backlog = 777\n"
    )
    assert [_backlog(p) for p in (server.port, admin, metrics)] == [777] * 3


def test_accepted_connections_keep_alive(h1: tuple[MockIE, NeutrinoProc]) -> None:
    """TCP keepalive is set on the listener, once, and each accepted connection inherits
    it (Linux): ``ss`` shows the server's side of a connection with a keepalive timer."""
    port = h1[1].port
    with socket.create_connection(("127.0.0.1", port)) as client:
        mine = client.getsockname()[1]
        time.sleep(0.1)
        out = subprocess.run(
            ["ss", "-tnoH", "state", "established", f"( sport = :{port} and dport = :{mine} )"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    assert "timer:(keepalive" in out, out
