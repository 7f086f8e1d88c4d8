"""The llama.cpp engine serving a folder of GGUF files (``--models-dir``) within a memory
budget that holds one of them, managed by Neutrino: requests alternate between two models
(SmolLM2 under two names), each switch unloads one real llama.cpp context and loads the
other, and no request fails. Concurrent requests for an unloaded model share one load."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.procs import NeutrinoProc

pytest.importorskip("llama_cpp", reason="the llamacpp extra is not installed")

GGUF = Path(sys.prefix) / "share" / "neutrino" / "gguf" / "SmolLM2-135M-Instruct.Q4_1.gguf"
MODELS = ("smollm2-alpha", "smollm2-beta")

pytestmark = [
    pytest.mark.skipif(not GGUF.is_file(), reason=f"{GGUF} is missing (make install)"),
    pytest.mark.timeout(240),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NeutrinoProc]:
    work = tmp_path_factory.mktemp("shelf")
    folder = work / "models"
    folder.mkdir()
    for name in MODELS:
        os.symlink(GGUF, folder / f"{name}.gguf")
    budget = GGUF.stat().st_size * 3 // 2  # room for one of the two
    command = [
        "python", "-m", "neutrino.engines.llamacpp", "--models-dir", str(folder),
        "--memory-budget", str(budget), "--slots", "2", "--threads", "1", "--ctx", "512",
    ]  # fmt: skip
    config = f'[[engines]]\nname = "shelf"\ncommand = {json.dumps(command)}\n'
    proc = NeutrinoProc(work, config=config)
    proc.start(timeout=120)
    try:
        yield proc
    finally:
        proc.stop()


def _states(server: NeutrinoProc) -> dict[str, str]:
    return {m["id"]: m["status"] for m in server.get_json("/v1/models")["data"]}


def test_two_models_alternate_within_a_budget_for_one(server: NeutrinoProc) -> None:
    assert _states(server) == {name: "unloaded" for name in MODELS}
    client = openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)

    async def ask(model: str) -> str:
        r = await client.chat.completions.create(
            model=model, max_tokens=6, temperature=0,
            messages=[{"role": "user", "content": "Name a colour."}],
        )  # fmt: skip
        return r.choices[0].message.content or ""

    async def run() -> list[str]:
        answers: list[str] = []
        for model in (*MODELS, *MODELS):
            answers += await asyncio.gather(*(ask(model) for _ in range(3)))
        answers += await asyncio.gather(*(ask(m) for m in MODELS * 2))
        return answers

    answers = asyncio.run(run())
    assert all(answers)  # every request answered
    assert len(set(answers[:6])) == 1  # the same weights under both names, greedy
    state: dict[str, Any] = server.get_json("/neutrino/v1/app_state")
    counts = state["model_lifecycle"]
    assert counts[MODELS[0]]["loads"] >= 2 and counts[MODELS[1]]["loads"] >= 2
    assert counts[MODELS[0]]["evictions"] >= 1
    assert list(_states(server).values()).count("loaded") == 1
    assert state["requests"]["finished"].get("failed", 0) == 0
