"""Nothing a request starts outlives it: tasks, timers, buffers and memory come back."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from tests.support.procs import MockIE, NeutrinoProc
from tests.support.raw import chat_request

MODEL = "qwen2.5-mock"


def _stream_body(**kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        "stream": True,
    }
    body.update(kw)
    return body


def _config(mock: MockIE, extra: str = "") -> str:
    return f"""
[[engines]]
socket = "{mock.socket}"
[http]
sse_keepalive_s = 0.2
{extra}
"""


def _clean_log(server: NeutrinoProc) -> None:
    text = server.log_path.read_text()
    for sign in ("Traceback", "exception was never retrieved", "after write_eof"):
        assert sign not in text, text[-3000:]


def _settled_tasks(server: NeutrinoProc, baseline: int, timeout: float = 5.0) -> int:
    """The server's task count once it is back at ``baseline`` (or the last seen)."""
    deadline = time.monotonic() + timeout
    while True:
        tasks: int = server.get_json("/neutrino/v1/app_state")["process"]["tasks"]
        if tasks <= baseline or time.monotonic() > deadline:
            return tasks
        time.sleep(0.05)


@pytest.mark.parametrize("fast_path", [True, False], ids=["h1", "aiohttp"])
async def test_a_thousand_streams_leave_no_task_behind(
    mock_factory: Callable[..., MockIE],
    neutrino_factory: Callable[..., NeutrinoProc],
    fast_path: bool,
) -> None:
    mock = mock_factory()
    server = neutrino_factory(config=_config(mock, f"fast_path = {str(fast_path).lower()}"))
    before = server.get_json("/neutrino/v1/app_state")["process"]["tasks"]
    url = server.base_url + "/v1/chat/completions"
    connector = aiohttp.TCPConnector(limit=8)
    async with aiohttp.ClientSession(connector=connector) as s:

        async def one() -> None:
            async with s.post(url, json=_stream_body()) as r:
                assert r.status == 200
                assert (await r.read()).rstrip().endswith(b"data: [DONE]")

        for _ in range(125):
            await asyncio.gather(*(one() for _ in range(8)))
    assert _settled_tasks(server, before) <= before
    _clean_log(server)


@pytest.mark.parametrize("fast_path", [True, False], ids=["h1", "aiohttp"])
def test_a_reused_keepalive_connection_gets_nothing_between_responses(
    mock_factory: Callable[..., MockIE],
    neutrino_factory: Callable[..., NeutrinoProc],
    fast_path: bool,
) -> None:
    """After a stream ends, not one byte reaches its connection until the next request:
    a keepalive timer left running would write ': keepalive' before the next response."""
    mock = mock_factory()
    server = neutrino_factory(config=_config(mock, f"fast_path = {str(fast_path).lower()}"))
    request = chat_request({"stream": True, "max_tokens": 4})
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        for _ in range(3):
            sock.sendall(request)
            raw = b""
            while not raw.endswith(b"0\r\n\r\n"):
                chunk = sock.recv(65536)
                assert chunk, "the server closed the connection"
                raw += chunk
            assert raw.startswith(b"HTTP/1.1 200 ")
            # Three keepalive intervals with nothing in flight: nothing may arrive.
            sock.settimeout(0.7)
            with pytest.raises(TimeoutError):
                extra = sock.recv(65536)
                pytest.fail(f"bytes after the response ended: {extra[:60]!r}")
            sock.settimeout(10)
    _clean_log(server)


def test_a_stream_after_a_plain_request_on_one_connection_leaves_nothing_behind(
    mock_factory: Callable[..., MockIE],
    neutrino_factory: Callable[..., NeutrinoProc],
) -> None:
    """A new user's reproduction: on one ``http.client`` connection, GET /v1/models, then
    a streamed chat, then wait past the keepalive interval. Nothing may be logged (a
    stray keepalive task raised ``Cannot call write() after write_eof()``) and the
    connection must still carry a clean next response."""
    mock = mock_factory()
    server = neutrino_factory(config=_config(mock))
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", "/v1/models")
        r = conn.getresponse()
        assert r.status == 200 and json.loads(r.read())["object"] == "list"
        body = json.dumps(_stream_body())
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200 and r.read().rstrip().endswith(b"data: [DONE]")
        time.sleep(0.7)  # three keepalive intervals
        conn.request("GET", "/v1/models")
        r = conn.getresponse()
        assert r.status == 200 and json.loads(r.read())["object"] == "list"
    finally:
        conn.close()
    _clean_log(server)
