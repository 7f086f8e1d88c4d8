"""A passthrough upstream that is only an OpenAI-compatible server: llama-cpp-python's own
(``python -m llama_cpp.server``) on the SmolLM2 GGUF, found by its ``/v1/models``.

Neutrino relays the client's body and the server's answer as they are: whole and
streamed through the openai SDK, the same SSE events as the server's own, in order; a
client that leaves ends the server's generation (it serves one request at a time, so the
next is answered at once); killed in the middle of a stream, the stream ends with an
error event and the server is shown down; back, it is served again.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.llama_server import GGUF, MODEL, PythonLlamaServer
from tests.support.procs import NeutrinoProc, wait_for
from tests.support.real_model import chat_deltas, post_json, sse_data

pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is not installed")
pytestmark = [
    pytest.mark.skipif(not GGUF.is_file(), reason=f"{GGUF} is missing (make install)"),
    pytest.mark.timeout(180),
]

NO_EOS = {"0": -100, "2": -100}  # SmolLM2's end tokens forbidden: a long answer
ASK: Any = [{"role": "user", "content": "Name three fruits."}]


def _config(url: str) -> str:
    return (
        f'[[engines]]\nname = "llama_cpp.server"\nurl = "{url}/v1"\nmode = "passthrough"\n'
        "refresh_s = 0.3\n"
    )


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PythonLlamaServer]:
    srv = PythonLlamaServer(tmp_path_factory.mktemp("llama_cpp.server"), ctx=2048)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def relay(
    upstream: PythonLlamaServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NeutrinoProc]:
    proc = NeutrinoProc(tmp_path_factory.mktemp("relay"), config=_config(upstream.url))
    proc.start(timeout=60)
    try:
        yield proc
    finally:
        proc.stop()


def test_its_models_are_discovered_and_chat_answers_whole(
    relay: NeutrinoProc, upstream: PythonLlamaServer
) -> None:
    assert MODEL in {m["id"] for m in relay.get_json("/v1/models")["data"]}
    ask = {"model": MODEL, "messages": ASK, "max_tokens": 16, "temperature": 0}
    # The server's first answer to a prompt differs from the next ones, which reuse the
    # prompt's cached state: it is asked once before the two answers compared.
    post_json(upstream.url + "/v1/chat/completions", ask)
    oc = openai.OpenAI(base_url=relay.base_url + "/v1", api_key="x", max_retries=0)
    got = oc.chat.completions.with_raw_response.create(
        model=MODEL, messages=ASK, max_tokens=16, temperature=0
    )
    answer = got.parse()
    own = post_json(upstream.url + "/v1/chat/completions", ask)
    assert answer.choices[0].message.content == own["choices"][0]["message"]["content"]
    assert answer.usage is not None and answer.usage.prompt_tokens == own["usage"]["prompt_tokens"]
    (entry,) = [h for h in relay.history() if h["id"] == got.headers["x-request-id"]]
    assert entry["state"] == "complete"
    assert entry["completion_tokens"] == answer.usage.completion_tokens  # the server's usage


def test_the_stream_is_relayed_event_by_event(
    relay: NeutrinoProc, upstream: PythonLlamaServer
) -> None:
    doc: dict[str, Any] = {
        "model": MODEL, "messages": ASK, "max_tokens": 20, "temperature": 0, "stream": True,
    }  # fmt: skip
    relayed = sse_data(relay.base_url + "/v1/chat/completions", doc)
    own = sse_data(upstream.url + "/v1/chat/completions", doc)
    assert relayed[-1] == own[-1] == "[DONE]"
    assert len(relayed) == len(own) > 5
    assert chat_deltas(relayed) == chat_deltas(own)
    oc = openai.OpenAI(base_url=relay.base_url + "/v1", api_key="x", max_retries=0)
    stream = oc.chat.completions.create(
        model=MODEL, messages=ASK, max_tokens=20, temperature=0, stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "".join(d.get("content") or "" for d, _ in chat_deltas(own))
    entry = relay.history()[0]
    assert entry["state"] == "complete" and entry["completion_tokens"] > 5  # chunks counted


def test_a_client_that_leaves_ends_the_generation(relay: NeutrinoProc) -> None:
    oc = openai.OpenAI(base_url=relay.base_url + "/v1", api_key="x", max_retries=0)
    stream = oc.chat.completions.create(
        model=MODEL, max_tokens=1800, temperature=1.0, stream=True, logit_bias=NO_EOS,
        messages=[{"role": "user", "content": "Tell a very long story."}],
    )  # fmt: skip
    for i, _chunk in enumerate(stream):
        if i == 5:
            break
    stream.close()
    assert wait_for(lambda: relay.history()[0]["state"] == "cancelled", timeout=5)
    # The server answers one request at a time: had the 1,800 tokens gone on (about 40
    # a second here), this one would wait for them.
    start = time.monotonic()
    again = oc.chat.completions.create(model=MODEL, messages=ASK, max_tokens=4)
    assert again.choices[0].message.content is not None
    assert time.monotonic() - start < 20


def test_killed_mid_stream_then_back(tmp_path: Path) -> None:
    """Down at start: refused (503) and shown down; up: served; killed in the middle of a
    stream: the stream ends with an error event; back on its port: served again."""
    upstream = PythonLlamaServer(tmp_path, ctx=2048)
    server = NeutrinoProc(tmp_path, config=_config(upstream.url) + f'models = ["{MODEL}"]\n')
    server.start(timeout=30, wait_engine=False)
    try:
        (up,) = server.get_json("/neutrino/v1/app_state")["engines"]
        assert up["connected"] is False and up["problem"]
        body = json.dumps({"model": MODEL, "messages": ASK}).encode()
        code, err = server.post_json("/v1/chat/completions", body)
        assert code == 503 and err["error"]["message"], err
        upstream.start()
        assert wait_for(lambda: server.status_code() == 200, timeout=10), server.log()
        oc = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
        stream = oc.chat.completions.create(
            model=MODEL, max_tokens=1800, temperature=1.0, stream=True, logit_bias=NO_EOS,
            messages=[{"role": "user", "content": "Tell a very long story."}],
        )  # fmt: skip
        killer = threading.Timer(1.0, upstream.kill)
        killer.start()
        with pytest.raises(openai.APIError) as info:
            for _chunk in stream:
                pass
        killer.join()
        assert "engine" in str(info.value).lower(), info.value
        assert server.history()[0]["state"] == "failed"
        assert wait_for(lambda: server.status_code() == 503, timeout=10)
        upstream.start()
        assert wait_for(lambda: server.status_code() == 200, timeout=10), server.log()
        again = oc.chat.completions.create(model=MODEL, messages=ASK, max_tokens=4)
        assert again.choices[0].message.content is not None
    finally:
        server.stop()
        upstream.stop()
