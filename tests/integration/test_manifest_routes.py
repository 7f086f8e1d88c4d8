"""Manifest routes (``[[routes]]``) in front of a real ``mock_ie`` whose router model is
scripted to name intents: dispatch to the intent's specialist (whole and streamed, the
hop in the response header and the history), the fallback for an intent the table does
not know and for a router that fails, the alias in /v1/models, the specialists warmed
on an engine that loads on demand, and the routes replaced under load with no request
failed. Which model answered is read from the engine's own event log."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.procs import MockIE, NeutrinoProc, wait_for

MODELS = ("router-mini", "coder", "mathy", "chatty", "coder-2")
SCRIPT = {
    "rules": [
        {"match": "sort a list", "reply": "code"},
        {"match": "integral", "reply": "math"},
        {"match": "favourite fruit", "reply": "banana", "unguided": True},  # no such intent
        # Only the router's prompt has the user's turn right after the route's instruction
        # (the engine matches the prompt's text, its special tokens left out).
        {
            "match": "chat.\nuser\nPlease break the router",
            "fault": "error",
            "error_code": "internal",
        },
        {"match": "*", "reply": "chat"},
    ]
}
ROUTE = (
    '[[routes]]\nname = "auto"\nrouter = "router-mini"\n'
    'intents = {{ code = "{coder}", math = "mathy", chat = "chatty" }}\nfallback = "chatty"\n'
)


def _mock(work: Path, *args: str) -> MockIE:
    script = work / "router.json"
    script.write_text(json.dumps(SCRIPT))
    models = [a for m in MODELS for a in ("--model", f"{m}:qwen2:32768")]
    return MockIE(work, *models, "--script", str(script), *args).start()


def _config(mock: MockIE, coder: str = "coder") -> str:
    return f'[[engines]]\nsocket = "{mock.socket}"\n' + ROUTE.format(coder=coder)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MockIE, NeutrinoProc]]:
    work = tmp_path_factory.mktemp("routes")
    mock = _mock(work)
    server = NeutrinoProc(work, config=_config(mock))
    try:
        server.start(timeout=30)
        yield mock, server
    finally:
        server.stop()
        mock.stop()


def _ask(server: NeutrinoProc, text: str, **kw: Any) -> Any:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    return client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": text}], max_tokens=8, **kw
    )


def _answered_by(mock: MockIE, count: int) -> list[str]:
    """The models of the engine's last ``count`` queries, oldest first."""
    return [e["model"] for e in mock.events("query")[-count:]]


def test_the_router_names_the_intent_and_its_model_answers(
    stack: tuple[MockIE, NeutrinoProc],
) -> None:
    mock, server = stack
    raw = _ask(server, "Please sort a list of numbers in Python.")
    answer = raw.parse()
    assert answer.model == "coder" and answer.choices[0].message.content
    assert raw.headers["x-neutrino-route"] == "auto; intent=code; model=coder"
    assert _answered_by(mock, 2) == ["router-mini", "coder"]
    rid = raw.headers["x-request-id"]
    history = {h["id"]: h for h in server.history()}
    assert history[rid]["route"] == "auto; intent=code; model=coder"
    assert history[rid]["model"] == "coder" and history[rid]["state"] == "complete"
    assert history[rid + "-route"]["model"] == "router-mini"

    raw = _ask(server, "What is the integral of x squared?", stream=True)
    assert raw.headers["x-neutrino-route"] == "auto; intent=math; model=mathy"
    text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    assert text and _answered_by(mock, 2) == ["router-mini", "mathy"]


def test_an_unknown_intent_and_a_failed_router_fall_back(
    stack: tuple[MockIE, NeutrinoProc],
) -> None:
    mock, server = stack
    raw = _ask(server, "What is your favourite fruit?")
    assert raw.headers["x-neutrino-route"] == "auto; intent=-; model=chatty"
    assert _answered_by(mock, 2) == ["router-mini", "chatty"]
    raw = _ask(server, "Please break the router now.")
    assert raw.parse().model == "chatty"
    assert raw.headers["x-neutrino-route"] == "auto; intent=-; model=chatty"
    assert "its router router-mini failed" in server.log()


def test_the_alias_is_listed_and_other_apis_are_routed_too(
    stack: tuple[MockIE, NeutrinoProc],
) -> None:
    _, server = stack
    cards = {m["id"]: m for m in server.get_json("/v1/models")["data"]}
    assert cards["auto"]["route"] == {
        "router": "router-mini",
        "intents": {"code": "coder", "math": "mathy", "chat": "chatty"},
        "fallback": "chatty",
    }
    ask = [{"role": "user", "content": "sort a list for me"}]
    body = json.dumps({"model": "auto", "max_tokens": 8, "messages": ask})
    req = urllib.request.Request(
        server.base_url + "/v1/messages", data=body.encode(),
        headers={"Content-Type": "application/json", "anthropic-version": "2023-06-01"},
    )  # fmt: skip
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.headers["x-neutrino-route"] == "auto; intent=code; model=coder"
        assert json.loads(r.read())["model"] == "coder"
    code, err = server.post_json(
        "/v1/completions", json.dumps({"model": "auto", "prompt": "hi"}).encode()
    )
    assert code == 400 and "answers chats only" in err["error"]["message"]


def test_the_specialists_are_warmed_when_the_router_fires(tmp_path: Path) -> None:
    mock = _mock(tmp_path, "--memory-budget", str(10 << 30), "--load-ms", "300")
    server = NeutrinoProc(tmp_path, config=_config(mock))
    try:
        server.start(timeout=30, wait_engine=False)
        assert wait_for(lambda: server.status_code() == 200, timeout=10)
        raw = _ask(server, "Please sort a list.")
        assert raw.parse().model == "coder"
        # Each specialist was loaded once, the two not asked for without a request.
        assert wait_for(lambda: {"mathy", "chatty"} <= {e["model"] for e in mock.events("load")})
        loads = [e["model"] for e in mock.events("load")]
        assert loads.count("coder") == 1 and "coder-2" not in loads
        assert set(_answered_by(mock, 2)) == {"router-mini", "coder"}
    finally:
        server.stop()
        mock.stop()


def test_routes_replaced_under_load_fail_no_request(tmp_path: Path) -> None:
    mock = _mock(tmp_path, "--itl-ms", "5")
    server = NeutrinoProc(tmp_path, config=_config(mock))
    server.start(timeout=30)
    config = tmp_path / f"neutrino-{server.port}.toml"
    stop = threading.Event()
    failures: list[str] = []
    models: list[str] = []

    def load() -> None:
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
        while not stop.is_set():
            try:
                r = client.chat.completions.create(
                    model="auto", max_tokens=8,
                    messages=[{"role": "user", "content": "Please sort a list."}],
                )  # fmt: skip
                models.append(r.model)
            except openai.OpenAIError as exc:
                failures.append(repr(exc))

    workers = [threading.Thread(target=load) for _ in range(4)]
    for w in workers:
        w.start()
    try:
        assert wait_for(lambda: len(models) > 20, timeout=20)
        config.write_text(_config(mock, coder="coder-2"))
        status, answer = server.post_json("/neutrino/v1/reload", b"")
        assert status == 200, answer
        assert wait_for(lambda: models[-10:] == ["coder-2"] * 10, timeout=20)
    finally:
        stop.set()
        for w in workers:
            w.join(30)
        server.stop()
        mock.stop()
    assert failures == []
    assert models[0] == "coder" and models[-1] == "coder-2"
