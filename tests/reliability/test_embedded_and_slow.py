"""The no-config default (embedded, supervised mock_ie) and HTTP/1.0 streams."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import openai

from tests.support.procs import MockIE, NeutrinoProc, wait_for


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); look at its state.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_embedded_mock_is_started_supervised_and_stopped(
    neutrino_factory: Callable[..., NeutrinoProc],
) -> None:
    server = neutrino_factory()  # no engines configured: the embedded default
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    r = client.chat.completions.create(
        model="qwen2.5-mock", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
    )
    assert r.choices[0].message.content
    state = server.get_json("/neutrino/v1/app_state")
    pid = state["embedded_mock"]["pid"]
    assert _alive(pid)
    os.kill(pid, signal.SIGKILL)  # the engine dies: Neutrino restarts it
    assert wait_for(
        lambda: server.get_json("/neutrino/v1/app_state")["embedded_mock"]["restarts"] >= 1
    )
    assert wait_for(lambda: server.status_code() == 200)
    r = client.chat.completions.create(
        model="qwen2.5-mock", max_tokens=4, messages=[{"role": "user", "content": "again"}]
    )
    assert r.choices[0].message.content
    new_pid = server.get_json("/neutrino/v1/app_state")["embedded_mock"]["pid"]
    assert new_pid != pid
    assert server.stop() == 0
    assert wait_for(lambda: not _alive(new_pid), 5)  # nothing left running


def test_http10_stream_is_framed_by_aiohttp(
    mock_factory: Callable[..., MockIE],
    neutrino_factory: Callable[..., NeutrinoProc],
) -> None:
    mock = mock_factory()
    server = neutrino_factory("--engine", mock.socket)
    body = json.dumps(
        {
            "model": "qwen2.5-mock",
            "stream": True,
            "max_tokens": 12,
            "messages": [{"role": "user", "content": "hi"}],
        }
    ).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n")[0] and b"chunked" not in head.lower()
    assert payload.startswith(b": ok\n\n") and payload.rstrip().endswith(b"data: [DONE]")


def test_sockets_and_folders_are_private_whatever_the_umask(
    neutrino_factory: Callable[..., NeutrinoProc], mock_factory: Callable[..., MockIE]
) -> None:
    old = os.umask(0o022)  # the usual umask: 0755 folders, 0755 sockets, before
    try:
        server = neutrino_factory()  # the embedded mock, in its own folder
        mock = mock_factory()
        group = mock_factory("--socket-mode", "660", name="group")
    finally:
        os.umask(old)
    state = server.get_json("/neutrino/v1/app_state")
    sock = Path(state["engines"][0]["socket"])
    assert stat.S_IMODE(sock.stat().st_mode) & 0o077 == 0
    assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(os.stat(mock.socket).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(group.socket).st_mode) == 0o660
