"""The vLLM engine (``python -m neutrino.engines.vllm``) behind Neutrino: vLLM's CPU build
(``make vllm``: its own venv) serving a tiny Llama-architecture model with random weights
that the test writes (``tools/tiny_llama.py``; SmolLM2's vocabulary, so Neutrino's smollm2
tokenizer and template apply). Run by ``make test-vllm``; skipped where the vLLM venv is
missing. The engine's own counters (``--stats``) show vLLM holding no cancelled request.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest

from tests.support.procs import REPO, NeutrinoProc, free_port, wait_for
from tests.support.real_model import post_json
from tests.support.streams import read_stream

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


# ---------------------------------------------------------------- moved answers


class VllmEngineProc:
    """One ``neutrino.engines.vllm`` on a socket of its own, killed by the test."""

    def __init__(self, model: Path, work: Path, name: str) -> None:
        self.socket = str(work / f"{name}.sock")
        self.stats = work / f"{name}.stats.json"
        self.log = open(work / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop()
        argv = [
            str(VLLM_PY), "-m", "neutrino.engines.vllm", "--socket", self.socket,
            "--model-dir", str(model), "--served-name", MODEL, "--max-model-len", "512",
            "--max-num-seqs", "4", "--stats", str(self.stats),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(REPO), "VLLM_CPU_KVCACHE_SPACE": "1"}
        self.proc = subprocess.Popen(argv, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def queries(self) -> int:
        try:
            return int(json.loads(self.stats.read_text())["queries"])
        except (OSError, ValueError, KeyError):
            return 0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        self.log.close()


@pytest.fixture(scope="module")
def pair(
    model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[VllmEngineProc], NeutrinoProc]]:
    work = tmp_path_factory.mktemp("vllm-pair")
    engines = [VllmEngineProc(model, work, f"v{i}") for i in range(2)]
    config = "".join(f'[[engines]]\nname = "v{i}"\nsocket = "{e.socket}"\n'
                     for i, e in enumerate(engines))  # fmt: skip
    server = NeutrinoProc(work, config=config)
    try:
        server.start(timeout=60)
        assert wait_for(lambda: sum(1 for e in server.get_json("/neutrino/v1/app_state")[
            "engines"] if e["connected"]) == 2, timeout=240)  # fmt: skip
        yield engines, server
    finally:
        server.stop()
        for e in engines:
            e.stop()


def _stream(client: openai.OpenAI, pieces: list[str], **extra: Any) -> dict[str, Any]:
    chunks = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Tell me a long story."}],
        max_tokens=48, temperature=0, stream=True, logprobs=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True}, **extra,
    )  # fmt: skip
    return read_stream(chunks, pieces)


def test_a_greedy_answer_moved_from_a_killed_vllm_engine_goes_on(
    pair: tuple[list[VllmEngineProc], NeutrinoProc],
) -> None:
    """The answer so far is prefilled after the prompt on the other engine, which goes on:
    one answer, one id, the usage of an unbroken run; token for token as that run where
    the two engines' kernels agree (vLLM on CPU prefills and decodes with different
    kernels, so a near-tie may go the other way: docs/routing.md)."""
    engines, server = pair
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    whole = _stream(client, [])
    pieces: list[str] = []
    got: dict[str, Any] = {}
    before = [e.queries() for e in engines]
    reader = threading.Thread(target=lambda: got.update(_stream(client, pieces)))
    reader.start()
    assert wait_for(lambda: len(pieces) >= 10, timeout=60)
    busy = next(e for e, n in zip(engines, before, strict=True) if e.queries() > n)
    cut = len(pieces)
    busy.proc.send_signal(signal.SIGKILL)
    reader.join(120)
    assert len(got["ids"]) == 1 and got["usage"].completion_tokens == 48
    assert got["usage"].prompt_tokens == whole["usage"].prompt_tokens
    assert len(got["tokens"]) == 48 and got["tokens"][:cut] == whole["tokens"][:cut]
    assert got["tokens"] == whole["tokens"], "the moved answer differs from an unbroken run"
    failover = server.get_json("/neutrino/v1/app_state")["routing"]["failover"]
    assert failover["migrations"]["moved"]["lost"] == 1
