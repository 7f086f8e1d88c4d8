"""The README's examples run as written (with the project's Python), and what it says
of limits agrees with the code: a new user copies them first."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from neutrino.config import LimitsConfig
from tests.support.procs import MockIE, NeutrinoProc, free_port

README = (Path(__file__).parents[2] / "README.md").read_text()
EXAMPLES = re.findall(r"```python\n(.*?)```", README, re.S)


def test_the_readme_has_its_python_examples() -> None:
    assert len(EXAMPLES) >= 2
    assert any("openai" in e for e in EXAMPLES) and any("grpc" in e for e in EXAMPLES)


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_each_python_example_runs(
    index: int,
    mock_factory: Callable[..., MockIE],
    neutrino_factory: Callable[..., NeutrinoProc],
) -> None:
    grpc_port, quic_port = free_port(), free_port()
    server = neutrino_factory(
        "--engine",
        mock_factory().socket,
        "--grpc-address",
        f"127.0.0.1:{grpc_port}",
        "--quic-address",
        f"127.0.0.1:{quic_port}",  # free for TCP, most likely for UDP too
    )
    code = EXAMPLES[index].replace("51055", str(server.port)).replace("50051", str(grpc_port))
    code = code.replace("51056", str(quic_port))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "the example printed nothing"


def test_what_the_readme_says_of_n_agrees_with_the_code() -> None:
    said = re.findall(r"`n` \(up to (\d+)", README)
    assert said == [str(LimitsConfig().max_n)]
    assert "`n` (1)" not in README


def test_the_readme_says_which_python_runs_the_examples() -> None:
    assert ".venv/bin/python" in README
    grpc_example = next(e for e in EXAMPLES if "grpc" in e)
    assert ".venv/bin/python" in grpc_example
