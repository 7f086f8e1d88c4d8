"""The vLLM engine (``python -m neutrino.engines.vllm``) behind Neutrino: vLLM's CPU build
(``make vllm``: its own venv) serving a tiny Llama-architecture model with random weights
that the test writes (``tools/tiny_llama.py``; SmolLM2's vocabulary, so Neutrino's smollm2
tokenizer and template apply). Run by ``make test-vllm``; skipped where the vLLM venv is
missing. The engine's own counters (``--stats``) show vLLM holding no cancelled request.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest

from tests.support.procs import REPO, NeutrinoProc, free_port, wait_for
from tests.support.real_model import post_json

VLLM_PY = REPO / ".venv-vllm" / "bin" / "python"
MODEL = "smollm2-tiny-random"

pytestmark = [
    pytest.mark.skipif(not VLLM_PY.is_file(), reason="vLLM is not installed (make vllm)"),
    pytest.mark.timeout(300),
]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny") / "model"
    tokenizer = REPO / ".venv" / "share" / "neutrino" / "tokenizers" / "smollm2" / "tokenizer.json"
    subprocess.run(
        [str(VLLM_PY), str(REPO / "tools" / "tiny_llama.py"), str(folder), str(tokenizer)],
        check=True,
    )
    return folder


@pytest.fixture(scope="module")
def server(model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NeutrinoProc]:
    work = tmp_path_factory.mktemp("vllm")
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
    schema: dict[str, Any] = {"type": "string", "enum": ["red", "green", "blue"]}
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


# ---------------------------------------------------------------- vLLM's own server


@pytest.fixture(scope="module")
def vllm_server(model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """vLLM's OpenAI server on the same model: an HTTP upstream in token mode."""
    port = free_port()
    log = open(tmp_path_factory.mktemp("vllm-serve") / "serve.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            str(VLLM_PY), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
            "--served-model-name", MODEL, "--host", "127.0.0.1", "--port", str(port),
            "--max-model-len", "512", "--max-num-seqs", "4", "--enforce-eager",
        ],
        env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"},
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_for(lambda: _up(url) or proc.poll() is not None, timeout=240)
        assert proc.poll() is None, "vLLM's server exited"
        yield url
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def test_vllms_own_server_as_a_token_mode_upstream(vllm_server: str, tmp_path: Path) -> None:
    config = f'[[engines]]\nname = "vllm-http"\nurl = "{vllm_server}/v1"\nmode = "tokens"\n'
    server = NeutrinoProc(tmp_path, config=config).start(timeout=60)
    try:
        (up,) = server.get_json("/neutrino/v1/app_state")["engines"]
        assert up["engine"].startswith("vLLM") and up["connected"] is True
        assert up["models"] == [{"name": MODEL, "context_length": 512}]
        oc = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
        messages: Any = [{"role": "user", "content": "Hello there"}]
        whole = oc.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=10, temperature=0,
            logprobs=True, top_logprobs=2, extra_body={"ignore_eos": True},
        )  # fmt: skip
        assert whole.usage is not None and whole.usage.completion_tokens == 10
        content = whole.choices[0].logprobs.content  # type: ignore[union-attr]
        assert content is not None and all(len(e.top_logprobs) == 2 for e in content)
        stream = oc.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=10, temperature=0, stream=True,
            extra_body={"ignore_eos": True},
        )  # fmt: skip
        parts = [c.choices[0].delta.content or "" for c in stream if c.choices]
        assert "".join(parts) == whole.choices[0].message.content
        # The same prompt ids straight to vLLM: the same ids back.
        ids = [1, 2, 3, 4, 5, 6, 7, 8]
        own = post_json(
            vllm_server + "/v1/completions",
            {"model": MODEL, "prompt": ids, "max_tokens": 8, "temperature": 0,
             "ignore_eos": True, "return_token_ids": True},
        )  # fmt: skip
        got = oc.completions.create(
            model=MODEL, prompt=ids, max_tokens=8, temperature=0, logprobs=0,
            extra_body={"ignore_eos": True},
        )  # fmt: skip
        assert got.usage is not None and got.usage.completion_tokens == 8
        assert len(own["choices"][0]["token_ids"]) == 8
        assert got.choices[0].text == own["choices"][0]["text"]
    finally:
        server.stop()
