"""Anthropic's Messages API: the official anthropic SDK (and raw HTTP) against real Neutrino
and mock_ie processes, over the lean HTTP/1.1 server and over aiohttp (fast path off)."""

from __future__ import annotations

import base64
import http.client
import io
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from PIL import Image as PILImage

from tests.support.procs import MockIE, NeutrinoProc, serving

KEY = "sk-anthropic-test-5c1e"
ADMIN = "sk-anthropic-admin-77d2"  # reads the history
QWEN = "qwen2.5-mock"
QWEN3 = "qwen3-mock"  # Qwen3: <think> reasoning (enable_thinking) and Hermes <tool_call>s
VLM = "qwen2.5-vl-mock"
CALL = (
    'Checking.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call>'
)
RULES: list[dict[str, Any]] = [
    # thinking disabled: Qwen3's template ends the prompt with an empty think block
    {"match": "thinkswitch\nassistant\n<think>\n\n</think>", "reply": "Direct answer."},
    {"match": "thinkswitch", "reply": "<think>Plan it.</think>The answer."},
    {"match": "weathercall", "reply": CALL},
    {"match": "halting", "reply": "alpha beta HALT gamma delta"},
    {"match": "stall-here", "fault": "stall", "fault_after": 3},
    {"match": "break-here", "fault": "error", "fault_after": 2},
]
WEATHER: Any = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
CONVERT: Any = {
    "name": "convert",
    "description": "Convert an amount.",
    "input_schema": {
        "type": "object",
        "properties": {"amount": {"type": "number"}},
        "required": ["amount"],
    },
}


class Stack:
    def __init__(self, mock: MockIE, fast: NeutrinoProc, slow: NeutrinoProc) -> None:
        self.mock = mock
        self.fast = fast  # the lean HTTP/1.1 server
        self.slow = slow  # aiohttp only ([http] fast_path = false)


def _config(mock: MockIE, fast_path: bool) -> str:
    return f"""
[[engines]]
socket = "{mock.socket}"
[auth]
api_keys = ["{KEY}"]
admin_keys = ["{ADMIN}"]
[limits]
max_body_bytes = 1000000
[http]
fast_path = {"true" if fast_path else "false"}
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work: Path = tmp_path_factory.mktemp("anthropic")
    script = work / "script.json"
    script.write_text(json.dumps({"rules": RULES}))
    models = [f"{QWEN}:qwen2:32768", f"{QWEN3}:qwen3:32768", f"{VLM}:qwen2:32768:generate+vision"]
    args = ["--script", str(script), "--itl-ms", "1"]
    for spec in models:
        args += ["--model", spec]
    mock = MockIE(work, *args).start()
    slow = NeutrinoProc(work, config=_config(mock, False))
    with serving(mock, NeutrinoProc(work, config=_config(mock, True))) as fast:
        try:
            yield Stack(mock, fast, slow.start())
        finally:
            slow.stop()


@pytest.fixture(scope="module", params=["fast", "aiohttp"])
def server(request: pytest.FixtureRequest, stack: Stack) -> NeutrinoProc:
    return stack.fast if request.param == "fast" else stack.slow


@pytest.fixture(scope="module")
def client(server: NeutrinoProc) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key=KEY, max_retries=0)


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def post(
    server: NeutrinoProc, path: str, body: dict[str, Any], key: str = KEY
) -> tuple[int, bytes]:
    req = urllib.request.Request(
        server.base_url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "x-api-key": key},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def last_state(server: NeutrinoProc) -> str:
    """The state of the server's latest request, from its history (an admin route)."""
    req = urllib.request.Request(
        server.base_url + "/neutrino/v1/history?limit=1", headers={"x-api-key": ADMIN}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        state: str = json.loads(r.read())["data"][0]["state"]
        return state


def events(raw: bytes) -> list[tuple[str, Any]]:
    """The (event, data) pairs of a raw Anthropic stream (comments skipped)."""
    out = []
    for block in raw.decode().split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        assert len(lines) == 2 and lines[0].startswith("event: "), block
        assert lines[1].startswith("data: "), block
        out.append((lines[0][7:], json.loads(lines[1][6:])))
    return out


def check_order(evs: list[tuple[str, Any]]) -> None:
    """Anthropic's grammar: message_start, then blocks (start, deltas, stop; indexes 0, 1,
    ...), message_delta, message_stop; pings anywhere after message_start."""
    names = [n for n, _ in evs if n != "ping"]
    assert evs[0][0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    for name, data in evs:
        assert data["type"] == name
    index, open_ = -1, False
    for name, data in [e for e in evs if e[0] != "ping"][1:-2]:
        if name == "content_block_start":
            assert not open_ and data["index"] == index + 1
            index, open_ = index + 1, True
        else:
            assert name in ("content_block_delta", "content_block_stop"), name
            assert open_ and data["index"] == index
            open_ = name == "content_block_delta"
    assert not open_


def text_of(msg: Any) -> str:
    return "".join(b.text for b in msg.content if b.type == "text")


def png_b64() -> str:
    buf = io.BytesIO()
    PILImage.new("RGB", (32, 24), (10, 120, 200)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


# ----------------------------------------------------------------------- messages.create


def test_create_answers_what_chat_completions_answers(
    client: anthropic.Anthropic, server: NeutrinoProc
) -> None:
    system: Any = [{"type": "text", "text": "You are terse."}]
    msg = client.messages.create(
        model=QWEN, max_tokens=24, system=system, messages=user("Weather in Zürich? ☀️")
    )
    assert msg.type == "message" and msg.role == "assistant" and msg.model == QWEN
    assert msg.id.startswith("msg_") and msg.stop_reason in ("end_turn", "max_tokens")
    assert [b.type for b in msg.content] == ["text"] and text_of(msg)
    assert 0 < msg.usage.output_tokens <= 24 and msg.usage.cache_read_input_tokens == 0
    chat = {
        "model": QWEN,
        "max_tokens": 24,
        "messages": [
            {"role": "system", "content": "You are terse."},
            *user("Weather in Zürich? ☀️"),
        ],
    }
    status, raw = post(server, "/v1/chat/completions", chat)
    assert status == 200
    openai = json.loads(raw)
    assert openai["choices"][0]["message"]["content"] == text_of(msg)
    assert openai["usage"]["prompt_tokens"] == msg.usage.input_tokens
    assert openai["usage"]["completion_tokens"] == msg.usage.output_tokens


def test_system_as_string_or_blocks_is_the_same_prompt(client: anthropic.Anthropic) -> None:
    a = client.messages.create(model=QWEN, max_tokens=8, system="Be brief.", messages=user("Hi"))
    blocks: Any = [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]
    b = client.messages.create(model=QWEN, max_tokens=8, system=blocks, messages=user("Hi"))
    c = client.messages.create(model=QWEN, max_tokens=8, messages=user("Hi"))
    assert text_of(a) == text_of(b) and a.usage.input_tokens == b.usage.input_tokens
    assert c.usage.input_tokens != a.usage.input_tokens


def test_image_block(client: anthropic.Anthropic) -> None:
    image: Any = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": png_b64()},
    }
    content: Any = [image, {"type": "text", "text": "What is in this picture?"}]
    msg = client.messages.create(
        model=VLM, max_tokens=16, messages=[{"role": "user", "content": content}]
    )
    assert text_of(msg) and msg.usage.output_tokens > 0
    plain = client.messages.create(
        model=VLM, max_tokens=16, messages=user("What is in this picture?")
    )
    assert msg.usage.input_tokens > plain.usage.input_tokens  # the image's tokens
    with pytest.raises(anthropic.BadRequestError) as info:  # a model without vision
        client.messages.create(
            model=QWEN, max_tokens=16, messages=[{"role": "user", "content": content}]
        )
    assert info.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    url: Any = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    with pytest.raises(anthropic.BadRequestError, match="data: URIs"):
        client.messages.create(
            model=VLM, max_tokens=16, messages=[{"role": "user", "content": [url]}]
        )


def test_stop_sequences_and_max_tokens(client: anthropic.Anthropic) -> None:
    msg = client.messages.create(
        model=QWEN, max_tokens=40, stop_sequences=["HALT", "never"], messages=user("halting")
    )
    assert (msg.stop_reason, msg.stop_sequence) == ("stop_sequence", "HALT")
    assert text_of(msg) == "alpha beta "
    cut = client.messages.create(model=QWEN, max_tokens=2, messages=user("halting"))
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 2
    whole = client.messages.create(model=QWEN, max_tokens=40, messages=user("halting"))
    assert whole.stop_reason == "end_turn" and whole.stop_sequence is None
    assert text_of(whole) == "alpha beta HALT gamma delta"
    with client.messages.stream(
        model=QWEN, max_tokens=40, stop_sequences=["HALT"], messages=user("halting")
    ) as stream:
        assert "".join(stream.text_stream) == "alpha beta "
        final = stream.get_final_message()
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", "HALT")


# ------------------------------------------------------------------------ tools


def test_tool_use_and_its_result(client: anthropic.Anthropic) -> None:
    msg = client.messages.create(
        model=QWEN3, max_tokens=200, tools=[WEATHER], messages=user("weathercall")
    )
    assert msg.stop_reason == "tool_use"
    assert [b.type for b in msg.content] == ["text", "tool_use"]
    call = msg.content[1]
    assert call.type == "tool_use" and call.id.startswith("toolu_")
    assert (call.name, call.input) == ("get_weather", {"city": "Zürich"})
    assert text_of(msg) == "Checking."
    # the conversation goes on with the call and its result, as the SDK returns them
    history: Any = [
        *user("weathercall"),
        {"role": "assistant", "content": msg.content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny, 21 °C"}],
        },
    ]
    after = client.messages.create(model=QWEN3, max_tokens=30, tools=[WEATHER], messages=history)
    assert after.usage.input_tokens > msg.usage.input_tokens


def test_stream_helper_with_tool_use(client: anthropic.Anthropic) -> None:
    kinds: list[str] = []
    partial: list[str] = []
    with client.messages.stream(
        model=QWEN3, max_tokens=200, tools=[WEATHER], messages=user("weathercall")
    ) as stream:
        for ev in stream:
            kinds.append(ev.type)
            if ev.type == "input_json":
                partial.append(ev.partial_json)
        final = stream.get_final_message()
    assert "input_json" in kinds and "text" in kinds and kinds[-1] == "message_stop"
    assert json.loads("".join(partial)) == {"city": "Zürich"}
    assert final.stop_reason == "tool_use"
    call = final.content[-1]
    assert call.type == "tool_use" and (call.name, call.input) == (
        "get_weather",
        {"city": "Zürich"},
    )
    assert text_of(final) == "Checking."


@pytest.mark.parametrize(
    ("choice", "names"),
    [
        ({"type": "any"}, ({"get_weather"}, {"convert"})),
        ({"type": "tool", "name": "convert"}, ({"convert"},)),
    ],
)
def test_forced_tool_choice(
    client: anthropic.Anthropic, choice: Any, names: tuple[set[str], ...]
) -> None:
    msg = client.messages.create(
        model=QWEN3,
        max_tokens=200,
        tools=[WEATHER, CONVERT],
        tool_choice=choice,
        messages=user("pick"),
    )
    calls = [b for b in msg.content if b.type == "tool_use"]
    assert calls and {c.name for c in calls} in names and msg.stop_reason == "tool_use"
    for c in calls:
        assert isinstance(c.input, dict) and set(c.input) == {
            "city" if c.name == "get_weather" else "amount"
        }
    one: Any = {**choice, "disable_parallel_tool_use": True}
    single = client.messages.create(
        model=QWEN3,
        max_tokens=200,
        tools=[WEATHER, CONVERT],
        tool_choice=one,
        messages=user("pick"),
    )
    assert len([b for b in single.content if b.type == "tool_use"]) == 1


def test_tool_choice_auto_and_none(client: anthropic.Anthropic) -> None:
    auto = client.messages.create(
        model=QWEN3,
        max_tokens=200,
        tools=[WEATHER],
        tool_choice={"type": "auto"},
        messages=user("weathercall"),
    )
    assert auto.stop_reason == "tool_use"
    none = client.messages.create(
        model=QWEN3,
        max_tokens=200,
        tools=[WEATHER],
        tool_choice={"type": "none"},
        messages=user("weathercall"),
    )
    assert none.stop_reason == "end_turn" and not [b for b in none.content if b.type == "tool_use"]
    assert "<tool_call>" in text_of(none)  # no tool parser: the model's text as it wrote it


# ------------------------------------------------------------------------ thinking


def test_thinking_on_and_off(client: anthropic.Anthropic) -> None:
    on = client.messages.create(
        model=QWEN3,
        max_tokens=2048,
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=user("thinkswitch"),
    )
    assert [b.type for b in on.content] == ["thinking", "text"]
    assert on.content[0].type == "thinking" and on.content[0].thinking == "Plan it."
    assert on.content[0].signature == "" and text_of(on) == "The answer."
    off = client.messages.create(
        model=QWEN3, max_tokens=2048, thinking={"type": "disabled"}, messages=user("thinkswitch")
    )
    assert [b.type for b in off.content] == ["text"] and text_of(off) == "Direct answer."
    with client.messages.stream(
        model=QWEN3,
        max_tokens=2048,
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=user("thinkswitch"),
    ) as stream:
        kinds = [ev.type for ev in stream]
        final = stream.get_final_message()
    assert "thinking" in kinds and "signature" in kinds
    assert [
        (b.type, getattr(b, "thinking", None) or getattr(b, "text", None)) for b in final.content
    ] == [
        ("thinking", "Plan it."),
        ("text", "The answer."),
    ]
    # a thinking block sent back in the conversation is the turn's reasoning
    history: Any = [
        *user("thinkswitch"),
        {"role": "assistant", "content": on.content},
        *user("again"),
    ]
    again = client.messages.create(model=QWEN3, max_tokens=30, messages=history)
    assert again.usage.input_tokens > on.usage.input_tokens


# ------------------------------------------------------------------------ streams


def test_raw_stream_events_in_anthropics_order(server: NeutrinoProc) -> None:
    body = {"model": QWEN3, "max_tokens": 200, "tools": [WEATHER], "messages": user("weathercall")}
    status, raw = post(server, "/v1/messages", {**body, "stream": True})
    assert status == 200
    evs = events(raw)
    check_order(evs)
    names = [n for n, _ in evs]
    assert names[:2] == ["message_start", "ping"]
    starts = [d["content_block"] for n, d in evs if n == "content_block_start"]
    assert [b["type"] for b in starts] == ["text", "tool_use"]
    assert starts[1]["name"] == "get_weather" and starts[1]["input"] == {}
    start = evs[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    delta = next(d for n, d in evs if n == "message_delta")
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    status, whole_raw = post(server, "/v1/messages", body)
    whole = json.loads(whole_raw)
    assert start["usage"]["input_tokens"] == whole["usage"]["input_tokens"]
    # the final usage is the whole message's: input, cache and output counts
    assert delta["usage"] == whole["usage"]
    assert {"input_tokens", "cache_read_input_tokens", "output_tokens"} <= delta["usage"].keys()
    assert start["id"] != whole["id"] and start["id"].startswith("msg_")


def test_stream_helper_text_equals_create(client: anthropic.Anthropic) -> None:
    msg = client.messages.create(model=QWEN, max_tokens=30, messages=user("Tell me a story"))
    with client.messages.stream(model=QWEN, max_tokens=30, messages=user("Tell me a story")) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == text_of(msg) == text_of(final)
    assert final.usage.input_tokens == msg.usage.input_tokens
    assert final.usage.output_tokens == msg.usage.output_tokens
    assert final.stop_reason == msg.stop_reason


def test_an_engine_error_mid_stream_is_an_error_event(
    client: anthropic.Anthropic, server: NeutrinoProc
) -> None:
    status, raw = post(
        server,
        "/v1/messages",
        {"model": QWEN, "max_tokens": 50, "stream": True, "messages": user("break-here")},
    )
    assert status == 200
    evs = events(raw)
    assert evs[0][0] == "message_start" and evs[-1][0] == "error"
    assert evs[-1][1]["error"]["type"] == "api_error" and "message_stop" not in [n for n, _ in evs]
    with (
        pytest.raises(anthropic.APIStatusError),
        client.messages.stream(model=QWEN, max_tokens=50, messages=user("break-here")) as stream,
    ):
        stream.until_done()


def test_a_client_that_leaves_mid_stream_costs_one_engine_cancel(
    stack: Stack, client: anthropic.Anthropic, server: NeutrinoProc
) -> None:
    before = len(stack.mock.events("cancel"))
    with client.messages.stream(model=QWEN, max_tokens=500, messages=user("stall-here")) as stream:
        for ev in stream:
            if ev.type == "content_block_delta":
                break  # tokens are flowing; the client leaves
    deadline = time.monotonic() + 5
    while len(stack.mock.events("cancel")) <= before and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)  # would a second cancel arrive?
    cancels = stack.mock.events("cancel")[before:]
    assert len(cancels) == 1 and cancels[0]["reason"] == "client disconnected"
    assert last_state(server) == "cancelled"


# ------------------------------------------------------------------------ count_tokens


def test_count_tokens_equals_the_input_tokens_of_the_request(client: anthropic.Anthropic) -> None:
    call: Any = {
        "type": "tool_use",
        "id": "toolu_x1",
        "name": "get_weather",
        "input": {"city": "Bern"},
    }
    result: Any = {"type": "tool_result", "tool_use_id": "toolu_x1", "content": "rain"}
    history: Any = [
        *user("Weather in Bern?"),
        {"role": "assistant", "content": [{"type": "text", "text": "Looking."}, call]},
        {"role": "user", "content": [result, {"type": "text", "text": "Summarise."}]},
    ]
    cases: list[dict[str, Any]] = [
        {"model": QWEN, "messages": user("Hi")},
        {"model": QWEN3, "system": "Be brief.", "tools": [WEATHER, CONVERT], "messages": history},
        {"model": QWEN3, "thinking": {"type": "disabled"}, "messages": user("thinkswitch")},
    ]
    counts = []
    for case in cases:
        counted = client.messages.count_tokens(**case)
        msg = client.messages.create(max_tokens=4, **case)
        assert counted.input_tokens == msg.usage.input_tokens > 0, case
        counts.append(counted.input_tokens)
    assert len(set(counts)) == len(counts)
    with pytest.raises(anthropic.NotFoundError):
        client.messages.count_tokens(model="no-such-model", messages=user("Hi"))


# ------------------------------------------------------------------------ errors


def test_errors_in_anthropics_shape(client: anthropic.Anthropic, server: NeutrinoProc) -> None:
    with pytest.raises(anthropic.NotFoundError) as nf:
        client.messages.create(model="no-such-model", max_tokens=8, messages=user("Hi"))
    assert nf.value.status_code == 404
    assert nf.value.body == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "the model 'no-such-model' does not exist"},
    }
    with (
        pytest.raises(anthropic.NotFoundError),  # streamed: refused before the stream opens
        client.messages.stream(model="no-such-model", max_tokens=8, messages=user("Hi")) as s,
    ):
        s.until_done()
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(
            model=QWEN, max_tokens=8, messages=user("Hi"), extra_body={"temperature": 3.0}
        )
    assert bad.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    status, raw = post(server, "/v1/messages", {"model": QWEN, "messages": user("Hi")})
    assert status == 400 and json.loads(raw) == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens is required"},
    }
    status, raw = post(
        server,
        "/v1/messages",
        {"model": QWEN, "max_tokens": 8, "messages": user("x")},
        key="sk-wrong",
    )
    assert status == 401
    assert json.loads(raw)["type"] == "error"
    assert json.loads(raw)["error"]["type"] == "authentication_error"
    wrong = anthropic.Anthropic(base_url=server.base_url, api_key="sk-wrong", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        wrong.messages.create(model=QWEN, max_tokens=8, messages=user("Hi"))
    with pytest.raises(anthropic.AuthenticationError):
        wrong.messages.count_tokens(model=QWEN, messages=user("Hi"))


def raw_post(server: NeutrinoProc, path: str, data: bytes, key: str = KEY) -> tuple[int, Any]:
    """A POST of ``data`` as it is (JSON or not); the status and the JSON answer."""
    req = urllib.request.Request(
        server.base_url + path,
        data=data,
        headers={"Content-Type": "application/json", "x-api-key": key},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_count_tokens_errors_in_anthropics_shape(server: NeutrinoProc) -> None:
    """count_tokens answers its refusals as /v1/messages does, on either server."""
    path = "/v1/messages/count_tokens"
    hi = {"model": QWEN, "messages": user("Hi")}
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/x.png"}}
    url_image = {"model": VLM, "system": "S.", "messages": [{"role": "user", "content": [image]}]}
    cases: list[tuple[Any, str, int, str]] = [
        ({"model": QWEN}, KEY, 400, "invalid_request_error"),
        (b"{not json", KEY, 400, "invalid_request_error"),
        ([1, 2], KEY, 400, "invalid_request_error"),
        (url_image, KEY, 400, "invalid_request_error"),
        ({**hi, "model": "nope"}, KEY, 404, "not_found_error"),
        (hi, "sk-no", 401, "authentication_error"),
    ]
    for body, key, status, kind in cases:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        got, answer = raw_post(server, path, data, key)
        assert got == status, (body, answer)
        assert set(answer) == {"type", "error"} and answer["type"] == "error", answer
        assert answer["error"]["type"] == kind and answer["error"]["message"], (body, answer)
    # chat's check of the image, named as the Messages body names it (no system shift)
    _, answer = raw_post(server, path, json.dumps(url_image).encode())
    assert answer["error"]["message"].startswith("messages[0].content[0]: "), answer


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
def test_a_body_too_large_is_request_too_large(server: NeutrinoProc, path: str) -> None:
    """Its head says how long it is: refused before the body is sent."""
    conn = http.client.HTTPConnection("127.0.0.1", int(server.base_url.rsplit(":", 1)[1]))
    try:
        conn.putrequest("POST", path)
        for name, value in (
            ("Content-Type", "application/json"),
            ("Content-Length", "1200000"),
            ("x-api-key", KEY),
        ):
            conn.putheader(name, value)
        conn.endheaders()
        r = conn.getresponse()
        assert r.status == 413
        answer = json.loads(r.read())
        assert answer["type"] == "error" and answer["error"]["type"] == "request_too_large"
    finally:
        conn.close()


def test_version_header_is_optional(server: NeutrinoProc) -> None:
    """The raw requests here send no anthropic-version header; the SDK sends one."""
    status, raw = post(
        server, "/v1/messages", {"model": QWEN, "max_tokens": 4, "messages": user("Hi")}
    )
    assert status == 200 and json.loads(raw)["type"] == "message"
