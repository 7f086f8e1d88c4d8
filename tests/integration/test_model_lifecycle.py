"""Models loaded on demand: a real mock_ie that holds only as many models as its memory
budget allows (``--memory-budget``: every model starts unloaded, a load takes time and
fails past the budget, a query of a model not loaded is refused), and Neutrino deciding
what it holds: lazy loads shared by concurrent requests, least-recently-used eviction,
pins, the admin routes, /v1/models' states and the metrics."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.procs import MockIE, NeutrinoProc, free_port, wait_for

GIB = 1 << 30
MODELS = ["alpha:qwen2", "beta:qwen2", "gamma:qwen2"]


def _mock(tmp_path: Path, budget_models: int) -> MockIE:
    args = [a for m in MODELS for a in ("--model", m)]
    args += ["--memory-budget", str(budget_models * GIB), "--model-bytes", str(GIB)]
    return MockIE(tmp_path, *args, "--load-ms", "150", "--ttft-ms", "30").start()


def _neutrino(
    tmp_path: Path, mock: MockIE, pinned: list[str] | None = None, *args: str
) -> NeutrinoProc:
    config = f'[[engines]]\nname = "mem"\nsocket = "{mock.socket}"\n'
    if pinned:
        config += f"pinned = {json.dumps(pinned)}\n"
    return NeutrinoProc(tmp_path, *args, config=config).start()


async def _ask(client: aiohttp.ClientSession, model: str, n: int = 4) -> dict[str, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": n}
    async with client.post("/v1/chat/completions", json=body) as r:
        assert r.status == 200, await r.text()
        answer: dict[str, Any] = await r.json()
        return answer


def _post(server: NeutrinoProc, path: str) -> Any:
    req = urllib.request.Request(
        server.base_url + path, data=b"{}", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def _states(server: NeutrinoProc) -> dict[str, str]:
    return {m["id"]: m["status"] for m in server.get_json("/v1/models")["data"]}


def test_alternating_models_over_a_budget_for_one(tmp_path: Path) -> None:
    """Two models, room for one: every request is answered; each switch evicts the other
    model first (never two loaded), and concurrent requests share one load."""
    mock = _mock(tmp_path, budget_models=1)
    metrics_port = free_port()
    server = _neutrino(tmp_path, mock, None, "--metrics-address", f"127.0.0.1:{metrics_port}")
    try:
        assert _states(server) == {"alpha": "unloaded", "beta": "unloaded", "gamma": "unloaded"}

        async def run() -> None:
            async with aiohttp.ClientSession(server.base_url) as client:
                for model in ("alpha", "beta", "alpha", "beta"):
                    await asyncio.gather(*(_ask(client, model) for _ in range(5)))
                # Both at once: they take turns, none fails.
                await asyncio.gather(*(_ask(client, m) for m in ["alpha", "beta"] * 4))

        asyncio.run(run())
        loads = mock.events("load")
        assert all("error" not in e for e in loads), loads
        assert [e["model"] for e in loads][:4] == ["alpha", "beta", "alpha", "beta"]
        assert max(e["peak"] for e in loads) == 1  # never two at once
        assert len(mock.events("unload")) >= 3  # each switch evicted the other
        refused = [e for e in mock.events("finish") if e["finish_reason"] == "error"]
        assert refused == []  # no query reached the engine for a model it did not hold
        lifecycle = server.get_json("/neutrino/v1/app_state")["model_lifecycle"]
        assert lifecycle["alpha"]["loads"] >= 2 and lifecycle["alpha"]["evictions"] >= 1
        assert lifecycle["alpha"]["load_seconds"] > 0
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        loads = lifecycle["alpha"]["loads"]
        assert f'neutrino_model_loads_total{{model="alpha"}} {float(loads)}' in text
        assert 'neutrino_model_evictions_total{model="beta"}' in text
        assert 'neutrino_model_load_seconds_total{model="alpha"}' in text
    finally:
        server.stop()
        mock.stop()


def test_a_pinned_model_is_loaded_at_once_and_never_evicted(tmp_path: Path) -> None:
    mock = _mock(tmp_path, budget_models=2)
    server = _neutrino(tmp_path, mock, pinned=["alpha"])
    try:
        assert wait_for(lambda: _states(server)["alpha"] == "loaded", timeout=10)

        async def run() -> None:
            async with aiohttp.ClientSession(server.base_url) as client:
                for model in ("beta", "gamma", "beta", "gamma", "alpha"):
                    await _ask(client, model)

        asyncio.run(run())
        assert "alpha" not in [e["model"] for e in mock.events("unload")]
        assert [e["model"] for e in mock.events("load")] == [
            "alpha",
            "beta",
            "gamma",
            "beta",
            "gamma",
        ]
        assert _states(server) == {"alpha": "loaded", "beta": "unloaded", "gamma": "loaded"}
    finally:
        server.stop()
        mock.stop()


def test_the_admin_routes_load_and_unload(tmp_path: Path) -> None:
    mock = _mock(tmp_path, budget_models=2)
    server = _neutrino(tmp_path, mock)
    try:
        card = _post(server, "/neutrino/v1/models/beta/load")
        assert card["id"] == "beta" and card["status"] == "loaded"
        assert card["engines"] == [{"name": "mem", "status": "loaded"}]
        assert _states(server)["beta"] == "loaded"
        assert _post(server, "/neutrino/v1/models/beta/unload")["status"] == "unloaded"
        code, body = server.post_json("/neutrino/v1/models/nope/load", b"{}")
        assert code == 404 and body["error"]["code"] == "model_not_found"
    finally:
        server.stop()
        mock.stop()


def test_a_model_that_cannot_fit_beside_the_pins_is_refused_clearly(tmp_path: Path) -> None:
    mock = _mock(tmp_path, budget_models=1)
    server = _neutrino(tmp_path, mock, pinned=["alpha"])
    try:
        assert wait_for(lambda: _states(server)["alpha"] == "loaded", timeout=10)
        code, body = server.post_json(
            "/v1/chat/completions",
            json.dumps({"model": "beta", "messages": [{"role": "user", "content": "hi"}]}).encode(),
        )
        assert code == 503, body
        assert "pinned" in body["error"]["message"]
    finally:
        server.stop()
        mock.stop()
