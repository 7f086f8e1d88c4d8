"""Drain and reload of a real server: SIGTERM lets live streams finish within the grace
while new requests get 503; a reload (POST /neutrino/v1/reload or SIGHUP) swaps engines
under load without a failed request, and a bad configuration is refused."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.support.procs import MockIE, NeutrinoProc, wait_for
from tests.support.raw import read_all

MODEL = "qwen2.5-mock"
STREAMS = 20


def _chat(stream: bool, max_tokens: int) -> bytes:
    body = json.dumps(
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": "hi"}],
            "stream": stream,
            "max_tokens": max_tokens,
        }
    ).encode()
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


def _get(url: str) -> tuple[int, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers)


def test_sigterm_lets_live_streams_finish_and_refuses_new_requests(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    mock = mock_factory("--itl-ms", "25", "--reply-tokens", "2000")
    server = neutrino_factory(
        config=f'[[engines]]\nsocket = "{mock.socket}"\n[shutdown]\ngrace_s = 10.0\n'
    )
    streams = [socket.create_connection(("127.0.0.1", server.port), timeout=15) for _ in range(20)]
    for s in streams:
        s.sendall(_chat(stream=True, max_tokens=60))  # ~1.5 s each
    assert mock.wait_event("query", STREAMS, 10)
    time.sleep(0.2)
    assert server.proc is not None
    t0 = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    assert wait_for(lambda: _get(server.base_url + "/neutrino/v1/status")[0] == 503, 5)
    status, headers = _get(server.base_url + "/neutrino/v1/status")
    assert status == 503 and headers.get("Retry-After") == "5"
    # Not ready, yet alive: a liveness probe does not restart a server that drains.
    assert _get(server.base_url + "/neutrino/v1/live")[0] == 200
    late = socket.create_connection(("127.0.0.1", server.port), timeout=15)
    late.sendall(_chat(stream=False, max_tokens=5))
    late_answer = read_all(late)
    answers = [read_all(s) for s in streams]
    assert server.proc.wait(15) == 0
    took = time.monotonic() - t0
    for s in [*streams, late]:
        s.close()

    assert late_answer.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 5" in late_answer
    for raw in answers:
        assert raw.startswith(b"HTTP/1.1 200 ")
        assert b'"finish_reason":"length"' in raw and raw.rstrip(b"\r\n0").endswith(b"[DONE]")
        assert b"shutting_down" not in raw  # each finished on its own, within the grace
    assert took < 10.0
    assert mock.events("cancel") == []  # nothing was cut
    assert "ended" not in server.log().split("shutting down")[-1].split("\n")[0]


def _load(
    server: NeutrinoProc, stop: threading.Event, failures: list[str], done: list[int]
) -> None:
    body = json.dumps(
        {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    ).encode()
    while not stop.is_set():
        status, answer = server.post_json("/v1/chat/completions", body)
        if status != 200:
            failures.append(f"{status}: {answer}")
        done.append(status)


def _reload(server: NeutrinoProc) -> tuple[int, dict[str, object]]:
    return server.post_json("/neutrino/v1/reload", b"")


def _engines(socket_path: str) -> str:
    return f'[[engines]]\nsocket = "{socket_path}"\nname = "e"\n'


def test_reload_swaps_engines_under_load_without_a_failure(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    first = mock_factory("--itl-ms", "5", name="first")
    second = mock_factory("--itl-ms", "5", name="second")
    server = neutrino_factory(config=_engines(first.socket))
    config = Path(server.workdir) / f"neutrino-{server.port}.toml"
    stop = threading.Event()
    failures: list[str] = []
    done: list[int] = []
    workers = [
        threading.Thread(target=_load, args=(server, stop, failures, done)) for _ in range(4)
    ]
    for w in workers:
        w.start()
    try:
        assert wait_for(lambda: len(done) > 20)
        config.write_text(_engines(second.socket))
        status, answer = _reload(server)
        assert status == 200, answer
        assert answer["reloaded"] is True and answer["restart_needed"] == []
        queries_then = len(first.events("query"))
        assert wait_for(lambda: len(second.events("query")) > 20)
        assert len(first.events("query")) <= queries_then + 4  # at most those in flight

        config.write_text('[model]\nfamilies = { x = "no-such-family" }\n' + _engines(first.socket))
        status, answer = _reload(server)
        assert status == 400
        error = answer["error"]
        assert isinstance(error, dict) and error["code"] == "invalid_config"
        assert "no-such-family" in error["message"] and "running one stays" in error["message"]

        config.write_text(_engines(first.socket))  # and back, by SIGHUP
        before = len(first.events("query"))
        assert server.proc is not None
        server.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: len(first.events("query")) > before + 20)
    finally:
        stop.set()
        for w in workers:
            w.join(30)
    assert failures == []
    assert len(done) > 60
    assert "configuration reloaded" in server.log()


def test_health_is_ok_again_after_a_reload(
    neutrino_factory: Callable[..., NeutrinoProc],
) -> None:
    """A reload loads every model's text assets again, and health waits for them; it
    must not wait for requests to load them (it said "loading" until then)."""
    server = neutrino_factory()  # the embedded mock: seven models, most never asked
    assert wait_for(lambda: _get(server.base_url + "/health")[0] == 200)
    status, answer = _reload(server)
    assert status == 200, answer
    assert wait_for(lambda: _get(server.base_url + "/health")[0] == 200)
