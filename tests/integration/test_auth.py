"""API keys end to end: the OpenAI SDK, raw HTTP, gRPC, the admin routes and listener."""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import openai
import pytest

from neutrino.v1 import common_pb2, inference_pb2, inference_pb2_grpc
from tests.support.openapi import validate
from tests.support.procs import MockIE, NeutrinoProc, free_port, serving
from tests.support.raw import read_all

MODEL = "qwen2.5-mock"
MSG: Any = [{"role": "user", "content": "hi"}]
KEYS = {"open": "sk-open-1d5e", "narrow": "sk-narrow-77a1", "file": "sk-file-9c0b", "adm": "sk-adm"}


class Stack:
    def __init__(self, mock: MockIE, server: NeutrinoProc, grpc_address: str, admin: str) -> None:
        self.mock = mock
        self.server = server
        self.grpc_address = grpc_address
        self.admin = admin


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work: Path = tmp_path_factory.mktemp("auth")
    script = work / "stall.json"
    # (a rule matches a substring of the prompt text: only the stalled request says "stall")
    script.write_text(json.dumps({"rules": [{"match": "stall", "fault": "stall"}]}))
    mock = MockIE(work, "--script", str(script)).start()
    digests = work / "keys"
    digests.write_text(f"{hashlib.sha256(KEYS['file'].encode()).hexdigest()} name=from-file\n")
    grpc_address = f"127.0.0.1:{free_port()}"
    admin = f"127.0.0.1:{free_port()}"
    server = NeutrinoProc(
        work,
        "--grpc-address",
        grpc_address,
        config=f"""
[[engines]]
socket = "{mock.socket}"
[auth]
api_keys = ["{KEYS["open"]}"]
admin_keys = ["{KEYS["adm"]}"]
api_keys_file = "{digests}"
[[auth.keys]]
key = "{KEYS["narrow"]}"
name = "narrow"
models = ["{MODEL}"]
max_concurrency = 1
[admin]
address = "{admin}"
""",
    )
    with serving(mock, server):
        yield Stack(mock, server, grpc_address, admin)


def client(stack: Stack, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.server.base_url + "/v1", api_key=key, max_retries=0)


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


def test_valid_keys_are_served(stack: Stack) -> None:
    for key in (KEYS["open"], KEYS["narrow"], KEYS["file"], KEYS["adm"]):
        r = client(stack, key).chat.completions.create(model=MODEL, messages=MSG, max_tokens=3)
        assert r.choices[0].message.content


def test_a_missing_or_wrong_key_is_a_401_and_reaches_nothing(stack: Stack) -> None:
    before = len(stack.mock.events("query"))
    with pytest.raises(openai.AuthenticationError) as info:
        client(stack, "sk-wrong").chat.completions.create(model=MODEL, messages=MSG)
    assert info.value.status_code == 401 and info.value.code == "invalid_api_key"
    assert info.value.response.headers["WWW-Authenticate"].startswith("Bearer")
    validate(info.value.response.json(), "ErrorResponse")
    for path, body in (
        ("/v1/chat/completions", {"model": MODEL, "messages": MSG}),
        ("/v1/embeddings", {"model": "embed-mock", "input": "x"}),
    ):
        req = urllib.request.Request(
            stack.server.base_url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 401
    assert get(stack.server.base_url + "/v1/models")[0] == 401
    assert len(stack.mock.events("query")) == before


def test_x_api_key_header_works_too(stack: Stack) -> None:
    code, _, body = get(stack.server.base_url + "/v1/models", {"x-api-key": KEYS["file"]})
    assert code == 200 and {m["id"] for m in body["data"]} >= {MODEL, "embed-mock"}


def test_a_key_sees_and_uses_only_its_models(stack: Stack) -> None:
    narrow = client(stack, KEYS["narrow"])
    assert [m.id for m in narrow.models.list()] == [MODEL]
    with pytest.raises(openai.PermissionDeniedError) as info:
        narrow.chat.completions.create(model="llama3.2-mock", messages=MSG)
    assert info.value.code == "model_not_allowed"
    with pytest.raises(openai.PermissionDeniedError):
        narrow.embeddings.create(model="embed-mock", input="x")
    with pytest.raises(openai.NotFoundError):
        narrow.models.retrieve("embed-mock")


async def test_a_key_past_its_concurrency_gets_429(stack: Stack) -> None:
    url = stack.server.base_url + "/v1/chat/completions"
    headers = {"Authorization": f"Bearer {KEYS['narrow']}"}
    body = {"model": MODEL, "messages": [{"role": "user", "content": "stall"}], "stream": True}
    async with aiohttp.ClientSession(headers=headers) as s:
        first = await s.post(url, json=body)  # its one request in flight, stalled
        assert first.status == 200
        r = await s.post(url, json={**body, "stream": False})
        assert r.status == 429 and r.headers["Retry-After"] == "1"
        assert (await r.json())["error"]["code"] == "key_concurrency_limit"
        first.close()
        await asyncio.sleep(0.3)  # its cancel frees the key's one slot
        r = await s.post(url, json={"model": MODEL, "messages": MSG, "max_tokens": 2})
        assert r.status == 200
    # Another key is not held back by it.
    r2 = client(stack, KEYS["open"]).chat.completions.create(model=MODEL, messages=MSG)
    assert r2.choices


def test_admin_routes_live_on_their_own_listener_behind_an_admin_key(stack: Stack) -> None:
    public = stack.server.base_url
    admin = f"http://{stack.admin}"
    assert get(public + "/neutrino/v1/app_state", {"x-api-key": KEYS["adm"]})[0] == 404
    assert get(public + "/neutrino/v1/status")[0] == 200  # probes need no key
    assert get(admin + "/neutrino/v1/status")[0] == 200
    assert get(admin + "/neutrino/v1/app_state")[0] == 401
    assert get(admin + "/neutrino/v1/history", {"x-api-key": KEYS["open"]})[0] == 403
    code, _, state = get(admin + "/neutrino/v1/app_state", {"x-api-key": KEYS["adm"]})
    assert code == 200 and state["counters"]["auth_refused"] > 0
    code, _, hist = get(
        admin + "/neutrino/v1/history?limit=5", {"Authorization": f"Bearer {KEYS['adm']}"}
    )
    assert code == 200 and hist["data"]
    assert get(admin + "/v1/models", {"x-api-key": KEYS["adm"]})[0] == 404


def test_history_names_the_key_never_the_key_itself(stack: Stack) -> None:
    client(stack, KEYS["narrow"]).chat.completions.create(model=MODEL, messages=MSG)
    headers = {"x-api-key": KEYS["adm"]}
    _, _, hist = get(f"http://{stack.admin}/neutrino/v1/history?limit=1", headers)
    assert hist["data"][0]["key"] == "narrow"
    assert KEYS["narrow"] not in json.dumps(hist)


def test_no_key_no_body_read(stack: Stack) -> None:
    """An unauthenticated upload is refused from its head: no 100 Continue, no body."""
    with socket.create_connection(("127.0.0.1", stack.server.port), timeout=10) as s:
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 8000000\r\n"
            b"Expect: 100-continue\r\n\r\n"
        )
        answer = read_all(s)  # the server answers and closes without the body
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:200]
    assert b"100 Continue" not in answer and b"WWW-Authenticate: Bearer" in answer


def test_keys_never_reach_the_log(stack: Stack) -> None:
    with pytest.raises(openai.AuthenticationError):
        client(stack, "sk-never-logged").models.list()
    text = stack.server.log_path.read_text()
    assert "API keys required" in text
    for key in (*KEYS.values(), "sk-never-logged"):
        assert key not in text


async def test_grpc_calls_need_a_key(stack: Stack) -> None:
    chat = inference_pb2.GenerateRequest(
        model=MODEL,
        chat=inference_pb2.Chat(messages=[inference_pb2.ChatMessage(role="user", content="hi")]),
        max_tokens=2,
    )
    async with grpc.aio.insecure_channel(stack.grpc_address) as channel:
        stub = inference_pb2_grpc.InferenceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Generate(chat, timeout=10)
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Generate(chat, metadata=(("authorization", "Bearer sk-bad"),))
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
        narrow = (("authorization", f"Bearer {KEYS['narrow']}"),)
        other = inference_pb2.GenerateRequest(model="llama3.2-mock", chat=chat.chat, max_tokens=2)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Generate(other, metadata=narrow, timeout=10)
        assert info.value.code() is grpc.StatusCode.PERMISSION_DENIED
        ok = await stub.Generate(chat, metadata=(("x-api-key", KEYS["open"]),), timeout=10)
        assert ok.text
        listed = await stub.ListModels(common_pb2.ListModelsRequest(), metadata=narrow)
        assert [m.id for m in listed.models] == [MODEL]


def test_an_open_server_says_so_once_at_start(neutrino_factory: Any) -> None:
    server = neutrino_factory()
    assert server.log().count("no API keys configured") == 1


def _admin_call(
    server: NeutrinoProc, method: str, path: str, headers: dict[str, str], body: bytes | None
) -> tuple[int, Any]:
    req = urllib.request.Request(server.base_url + path, data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_an_open_servers_admin_routes_refuse_web_pages(neutrino_factory: Any) -> None:
    """No keys: a page of another origin may neither read nor reload (CSRF, as Ollama and
    Jupyter guard their local APIs); a reload takes only what a page could not send to
    another site unasked (a JSON body, X-Requested-With). Curl-like clients (no Origin)
    and the server's own or allowed origins get through."""
    server = neutrino_factory(config='[admin]\nallowed_origins = ["http://ops.example:3000"]\n')
    own = f"http://127.0.0.1:{server.port}"
    evil = "http://evil.example"
    plain, js = {"Content-Type": "text/plain"}, {"Content-Type": "application/json"}
    reload, state = "/neutrino/v1/reload", "/neutrino/v1/app_state"
    cases = [
        ("POST", reload, {**plain, "Origin": evil}, b"{}", 403),
        ("POST", reload, {**js, "Origin": evil}, b"{}", 403),
        ("GET", state, {"Origin": evil}, None, 403),
        ("GET", "/neutrino/v1/history", {"Origin": "null"}, None, 403),
        ("POST", reload, plain, b"{}", 415),
        ("POST", reload, {}, b"", 415),
        ("POST", reload, {**js, "Origin": own}, b"{}", 200),
        ("POST", reload, {**js, "Origin": "http://ops.example:3000"}, b"{}", 200),
        ("POST", reload, {**plain, "X-Requested-With": "curl"}, b"", 200),
        ("POST", reload, js, b"{}", 200),
        ("GET", state, {"Origin": own}, None, 200),
        ("GET", state, {}, None, 200),
    ]
    for method, path, headers, body, want in cases:
        status, answer = _admin_call(server, method, path, headers, body)
        assert status == want, (method, path, headers, answer)
        if want == 403:
            assert evil in answer["error"]["message"] or "null" in answer["error"]["message"]
            assert "allowed_origins" in answer["error"]["message"]
    # Status and health stay open to every prober, browsers included.
    assert get(server.base_url + "/health", {"Origin": evil})[0] == 200


def test_with_an_admin_key_the_key_rules_whatever_the_origin(neutrino_factory: Any) -> None:
    server = neutrino_factory(config='[auth]\nadmin_keys = ["sk-admin-origin"]\n')
    headers = {"Origin": "http://evil.example", "Authorization": "Bearer sk-admin-origin"}
    assert _admin_call(server, "GET", "/neutrino/v1/app_state", headers, None)[0] == 200
    del headers["Authorization"]
    assert _admin_call(server, "GET", "/neutrino/v1/app_state", headers, None)[0] == 401
