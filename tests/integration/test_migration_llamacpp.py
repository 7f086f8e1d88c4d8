"""A real model's answer survives its engine: two llama.cpp engines (SmolLM2) behind one
Neutrino; the engine making a greedy answer is killed (SIGKILL) in its middle, and the
answer goes on on the other, equal token for token to an unbroken run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.procs import REPO, NeutrinoProc, _env, wait_for
from tests.support.streams import read_stream

pytest.importorskip("llama_cpp", reason="the llamacpp extra is not installed")

MODEL = "smollm2-135m-instruct"
GGUF = Path(sys.prefix) / "share" / "neutrino" / "gguf" / "SmolLM2-135M-Instruct.Q4_1.gguf"
MESSAGES: Any = [{"role": "user", "content": "Tell me a long story about a lighthouse keeper."}]
TOKENS = 64

pytestmark = [
    pytest.mark.skipif(not GGUF.is_file(), reason=f"{GGUF} is missing (make install)"),
    pytest.mark.timeout(180),
]


class Engine:
    """``python -m neutrino.engines.llamacpp`` on a socket of its own, killed by the test."""

    def __init__(self, work: Path, name: str) -> None:
        self.socket = str(work / f"{name}.sock")
        self.stats = work / f"{name}.stats.json"
        self.log = open(work / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop()
        argv = [
            sys.executable, "-m", "neutrino.engines.llamacpp", "--gguf", str(GGUF),
            "--model", MODEL, "--socket", self.socket, "--slots", "2", "--threads", "1",
            "--ctx", "1024", "--chunk", "64", "--stats", str(self.stats),
        ]  # fmt: skip
        self.proc = subprocess.Popen(argv, cwd=REPO, env=_env(), stdout=self.log,
                                     stderr=subprocess.STDOUT)  # fmt: skip

    def running(self) -> int:
        try:
            return int(json.loads(self.stats.read_text())["running"])
        except (OSError, ValueError, KeyError):
            return 0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(20)
        self.log.close()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[list[Engine], NeutrinoProc]]:
    engines = [Engine(tmp_path, f"e{i}") for i in range(2)]
    config = "".join(f'[[engines]]\nname = "e{i}"\nsocket = "{e.socket}"\n'
                     for i, e in enumerate(engines))  # fmt: skip
    server = NeutrinoProc(tmp_path, config=config)
    try:
        server.start(timeout=120)
        assert wait_for(lambda: sum(1 for e in server.get_json("/neutrino/v1/app_state")[
            "engines"] if e["connected"]) == 2, timeout=60)  # fmt: skip
        yield engines, server
    finally:
        server.stop()
        for e in engines:
            e.stop()


def _stream(client: openai.OpenAI, pieces: list[str]) -> dict[str, Any]:
    chunks = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=TOKENS, temperature=0, stream=True,
        logprobs=True, stream_options={"include_usage": True},
    )  # fmt: skip
    return read_stream(chunks, pieces)


def test_a_greedy_answer_moved_mid_stream_equals_an_unbroken_run(
    pair: tuple[list[Engine], NeutrinoProc],
) -> None:
    engines, server = pair
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    whole = _stream(client, [])
    assert whole["usage"].completion_tokens == TOKENS  # long enough to be cut
    pieces: list[str] = []
    got: dict[str, Any] = {}
    reader = threading.Thread(target=lambda: got.update(_stream(client, pieces)))
    reader.start()
    assert wait_for(lambda: len(pieces) >= 12, timeout=60)  # a fifth of the way
    busy = next(e for e in engines if e.running())
    busy.proc.send_signal(signal.SIGKILL)
    reader.join(60)
    assert got["tokens"] == whole["tokens"] and got["text"] == whole["text"]
    assert len(got["ids"]) == 1 and got["usage"].completion_tokens == TOKENS
    assert got["usage"].prompt_tokens == whole["usage"].prompt_tokens
    failover = server.get_json("/neutrino/v1/app_state")["routing"]["failover"]
    assert failover["migrations"]["moved"]["lost"] == 1
    (entry,) = [e for e in server.history(5) if e.get("migrated_to")]
    assert entry["migrated_to"] == [f"e{1 - engines.index(busy)} (lost)"]
