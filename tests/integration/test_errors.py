"""Bad input gets a clear OpenAI error with the right status, and never reaches the engine."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.openapi import validate
from tests.support.procs import MockIE, NeutrinoProc, serving

TINY = "tiny-mock"  # 64-token context
MSG = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MockIE, NeutrinoProc]]:
    work: Path = tmp_path_factory.mktemp("tiny")
    mock = MockIE(work, "--model", f"{TINY}:qwen2:64", "--model", "qwen2.5-mock:qwen2:4096").start()
    server = NeutrinoProc(
        work,
        config=f"""
[[engines]]
socket = "{mock.socket}"
[limits]
max_body_bytes = 65536
""",
    )
    with serving(mock, server):
        yield mock, server


def post(
    server: NeutrinoProc,
    path: str,
    data: bytes,
    method: str = "POST",
    ctype: str = "application/json",
) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        server.base_url + path, data=data, method=method, headers={"Content-Type": ctype}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def chat(**kw: Any) -> bytes:
    body: dict[str, Any] = {"model": TINY, "messages": MSG}
    body.update(kw)
    return json.dumps(body).encode()


CASES: list[tuple[str, str, bytes, int, str | None]] = [
    ("invalid json", "/v1/chat/completions", b"{not json", 400, None),
    ("empty body", "/v1/chat/completions", b"", 400, None),
    ("body not an object", "/v1/chat/completions", b"[1, 2]", 400, None),
    ("missing model", "/v1/chat/completions", json.dumps({"messages": MSG}).encode(), 400, "model"),
    ("model wrong type", "/v1/chat/completions", chat(model=5), 400, "model"),
    (
        "messages missing",
        "/v1/chat/completions",
        json.dumps({"model": TINY}).encode(),
        400,
        "messages",
    ),
    ("messages empty", "/v1/chat/completions", chat(messages=[]), 400, "messages"),
    (
        "bad role",
        "/v1/chat/completions",
        chat(messages=[{"role": "robot", "content": "x"}]),
        400,
        "messages[0].role",
    ),
    (
        "content wrong type",
        "/v1/chat/completions",
        chat(messages=[{"role": "user", "content": 5}]),
        400,
        "messages[0].content",
    ),
    ("negative max_tokens", "/v1/chat/completions", chat(max_tokens=-1), 400, "max_tokens"),
    (
        "zero max_completion_tokens",
        "/v1/chat/completions",
        chat(max_completion_tokens=0),
        400,
        "max_completion_tokens",
    ),
    ("max_tokens string", "/v1/chat/completions", chat(max_tokens="10"), 400, "max_tokens"),
    ("temperature too high", "/v1/chat/completions", chat(temperature=3), 400, "temperature"),
    ("temperature wrong type", "/v1/chat/completions", chat(temperature="hot"), 400, "temperature"),
    ("top_p zero", "/v1/chat/completions", chat(top_p=0), 400, "top_p"),
    ("stream not bool", "/v1/chat/completions", chat(stream="yes"), 400, "stream"),
    (
        "stream_options without stream",
        "/v1/chat/completions",
        chat(stream_options={"include_usage": True}),
        400,
        "stream_options",
    ),
    ("stop wrong type", "/v1/chat/completions", chat(stop=[1, 2]), 400, "stop"),
    ("seed wrong type", "/v1/chat/completions", chat(seed=1.5), 400, "seed"),
    ("n too large", "/v1/chat/completions", chat(n=9), 400, "n"),
    (
        "prompt longer than context",
        "/v1/chat/completions",
        chat(messages=[{"role": "user", "content": "word " * 200}]),
        400,
        "messages",
    ),
    ("max_tokens beyond context", "/v1/chat/completions", chat(max_tokens=1000), 400, "max_tokens"),
    ("unknown model", "/v1/chat/completions", chat(model="nope"), 404, "model"),
    (
        "completion prompt missing",
        "/v1/completions",
        json.dumps({"model": TINY}).encode(),
        400,
        "prompt",
    ),
    (
        "completion token id beyond vocab",
        "/v1/completions",
        json.dumps({"model": TINY, "prompt": [1, 2, 999999999]}).encode(),
        400,
        "prompt",
    ),
    (
        "oversized body",
        "/v1/chat/completions",
        chat(messages=[{"role": "user", "content": "x" * 70000}]),
        413,
        None,
    ),
]


@pytest.mark.parametrize(
    ("name", "path", "data", "status", "param"), CASES, ids=[c[0] for c in CASES]
)
def test_bad_input(
    tiny: tuple[MockIE, NeutrinoProc],
    name: str,
    path: str,
    data: bytes,
    status: int,
    param: str | None,
) -> None:
    mock, server = tiny
    before = len(mock.events("query"))
    got, body = post(server, path, data)
    assert got == status, body
    validate(body, "ErrorResponse")
    err = body["error"]
    if param is not None:
        assert err["param"] == param
    assert err["message"] and "Traceback" not in err["message"]
    assert "/" not in err["message"] or "application" in err["message"]  # no paths leak
    assert len(mock.events("query")) == before  # nothing reached the engine


def test_unknown_route_and_method(tiny: tuple[MockIE, NeutrinoProc]) -> None:
    _, server = tiny
    code, body = post(server, "/v1/nothing-here", b"{}")
    assert code == 404
    validate(body, "ErrorResponse")
    code, body = post(server, "/v1/chat/completions", b"", method="DELETE")
    assert code == 405
    validate(body, "ErrorResponse")


def test_sdk_raises_typed_errors(tiny: tuple[MockIE, NeutrinoProc]) -> None:
    client = openai.OpenAI(base_url=tiny[1].base_url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=MSG)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=TINY, messages=MSG, max_tokens=10_000)  # type: ignore[arg-type]
    assert info.value.code == "context_length_exceeded"


def test_history_limit_validation(tiny: tuple[MockIE, NeutrinoProc]) -> None:
    code, body = post(tiny[1], "/neutrino/v1/history?limit=abc", b"", method="GET")
    assert code == 400 and body["error"]["param"] == "limit"


def test_chat_on_a_model_that_does_not_generate(tmp_path: Path) -> None:
    mock = MockIE(tmp_path, "--model", "emb:qwen2:512:embed", "--model", "chat:qwen2:512").start()
    server = NeutrinoProc(tmp_path, "--engine", mock.socket)
    try:
        server.start()
        code, body = post(
            server, "/v1/chat/completions", json.dumps({"model": "emb", "messages": MSG}).encode()
        )
        assert code == 400 and body["error"]["param"] == "model"
        assert "does not generate" in body["error"]["message"]
        assert not mock.events("query")
    finally:
        server.stop()
        mock.stop()


JSON_ROUTES = [
    ("/v1/chat/completions", chat()),
    ("/v1/completions", json.dumps({"model": TINY, "prompt": "hi"}).encode()),
    ("/v1/embeddings", json.dumps({"model": TINY, "input": "hi"}).encode()),
    ("/v1/rerank", json.dumps({"model": TINY, "query": "q", "documents": ["d"]}).encode()),
    ("/v1/audio/speech", json.dumps({"model": TINY, "input": "hi", "voice": "a"}).encode()),
    ("/v1/detect", json.dumps({"model": TINY, "image": "data:,"}).encode()),
]


def _raw_post(server: NeutrinoProc, path: str, data: bytes, headers: dict[str, str]) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("POST", path, body=data, headers=headers)  # no Content-Type unless given
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


@pytest.mark.parametrize(("path", "data"), JSON_ROUTES, ids=[p for p, _ in JSON_ROUTES])
@pytest.mark.parametrize(
    "ctype", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
def test_json_routes_take_only_a_json_content_type(
    tiny: tuple[MockIE, NeutrinoProc], path: str, data: bytes, ctype: str | None
) -> None:
    """A page in a browser may send text/plain or a form to localhost without a CORS
    preflight; with no keys configured, such a body must not drive the server."""
    mock, server = tiny
    before = len(mock.events("query"))
    headers = {} if ctype is None else {"Content-Type": ctype}
    code, body = _raw_post(server, path, data, headers)
    assert code == 415, body
    validate(body, "ErrorResponse")
    assert body["error"]["code"] == "unsupported_media_type"
    assert "application/json" in body["error"]["message"]
    assert len(mock.events("query")) == before


def test_json_with_parameters_is_json(tiny: tuple[MockIE, NeutrinoProc]) -> None:
    _, server = tiny
    for ctype in ("application/json; charset=utf-8", "Application/JSON", "application/x+json"):
        code, body = _raw_post(
            server, "/v1/chat/completions", chat(max_tokens=2), {"Content-Type": ctype}
        )
        assert code == 200, body


def test_not_now_refusals_say_when_to_retry(tmp_path: Path) -> None:
    """503 (no engine) and 429 tell the client when to come back: Retry-After on HTTP,
    grpc-retry-pushback-ms on gRPC."""
    import grpc

    from neutrino.v1 import inference_pb2, inference_pb2_grpc
    from tests.support.procs import free_port

    address = f"127.0.0.1:{free_port()}"
    server = NeutrinoProc(
        tmp_path, "--engine", str(tmp_path / "absent.sock"), "--grpc-address", address
    )
    try:
        server.start(wait_engine=False)
        for path, data in JSON_ROUTES[:3]:
            req = urllib.request.Request(
                server.base_url + path, data=data, headers={"Content-Type": "application/json"}
            )
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(req, timeout=10)
            assert info.value.code == 503 and info.value.headers["Retry-After"] == "2"
            assert json.loads(info.value.read())["error"]["code"] == "no_engine"
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(server.base_url + "/neutrino/v1/status", timeout=10)
        assert info.value.code == 503 and info.value.headers["Retry-After"] == "2"
        with grpc.insecure_channel(address) as channel:
            stub = inference_pb2_grpc.InferenceStub(channel)
            chat_req = inference_pb2.GenerateRequest(
                model=TINY,
                chat=inference_pb2.Chat(
                    messages=[inference_pb2.ChatMessage(role="user", content="hi")]
                ),
            )
            with pytest.raises(grpc.RpcError) as rpc:
                stub.Generate(chat_req, timeout=10)
            call: Any = rpc.value  # a grpc.Call as well as an RpcError
            assert call.code() is grpc.StatusCode.UNAVAILABLE
            trailing = dict(call.trailing_metadata() or ())
            assert trailing["grpc-retry-pushback-ms"] == "2000"
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (1e30, "max_tokens must be an integer between 1 and "),
        (-1.0, "max_tokens must be an integer between 1 and "),
        (2.5, "max_tokens must be an integer"),
    ],
)
def test_a_float_max_tokens_hears_the_limit(
    tiny: tuple[MockIE, NeutrinoProc], value: float, says: str
) -> None:
    """A whole number sent as a float is taken as an integer (as vLLM does); one beyond
    the range is told the range, not that it is no integer."""
    _, server = tiny
    got, body = post(server, "/v1/chat/completions", chat(max_tokens=value))
    assert got == 400 and body["error"]["param"] == "max_tokens"
    assert body["error"]["message"].startswith(says), body
    got, body = post(server, "/v1/chat/completions", chat(max_tokens=2.0))
    assert got == 200 and body["usage"]["completion_tokens"] <= 2
