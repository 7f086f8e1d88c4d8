"""Request ids on the wire and in the log: a client's X-Request-Id names its request (as
vLLM does: ``chatcmpl-<id>``) and comes back as a header; without one the answer's
header carries the id Neutrino gave it; the log lines of the request carry it too."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.procs import MockIE, NeutrinoProc

MODEL = "qwen2.5-mock"


def _post(
    server: NeutrinoProc, path: str, body: bytes, rid: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    headers = {"Content-Type": "application/json"}
    if rid is not None:
        headers["X-Request-Id"] = rid
    req = urllib.request.Request(server.base_url + path, data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def _chat(stream: bool = False) -> bytes:
    return json.dumps(
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": "zebra quux"}],
            "max_tokens": 3,
            "stream": stream,
        }
    ).encode()


@pytest.fixture
def server(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> NeutrinoProc:
    mock = mock_factory()
    return neutrino_factory("--engine", mock.socket, "--log-level", "debug", "--log-format", "json")


def _log_lines(server: NeutrinoProc) -> list[dict[str, Any]]:
    return [json.loads(line) for line in server.log_path.read_text().splitlines() if line]


def test_a_client_request_id_names_the_request(server: NeutrinoProc) -> None:
    status, headers, body = _post(server, "/v1/chat/completions", _chat(), "job-42.a:b_c")
    assert status == 200
    assert headers["X-Request-Id"] == "job-42.a:b_c"
    assert json.loads(body)["id"] == "chatcmpl-job-42.a:b_c"
    assert server.history(1)[0]["id"] == "chatcmpl-job-42.a:b_c"
    status, headers, body = _post(server, "/v1/chat/completions", _chat(True), "job-43")
    assert status == 200 and headers["X-Request-Id"] == "job-43"
    assert b'"id":"chatcmpl-job-43"' in body
    lines = [x for x in _log_lines(server) if x.get("request_id") == "chatcmpl-job-42.a:b_c"]
    assert lines, "no log line named the request"
    assert all("quux" not in json.dumps(x) for x in _log_lines(server))  # no prompt text


def test_without_one_the_header_carries_our_id(server: NeutrinoProc) -> None:
    status, headers, body = _post(server, "/v1/chat/completions", _chat())
    assert status == 200
    assert headers["X-Request-Id"] == json.loads(body)["id"]
    bad = "x" * 200  # too long: ignored, an id of ours is used
    status, headers, body = _post(server, "/v1/chat/completions", _chat(), bad)
    assert headers["X-Request-Id"] == json.loads(body)["id"] != f"chatcmpl-{bad}"
    status, headers, body = _post(server, "/v1/chat/completions", _chat(), "has space")
    assert (
        headers["X-Request-Id"].startswith("chatcmpl-") and "space" not in headers["X-Request-Id"]
    )


def test_refusals_and_other_routes_echo_it(server: NeutrinoProc) -> None:
    status, headers, _ = _post(server, "/v1/chat/completions", b"{nope", "r-1")
    assert status == 400 and headers["X-Request-Id"] == "r-1"
    body = json.dumps({"model": "embed-mock", "input": "hello"}).encode()
    status, headers, _ = _post(server, "/v1/embeddings", body, "r-2")
    assert headers["X-Request-Id"] == "r-2"
