"""Inter-token latency as users read it: every gap between a request's deliveries of
tokens is one observation (as vLLM's histogram counts them), so a stall inside an answer
shows as the gap it was. mock_ie sends 30 tokens 5 ms apart, with a scripted 1 s pause
before the 11th; the scrape says 29 gaps, one of them above 0.75 s."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.procs import MockIE, NeutrinoProc, free_port, serving, wait_for

MODEL = "qwen2.5-mock"
TOKENS = 30


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NeutrinoProc, int]]:
    work = tmp_path_factory.mktemp("itl")
    script = work / "script.json"
    script.write_text(json.dumps({"rules": [{"match": "stall", "pause_ms": 1000,
                                             "pause_after": 10}]}))  # fmt: skip
    mock = MockIE(
        work, "--itl-ms", "5", "--reply-tokens", str(TOKENS), "--script", str(script)
    ).start()
    port = free_port()
    server = NeutrinoProc(work, "--engine", mock.socket, "--metrics-address", f"127.0.0.1:{port}")
    with serving(mock, server) as proc:
        wait_for(lambda: _scrape(port) is not None, timeout=10)
        yield proc, port


def _scrape(port: int) -> dict[tuple[str, str], float] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    out: dict[tuple[str, str], float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.startswith("neutrino_inter_token_latency") and s.labels.get("model") == MODEL:
                out[(s.name, s.labels.get("le", ""))] = s.value
    return out


def _chat(server: NeutrinoProc, content: str, stream: bool) -> bytes:
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}],
            "max_tokens": TOKENS, "stream": stream}  # fmt: skip
    req = urllib.request.Request(
        server.base_url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        data: bytes = r.read()
    return data


def _moved(before: dict[tuple[str, str], float], after: dict[tuple[str, str], float],
           name: str, le: str = "") -> float:  # fmt: skip
    key = (f"neutrino_inter_token_latency_seconds_{name}", le)
    return after.get(key, 0.0) - before.get(key, 0.0)


@pytest.mark.parametrize("stream", [False, True])
def test_a_stall_is_one_long_gap_among_short_ones(
    stack: tuple[NeutrinoProc, int], stream: bool
) -> None:
    server, port = stack
    before = _scrape(port)
    assert before is not None
    _chat(server, "please stall once", stream)
    after = _scrape(port)
    assert after is not None
    assert _moved(before, after, "count") == TOKENS - 1
    assert _moved(before, after, "bucket", "0.75") == TOKENS - 2  # all but the stall
    assert _moved(before, after, "bucket", "2.5") == TOKENS - 1
    assert 1.0 <= _moved(before, after, "sum") < 1.0 + TOKENS * 0.2


def test_without_a_stall_every_gap_is_short(stack: tuple[NeutrinoProc, int]) -> None:
    server, port = stack
    before = _scrape(port)
    assert before is not None
    _chat(server, "no pause here", stream=True)
    after = _scrape(port)
    assert after is not None
    assert _moved(before, after, "count") == TOKENS - 1
    assert _moved(before, after, "bucket", "0.75") == TOKENS - 1


def test_the_script_key_is_checked(tmp_path: Path) -> None:
    from mocks.mock_ie.script import Script, ScriptError

    bad = tmp_path / "s.json"
    bad.write_text(json.dumps({"rules": [{"match": "*", "pause_after": 3}]}))
    with pytest.raises(ScriptError, match="pause_after"):
        Script.load(bad)
