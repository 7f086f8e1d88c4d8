"""Malformed input on every route and over gRPC: a clear 4xx (or gRPC status), never a
500, a trace or a path, never an engine query, and the server serves on afterwards."""

from __future__ import annotations

import contextlib
import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.support.openapi import validate
from tests.support.procs import MockIE, NeutrinoProc, free_port, serving

JSON_ROUTES = [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/rerank",
    "/rerank",
    "/v1/audio/speech",
    "/v1/detect",
]
FORM_ROUTES = ["/v1/audio/transcriptions", "/v1/audio/translations"]

BAD_JSON = [
    ("truncated", b'{"model": "qwen2.5-mock", "messages": ['),
    ("not utf-8", b'{"model": "\xff\xfe", "input": "x"}'),
    ("lone surrogate", b'{"model": "qwen2.5-mock", "input": "\\ud800"}'),
    ("nan", b'{"model": "qwen2.5-mock", "temperature": NaN}'),
    ("deep nesting", b"[" * 100_000 + b"]" * 100_000),
    ("array", b"[1, 2, 3]"),
    ("string", b'"hello"'),
    ("null", b"null"),
    ("empty", b""),
    ("model number", b'{"model": 7, "messages": [], "input": "x", "prompt": "x"}'),
    ("huge number", b'{"model": "qwen2.5-mock", "max_tokens": 1' + b"0" * 400 + b"}"),
    ("nul in model", b'{"model": "qwen\\u0000", "messages": [], "input": "x", "prompt": "x"}'),
    ("wrong shapes", b'{"model": "qwen2.5-mock", "messages": {"a": 1}, "input": {}, "n": "x"}'),
]

BAD_HTTP = [
    ("bad content-length", b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: abc\r\n\r\n"),
    (
        "length and chunked",
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ),
    (
        "bad chunk",
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    ),
    ("long line", b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\n\r\n"),
    ("many headers", b"GET /health HTTP/1.1\r\n" + b"X-A: b\r\n" * 300 + b"\r\n"),
    ("long header", b"GET /health HTTP/1.1\r\nX-A: " + b"b" * 20_000 + b"\r\n\r\n"),
    ("not http", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(64)),
    ("bad method", b"BREW /v1/models HTTP/1.1\r\n\r\n"),
    ("bad version", b"GET /v1/models HTTP/9.9\r\n\r\n"),
]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MockIE, NeutrinoProc, str]]:
    work: Path = tmp_path_factory.mktemp("malformed")
    mock = MockIE(work).start()
    address = f"127.0.0.1:{free_port()}"
    server = NeutrinoProc(work, "--engine", mock.socket, "--grpc-address", address)
    with serving(mock, server):
        yield mock, server, address


def exchange(server: NeutrinoProc, raw: bytes) -> bytes:
    """Send raw bytes; everything the server answers until it closes (or 5 s pass).
    The socket is not half-closed: Neutrino takes that for a client that left."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(raw)  # it may answer and close before reading all of it
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return out


def post(server: NeutrinoProc, path: str, body: bytes, ctype: str) -> tuple[int, bytes]:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    raw = exchange(server, head + body)
    status_line, _, rest = raw.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def assert_clean_error(status: int, body: bytes) -> dict[str, Any]:
    assert 400 <= status < 500, (status, body[:300])
    err: dict[str, Any] = json.loads(body)
    validate(err, "ErrorResponse")
    message = err["error"]["message"]
    assert "Traceback" not in message and 'File "' not in message and ".py" not in message
    return err


def still_serving(server: NeutrinoProc, mock: MockIE, queries: int) -> None:
    assert server.status_code() == 200
    assert len(mock.events("query")) == queries
    assert "Traceback" not in server.log_path.read_text()


@pytest.mark.parametrize("path", JSON_ROUTES)
@pytest.mark.parametrize(("name", "body"), BAD_JSON, ids=[n for n, _ in BAD_JSON])
def test_malformed_json_on_every_json_route(
    stack: tuple[MockIE, NeutrinoProc, str], path: str, name: str, body: bytes
) -> None:
    mock, server, _ = stack
    before = len(mock.events("query"))
    status, answer = post(server, path, body, "application/json")
    assert_clean_error(status, answer)
    still_serving(server, mock, before)


def _form(parts: list[tuple[str, bytes]], boundary: str) -> bytes:
    out = b""
    for name, value in parts:
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
        out += value + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


BAD_FORMS = [
    ("garbage", b"this is not a form", "multipart/form-data; boundary=zzz"),
    ("no boundary", _form([("model", b"whisper-mock")], "b1"), "multipart/form-data"),
    (
        "wrong boundary",
        _form([("model", b"whisper-mock")], "b1"),
        "multipart/form-data; boundary=b2",
    ),
    (
        "truncated",
        _form([("model", b"whisper-mock")], "b1")[:-20],
        "multipart/form-data; boundary=b1",
    ),
    ("no file", _form([("model", b"whisper-mock")], "b1"), "multipart/form-data; boundary=b1"),
    (
        "not a wav",
        _form([("model", b"whisper-mock"), ("file", b"RIFF\x00")], "b1"),
        "multipart/form-data; boundary=b1",
    ),
    (
        "not utf-8 field",
        _form([("model", b"\xff\xfe"), ("file", b"x")], "b1"),
        "multipart/form-data; boundary=b1",
    ),
    ("json", b'{"model": "whisper-mock"}', "application/json"),
]


@pytest.mark.parametrize("path", FORM_ROUTES)
@pytest.mark.parametrize(("name", "body", "ctype"), BAD_FORMS, ids=[n for n, _, _ in BAD_FORMS])
def test_malformed_forms_on_the_audio_routes(
    stack: tuple[MockIE, NeutrinoProc, str], path: str, name: str, body: bytes, ctype: str
) -> None:
    mock, server, _ = stack
    before = len(mock.events("query"))
    status, answer = post(server, path, body, ctype)
    assert_clean_error(status, answer)
    still_serving(server, mock, before)


@pytest.mark.parametrize(("name", "raw"), BAD_HTTP, ids=[n for n, _ in BAD_HTTP])
def test_malformed_http(stack: tuple[MockIE, NeutrinoProc, str], name: str, raw: bytes) -> None:
    mock, server, _ = stack
    before = len(mock.events("query"))
    answer = exchange(server, raw)
    if answer:  # an answer, if any, is a 4xx; a connection may also just be closed
        status = int(answer.split(b" ", 2)[1])
        assert 400 <= status < 500, answer[:200]
        assert b"Traceback" not in answer
    still_serving(server, mock, before)


@pytest.mark.parametrize(
    "path",
    [
        "/v1/models/%00",
        "/v1/models/" + "x" * 5000,
        "/neutrino/v1/history?limit=-1",
        "/neutrino/v1/history?limit=1e9",
        "/neutrino/v1/history?limit=%ff",
        "/v1/%2e%2e/%2e%2e/etc/passwd",
        "/v1/chat/completions?" + "a=b&" * 2000,
    ],
)
def test_odd_urls(stack: tuple[MockIE, NeutrinoProc, str], path: str) -> None:
    mock, server, _ = stack
    answer = exchange(server, f"GET {path} HTTP/1.1\r\nConnection: close\r\n\r\n".encode())
    status = int(answer.split(b" ", 2)[1])
    assert 400 <= status < 500, answer[:200]
    assert b"Traceback" not in answer and len(answer) < 12_000  # the path is echoed, bounded
    still_serving(server, mock, len(mock.events("query")))


GRPC_METHODS = [
    "/neutrino.v1.Inference/Generate",
    "/neutrino.v1.Inference/ListModels",
    "/neutrino.v1.Embeddings/Embed",
    "/neutrino.v1.Embeddings/Rerank",
    "/neutrino.v1.Audio/Transcribe",
    "/neutrino.v1.Audio/Translate",
    "/neutrino.v1.Vision/Detect",
]
GRPC_STREAMS = ["/neutrino.v1.Inference/GenerateStream", "/neutrino.v1.Audio/Speak"]
GARBAGE = [b"\xff" * 64, bytes(range(256)), b"\x0a\xff\xff\xff\xff\x0f", uuid.uuid4().bytes]


@pytest.mark.parametrize("method", GRPC_METHODS + GRPC_STREAMS)
def test_garbage_protobuf_on_every_grpc_method(
    stack: tuple[MockIE, NeutrinoProc, str], method: str
) -> None:
    mock, server, address = stack
    before = len(mock.events("query"))
    with grpc.insecure_channel(address) as channel:
        for payload in GARBAGE:
            if method in GRPC_STREAMS:
                stream: Any = channel.unary_stream(method)
                with pytest.raises(grpc.RpcError) as info:
                    list(stream(payload, timeout=10))
            else:
                unary: Any = channel.unary_unary(method)
                with pytest.raises(grpc.RpcError) as info:
                    unary(payload, timeout=10)
            err: Any = info.value
            assert err.code() is grpc.StatusCode.INVALID_ARGUMENT, err
            assert "Traceback" not in (err.details() or "")
    still_serving(server, mock, before)
