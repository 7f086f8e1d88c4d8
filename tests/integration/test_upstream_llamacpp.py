"""An HTTP upstream in token mode: llama.cpp's own server (``llama-server``, built by
``make llama-server``) on SmolLM2-135M-Instruct, as ``[[engines]] url = ...``.

Neutrino templates and tokenizes, sends token ids to the server's ``/completion`` and
reads token ids back; so every feature works in front of it as in front of a Cap'n Proto
engine: the official openai and anthropic SDKs, streamed and not, a forced tool call
parsed by Neutrino, structured output, logprobs. The server's own ``/slots`` says whether
a cancelled request stopped there; killing and restarting it shows the clean error
event, the router's skip and the recovery.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import jsonschema
import openai
import pytest

from tests.support.llama_server import MISSING, MODEL, LlamaServer
from tests.support.procs import NeutrinoProc, wait_for
from tests.support.real_model import chat_deltas, check_stop_string, post_json, sse_data

pytestmark = [pytest.mark.skipif(bool(MISSING), reason=MISSING), pytest.mark.timeout(180)]


def _config(url: str, refresh_s: float = 0.5) -> str:
    return (
        f'[[engines]]\nname = "llama-server"\nurl = "{url}/v1"\nmode = "tokens"\n'
        f"refresh_s = {refresh_s}\n"
    )


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    srv = LlamaServer(tmp_path_factory.mktemp("llama-server")).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def server(
    upstream: LlamaServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NeutrinoProc]:
    proc = NeutrinoProc(tmp_path_factory.mktemp("neutrino"), config=_config(upstream.url))
    proc.start(timeout=60)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def client(server: NeutrinoProc) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)


def test_the_upstream_serves_its_model_with_its_context(server: NeutrinoProc) -> None:
    models = {m["id"] for m in server.get_json("/v1/models")["data"]}
    assert MODEL in models
    engines = server.get_json("/neutrino/v1/app_state")["engines"]
    (up,) = engines
    assert up["connected"] is True and up["mode"] == "tokens"
    assert up["engine"].startswith("llama.cpp")
    assert up["models"] == [{"name": MODEL, "context_length": 1024}]  # the server's n_ctx per slot
    assert up["capacity"] == 4  # its slots


def test_chat_answers_whole_and_streamed(client: openai.OpenAI) -> None:
    messages: Any = [{"role": "user", "content": "What is the capital of France?"}]
    whole = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=24, temperature=0
    )
    text = whole.choices[0].message.content or ""
    assert text.strip()
    assert whole.usage is not None and 0 < whole.usage.completion_tokens <= 24
    assert whole.usage.prompt_tokens > 10
    stream = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=24, temperature=0, stream=True
    )
    parts = [c.choices[0].delta.content or "" for c in stream if c.choices]
    assert len(parts) > 3  # token by token
    assert "".join(parts) == text  # greedy: the same answer


def test_greedy_ids_are_the_servers_own(client: openai.OpenAI, upstream: LlamaServer) -> None:
    """The same prompt ids through Neutrino and straight to the server: the same ids back."""
    ids = post_json(upstream.url + "/tokenize", {"content": "The three primary colours are"})[
        "tokens"
    ]
    own = post_json(
        upstream.url + "/completion",
        {
            "prompt": ids,
            "n_predict": 16,
            "temperature": 0,
            "ignore_eos": True,
            "return_tokens": True,
        },
    )
    got = client.completions.create(
        model=MODEL, prompt=ids, max_tokens=16, temperature=0, extra_body={"ignore_eos": True}
    )
    assert got.choices[0].text == own["content"]
    assert got.usage is not None and got.usage.completion_tokens == len(own["tokens"]) == 16


def test_the_anthropic_sdk_streamed_and_not(server: NeutrinoProc) -> None:
    ac = anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0)
    msg = ac.messages.create(
        model=MODEL, max_tokens=16, extra_body={"temperature": 0},
        messages=[{"role": "user", "content": "Name a colour."}],
    )  # fmt: skip
    whole = "".join(b.text for b in msg.content if b.type == "text")
    assert whole.strip() and msg.stop_reason in ("end_turn", "max_tokens")
    with ac.messages.stream(
        model=MODEL, max_tokens=16, extra_body={"temperature": 0},
        messages=[{"role": "user", "content": "Name a colour."}],
    ) as stream:  # fmt: skip
        streamed = "".join(stream.text_stream)
    assert streamed == whole


WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 30}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


def test_a_forced_tool_call_is_parsed_by_neutrino(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL, max_tokens=60, temperature=0, tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
    )  # fmt: skip
    choice = r.choices[0]
    (call,) = choice.message.tool_calls or []
    assert call.type == "function" and call.function.name == "get_weather"
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, WEATHER["function"]["parameters"])


def test_structured_output_and_logprobs(client: openai.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string", "maxLength": 20}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    r = client.chat.completions.create(
        model=MODEL, max_tokens=40, temperature=0,
        messages=[{"role": "user", "content": "Answer as JSON: what colour is grass?"}],
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema}},
        logprobs=True, top_logprobs=3,
    )  # fmt: skip
    choice = r.choices[0]
    jsonschema.validate(json.loads(choice.message.content or ""), schema)
    content = choice.logprobs.content  # type: ignore[union-attr]
    assert content
    for entry in content:
        assert entry.logprob <= 0 and len(entry.top_logprobs) == 3


def test_a_stop_string_is_applied_by_neutrino(client: openai.OpenAI) -> None:
    check_stop_string(client, MODEL)


def _leave_a_long_stream(client: openai.OpenAI, model: str, upstream: LlamaServer) -> None:
    """Start a long stream, read a few chunks, leave: the server's slot must free."""
    stream = client.chat.completions.create(
        model=model, max_tokens=900, temperature=1.0, stream=True,
        messages=[{"role": "user", "content": "Tell a very long story."}],
        extra_body={"ignore_eos": True},
    )  # fmt: skip
    for i, _chunk in enumerate(stream):
        if i == 5:
            break
    assert upstream.busy_slots() == 1
    stream.close()
    assert wait_for(lambda: upstream.busy_slots() == 0, timeout=10), upstream.get_json("/slots")


def test_a_client_disconnect_ends_the_upstream_request(
    client: openai.OpenAI, upstream: LlamaServer
) -> None:
    _leave_a_long_stream(client, MODEL, upstream)


# ---------------------------------------------------------------- the upstream fails


@pytest.mark.parametrize("mode", ["tokens", "passthrough"])
def test_the_upstream_down_at_start_then_killed_mid_stream_then_back(
    tmp_path: Path, mode: str
) -> None:
    """Down at start: refused with a clear error and shown down; up: served; killed in
    the middle of a stream: the stream ends with an error event; back: served again."""
    upstream = LlamaServer(tmp_path)
    config = _config(upstream.url, refresh_s=0.3).replace('"tokens"', f'"{mode}"')
    server = NeutrinoProc(tmp_path, config=config + f'models = ["{MODEL}"]\n')
    server.start(timeout=30, wait_engine=False)
    try:
        (up,) = server.get_json("/neutrino/v1/app_state")["engines"]
        assert up["connected"] is False and up["problem"]
        with pytest.raises(urllib.error.HTTPError) as down:
            server.get_json("/neutrino/v1/status")
        status = json.loads(down.value.read())
        assert status["status"] == "no_engine"
        assert status["down"][0].startswith("llama-server: "), status  # and why
        code, body = server.post_json(
            "/v1/chat/completions",
            json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}).encode(),
        )
        assert code == 503 and body["error"]["message"], body
        upstream.start()
        assert wait_for(lambda: server.status_code() == 200, timeout=10), server.log()
        oc = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
        stream = oc.chat.completions.create(
            model=MODEL, max_tokens=900, temperature=1.0, stream=True,
            messages=[{"role": "user", "content": "Tell a very long story."}],
            extra_body={"ignore_eos": True},
        )  # fmt: skip
        killer = threading.Timer(0.5, upstream.kill)
        killer.start()
        with pytest.raises(openai.APIError) as info:
            for _chunk in stream:
                pass
        killer.join()
        assert "engine" in str(info.value).lower(), info.value
        assert wait_for(lambda: server.status_code() == 503, timeout=10)
        upstream.start()
        assert wait_for(lambda: server.status_code() == 200, timeout=10), server.log()
        again = oc.chat.completions.create(
            model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
        assert again.choices[0].message.content is not None
    finally:
        server.stop()
        upstream.stop()


# ---------------------------------------------------------------- passthrough mode


@pytest.fixture(scope="module")
def relay(
    upstream: LlamaServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NeutrinoProc]:
    """Neutrino relaying to the same server as any OpenAI-compatible server, its model
    served under another name (renamed on the way)."""
    config = (
        _config(upstream.url).replace('"tokens"', '"passthrough"')
        + f'models = ["smol"]\nupstream_names = {{ smol = "{MODEL}" }}\n'
    )
    proc = NeutrinoProc(tmp_path_factory.mktemp("relay"), config=config)
    proc.start(timeout=60)
    try:
        yield proc
    finally:
        proc.stop()


def test_passthrough_answers_whole_with_the_upstreams_usage(
    relay: NeutrinoProc, upstream: LlamaServer
) -> None:
    oc = openai.OpenAI(base_url=relay.base_url + "/v1", api_key="x", max_retries=0)
    messages: Any = [{"role": "user", "content": "What is the capital of France?"}]
    got = oc.chat.completions.with_raw_response.create(
        model="smol", messages=messages, max_tokens=16, temperature=0
    )
    answer = got.parse()
    own = post_json(
        upstream.url + "/v1/chat/completions",
        {"model": MODEL, "messages": messages, "max_tokens": 16, "temperature": 0},
    )
    assert answer.choices[0].message.content == own["choices"][0]["message"]["content"]
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == own["usage"]["prompt_tokens"]
    assert got.headers["x-request-id"].startswith("chatcmpl-")
    (entry,) = [h for h in relay.history() if h["id"] == got.headers["x-request-id"]]
    assert entry["state"] == "complete" and entry["model"] == "smol"
    assert entry["completion_tokens"] == answer.usage.completion_tokens


def test_passthrough_relays_the_stream_event_by_event(
    relay: NeutrinoProc, upstream: LlamaServer
) -> None:
    doc: dict[str, Any] = {
        "messages": [{"role": "user", "content": "Name three fruits."}],
        "max_tokens": 20, "temperature": 0, "stream": True,
    }  # fmt: skip
    relayed = sse_data(relay.base_url + "/v1/chat/completions", {**doc, "model": "smol"})
    own = sse_data(upstream.url + "/v1/chat/completions", {**doc, "model": MODEL})
    assert relayed[-1] == own[-1] == "[DONE]"
    assert len(relayed) == len(own) > 5
    assert chat_deltas(relayed) == chat_deltas(own)  # the same events, in the same order


def test_passthrough_text_completion_and_sdk_stream(relay: NeutrinoProc) -> None:
    oc = openai.OpenAI(base_url=relay.base_url + "/v1", api_key="x", max_retries=0)
    text = oc.completions.create(model="smol", prompt="Once upon a time", max_tokens=8)
    assert text.choices[0].text
    stream = oc.chat.completions.create(
        model="smol", max_tokens=12, temperature=0, stream=True,
        messages=[{"role": "user", "content": "Say hello."}],
    )  # fmt: skip
    parts = [c.choices[0].delta.content or "" for c in stream if c.choices]
    assert "".join(parts).strip()


def test_passthrough_upstream_errors_keep_their_status(relay: NeutrinoProc) -> None:
    oc = openai.OpenAI(base_url=relay.base_url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        oc.chat.completions.create(
            model="smol", max_tokens=8,
            messages=[{"role": "user", "content": "hi " * 3000}],  # past the server's context
        )  # fmt: skip
    assert "engine error" in str(info.value)


def test_passthrough_relays_the_anthropic_api_too(relay: NeutrinoProc) -> None:
    """Anthropic's Messages API goes to the upstream's own /v1/messages, streamed and not;
    other APIs (here the Responses API) are refused clearly."""
    ac = anthropic.Anthropic(base_url=relay.base_url, api_key="x", max_retries=0)
    ask: Any = [{"role": "user", "content": "Name a colour."}]
    msg = ac.messages.create(
        model="smol", max_tokens=12, messages=ask, extra_body={"temperature": 0}
    )
    whole = "".join(b.text for b in msg.content if b.type == "text")
    assert whole.strip() and msg.usage.output_tokens > 0
    with ac.messages.stream(
        model="smol", max_tokens=12, messages=ask, extra_body={"temperature": 0}
    ) as stream:
        assert "".join(stream.text_stream) == whole
    (entry, *_) = relay.history()
    assert entry["state"] == "complete" and entry["model"] == "smol"
    oc = openai.OpenAI(base_url=relay.base_url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        oc.responses.create(model="smol", input="hi")
    assert "passthrough" in str(info.value)


def test_passthrough_client_disconnect_ends_the_upstream_request(
    relay: NeutrinoProc, upstream: LlamaServer
) -> None:
    oc = openai.OpenAI(base_url=relay.base_url + "/v1", api_key="x", max_retries=0)
    _leave_a_long_stream(oc, "smol", upstream)
    assert wait_for(lambda: relay.history()[0]["state"] == "cancelled", timeout=5)
