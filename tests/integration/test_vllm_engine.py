"""The vLLM engine (``python -m neutrino.engines.vllm``) behind Neutrino: vLLM's CPU build
(``make vllm``: its own venv) serving a tiny Llama-architecture model with random weights
that the test writes (``tools/tiny_llama.py``; SmolLM2's vocabulary, so Neutrino's smollm2
tokenizer and template apply). Run by ``make test-vllm``; skipped where the vLLM venv is
missing. The engine's own counters (``--stats``) show vLLM holding no cancelled request.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest

from tests.support.procs import REPO, NeutrinoProc, wait_for

VLLM_PY = REPO / ".venv-vllm" / "bin" / "python"
MODEL = "smollm2-tiny-random"

pytestmark = [
    pytest.mark.skipif(not VLLM_PY.is_file(), reason="vLLM is not installed (make vllm)"),
    pytest.mark.timeout(300),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NeutrinoProc]:
    work = tmp_path_factory.mktemp("vllm")
    model = work / "model"
    tokenizer = REPO / ".venv" / "share" / "neutrino" / "tokenizers" / "smollm2" / "tokenizer.json"
    subprocess.run(
        [str(VLLM_PY), str(REPO / "tools" / "tiny_llama.py"), str(model), str(tokenizer)],
        check=True,
    )
    stats = work / "stats.json"
    command = [
        str(VLLM_PY), "-m", "neutrino.engines.vllm", "--model-dir", str(model),
        "--served-name", MODEL, "--max-model-len", "512", "--max-num-seqs", "4",
        "--stats", str(stats),
    ]  # fmt: skip
    env = {"PYTHONPATH": str(REPO), "VLLM_CPU_KVCACHE_SPACE": "1"}
    config = (
        f'[[engines]]\nname = "vllm"\ncommand = {json.dumps(command)}\n'
        f"env = {json.dumps(env).replace(':', ' =')}\nready_timeout_s = 240\n"
    )
    proc = NeutrinoProc(work, config=config)
    proc.stats_path = stats  # type: ignore[attr-defined]
    proc.start(timeout=240)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def client(server: NeutrinoProc) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)


def stats(server: NeutrinoProc) -> dict[str, Any]:
    path: Path = server.stats_path  # type: ignore[attr-defined]
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def test_chat_whole_and_streamed_are_the_same_tokens(client: openai.OpenAI) -> None:
    messages: Any = [{"role": "user", "content": "Hello there"}]
    whole = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=12, temperature=0,
        extra_body={"ignore_eos": True},
    )  # fmt: skip
    assert whole.usage is not None and whole.usage.completion_tokens == 12
    assert whole.usage.prompt_tokens > 5
    stream = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=12, temperature=0, stream=True,
        extra_body={"ignore_eos": True},
    )  # fmt: skip
    parts = [c.choices[0].delta.content or "" for c in stream if c.choices]
    assert "".join(parts) == whole.choices[0].message.content


def test_logprobs_are_the_samplers_own(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=6,
        temperature=0, logprobs=True, top_logprobs=3, extra_body={"ignore_eos": True},
    )  # fmt: skip
    content = r.choices[0].logprobs.content  # type: ignore[union-attr]
    assert content is not None and len(content) == 6
    for entry in content:
        tops = [t.logprob for t in entry.top_logprobs]
        assert len(tops) == 3 and tops == sorted(tops, reverse=True)
        assert entry.top_logprobs[0].token == entry.token  # greedy: the likeliest
        assert abs(tops[0] - entry.logprob) < 1e-3


def test_a_json_schema_answer_validates(client: openai.OpenAI) -> None:
    """A schema whose grammar leaves no room for whitespace: a random model's greedy
    choice would otherwise be whitespace until max_tokens (any schema of an object)."""
    schema = {"type": "string", "enum": ["red", "green", "blue"]}
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "A colour as JSON."}],
        max_tokens=20, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema}},
    )  # fmt: skip
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].message.content or ""), schema)


def test_a_choice_is_honoured(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Yes or no?"}], max_tokens=10,
        temperature=0, extra_body={"structured_outputs": {"choice": ["yes", "no"]}},
    )  # fmt: skip
    assert r.choices[0].message.content in ("yes", "no")


def test_a_client_disconnect_aborts_the_request_in_vllm(
    client: openai.OpenAI, server: NeutrinoProc
) -> None:
    before = stats(server)
    stream = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Go on"}], max_tokens=400,
        temperature=1.0, stream=True, extra_body={"ignore_eos": True},
    )  # fmt: skip
    for i, _chunk in enumerate(stream):
        if i == 3:
            break
    stream.close()
    assert wait_for(lambda: stats(server)["cancelled"] == before["cancelled"] + 1, timeout=10)
    assert wait_for(lambda: stats(server)["unfinished"] == 0, timeout=10), stats(server)
