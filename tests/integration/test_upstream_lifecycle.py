"""An HTTP upstream that loads models on demand: llama.cpp's server in router mode
(``llama-server --models-dir DIR --models-max 2 --no-models-autoload``) over a folder of
three SmolLM2 GGUFs under three names, managed by Neutrino.

The server holds two models at once. One is pinned in Neutrino's config: it is loaded at
the start and stays. Requests alternate between the two others, so each switch has the
server unload one (a real llama.cpp process ends) and load the other; no request fails.
Concurrent requests for an unloaded model share one load; the admin routes load and
unload; a model whose file is broken fails its load with a clear error. Token mode and
passthrough both keep the server within its two.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.llama_server import GGUF, MISSING, LlamaServer
from tests.support.procs import NeutrinoProc, wait_for

pytestmark = [pytest.mark.skipif(bool(MISSING), reason=MISSING), pytest.mark.timeout(240)]

PINNED = "smollm2-alpha"
SWAPPED = ("smollm2-beta", "smollm2-gamma")
BROKEN = "smollm2-broken"


def _config(url: str, mode: str) -> str:
    return (
        f'[[engines]]\nname = "router"\nurl = "{url}/v1"\nmode = "{mode}"\n'
        f'refresh_s = 0.5\npinned = ["{PINNED}"]\n'
    )


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    work = tmp_path_factory.mktemp("llama-router")
    folder = work / "models"
    folder.mkdir()
    for name in (PINNED, *SWAPPED):
        os.symlink(GGUF, folder / f"{name}.gguf")
    (folder / f"{BROKEN}.gguf").write_bytes(b"GGUF" + bytes(4096))  # not a model
    srv = LlamaServer(work, slots=2, ctx=512, models_dir=folder, models_max=2).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def server(
    upstream: LlamaServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NeutrinoProc]:
    proc = NeutrinoProc(tmp_path_factory.mktemp("neutrino"), config=_config(upstream.url, "tokens"))
    proc.start(timeout=60)
    try:
        yield proc
    finally:
        proc.stop()


def _states(server: NeutrinoProc) -> dict[str, str]:
    return {m["id"]: m["status"] for m in server.get_json("/v1/models")["data"]}


def _ask_all(base_url: str, models: list[str]) -> list[str]:
    """Ask each of ``models`` at once (a chat each), in the order given, batch by batch."""
    client = openai.AsyncOpenAI(base_url=base_url + "/v1", api_key="x", max_retries=0)

    async def ask(model: str) -> str:
        r = await client.chat.completions.create(
            model=model, max_tokens=6, temperature=0,
            messages=[{"role": "user", "content": "Name a colour."}],
        )  # fmt: skip
        return r.choices[0].message.content or ""

    async def run() -> list[str]:
        return list(await asyncio.gather(*(ask(m) for m in models)))

    return asyncio.run(run())


def test_the_pinned_model_is_loaded_at_the_start(
    server: NeutrinoProc, upstream: LlamaServer
) -> None:
    assert wait_for(lambda: _states(server).get(PINNED) == "loaded", timeout=60)
    states = _states(server)
    assert set(states) == {PINNED, *SWAPPED, BROKEN}
    assert all(states[m] == "unloaded" for m in SWAPPED)
    assert upstream.states()[PINNED] == "loaded"
    (engine,) = server.get_json("/neutrino/v1/app_state")["engines"]
    assert engine["engine"].startswith("llama.cpp router")
    assert engine["loads_models"] is True and engine["models_max"] == 2
    pinned = next(m for m in engine["models"] if m["name"] == PINNED)
    assert pinned == {"name": PINNED, "context_length": 512, "state": "loaded"}


def test_requests_alternate_between_two_models_beside_the_pin(
    server: NeutrinoProc, upstream: LlamaServer
) -> None:
    assert wait_for(lambda: _states(server).get(PINNED) == "loaded", timeout=60)
    answers: list[str] = []
    for model in (*SWAPPED, *SWAPPED):
        answers += _ask_all(server.base_url, [model, model])
        server_states = upstream.states()
        assert server_states[model] == "loaded" and server_states[PINNED] == "loaded"
        assert list(server_states.values()).count("loaded") == 2  # within --models-max
    answers += _ask_all(server.base_url, [*SWAPPED, *SWAPPED, PINNED])  # both wanted at once
    assert all(answers)
    assert len(set(answers)) == 1  # the same weights under each name, greedy
    state: dict[str, Any] = server.get_json("/neutrino/v1/app_state")
    counts = state["model_lifecycle"]
    assert counts[SWAPPED[0]]["loads"] >= 2 and counts[SWAPPED[1]]["loads"] >= 2
    assert counts[SWAPPED[0]]["evictions"] >= 1 and counts[SWAPPED[1]]["evictions"] >= 1
    assert counts.get(PINNED, {}).get("evictions", 0) == 0
    assert state["requests"]["finished"].get("failed", 0) == 0


def test_concurrent_requests_for_an_unloaded_model_share_one_load(
    server: NeutrinoProc, upstream: LlamaServer
) -> None:
    before: dict[str, Any] = server.get_json("/neutrino/v1/app_state")["model_lifecycle"]
    model = next(m for m in SWAPPED if upstream.states()[m] == "unloaded")
    loads = before.get(model, {}).get("loads", 0)
    answers = _ask_all(server.base_url, [model] * 5)
    assert all(answers)
    after: dict[str, Any] = server.get_json("/neutrino/v1/app_state")["model_lifecycle"]
    assert after[model]["loads"] == loads + 1
    history = [h for h in server.history() if h["model"] == model][:5]
    assert all(h["state"] == "complete" for h in history)
    assert max(h["timings"]["queue_time"] for h in history) > 0.1  # the load, waited for queued


def test_admin_routes_unload_and_load(server: NeutrinoProc, upstream: LlamaServer) -> None:
    model = next(m for m in SWAPPED if upstream.states()[m] == "loaded")
    code, _ = server.post_json(f"/neutrino/v1/models/{model}/unload", b"{}")
    assert code == 200
    assert upstream.states()[model] == "unloaded" and _states(server)[model] == "unloaded"
    code, _ = server.post_json(f"/neutrino/v1/models/{model}/load", b"{}")
    assert code == 200
    assert upstream.states()[model] == "loaded" and _states(server)[model] == "loaded"


def test_a_model_that_fails_to_load_is_a_clear_error(
    server: NeutrinoProc, upstream: LlamaServer
) -> None:
    code, body = server.post_json(f"/neutrino/v1/models/{BROKEN}/load", b"{}")
    assert code == 502, body
    message = body["error"]["message"]
    assert BROKEN in message and "could not load" in message and "exited with" in message
    # As the upstream's listing says at the next read (it may still say loading at once).
    assert wait_for(lambda: _states(server)[BROKEN] == "unloaded", 15)
    assert upstream.states()[PINNED] == "loaded"  # the pin was not given up for it
    assert _ask_all(server.base_url, [PINNED]) != [""]


def test_passthrough_keeps_the_server_within_its_models_too(
    server: NeutrinoProc, upstream: LlamaServer, tmp_path: Path
) -> None:
    relay = NeutrinoProc(tmp_path, config=_config(upstream.url, "passthrough"))
    relay.start(timeout=60)
    try:
        client = openai.OpenAI(base_url=relay.base_url + "/v1", api_key="x", max_retries=0)
        for model in (*SWAPPED, *SWAPPED):
            stream = client.chat.completions.create(
                model=model, max_tokens=6, temperature=0, stream=True,
                messages=[{"role": "user", "content": "Name a colour."}],
            )  # fmt: skip
            text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            assert text
            server_states = upstream.states()
            assert server_states[model] == "loaded" and server_states[PINNED] == "loaded"
            assert list(server_states.values()).count("loaded") == 2
        state: dict[str, Any] = relay.get_json("/neutrino/v1/app_state")
        assert state["requests"]["finished"].get("failed", 0) == 0
        assert state["model_lifecycle"][SWAPPED[0]]["loads"] >= 1
        body = json.dumps({"model": BROKEN, "messages": [{"role": "user", "content": "hi"}]})
        code, err = relay.post_json("/v1/chat/completions", body.encode())
        assert code == 502 and "could not load" in err["error"]["message"]
    finally:
        relay.stop()
