from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.procs import MockIE, NeutrinoProc, serving

# Tests never reach the network; the SDKs must not pick up a real key or proxy.
os.environ.setdefault("OPENAI_API_KEY", "test-key")
for _var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
    os.environ.pop(_var, None)
os.environ["NO_PROXY"] = "127.0.0.1,localhost"

# Property tests explore new random examples on every local run; under CI they replay a
# fixed sequence, so a rare counterexample shows up on a developer's machine (and is then
# pinned as an explicit test) instead of failing one CI run in a hundred.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def mock_factory(tmp_path: Path) -> Iterator[Callable[..., MockIE]]:
    started: list[MockIE] = []

    def make(*args: str, name: str = "mock") -> MockIE:
        m = MockIE(tmp_path, *args, name=name).start()
        started.append(m)
        return m

    yield make
    for m in started:
        m.stop()


@pytest.fixture
def neutrino_factory(tmp_path: Path) -> Iterator[Callable[..., NeutrinoProc]]:
    started: list[NeutrinoProc] = []

    def make(*args: str, config: str | None = None, wait_engine: bool = True) -> NeutrinoProc:
        n = NeutrinoProc(tmp_path, *args, config=config)
        started.append(n)
        return n.start(wait_engine=wait_engine)

    yield make
    for n in started:
        n.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MockIE, NeutrinoProc]]:
    """One mock engine and one Neutrino connected to it, shared by a test module."""
    work = tmp_path_factory.mktemp("stack")
    mock = MockIE(work, "--capacity", "512").start()
    with serving(mock, NeutrinoProc(work, "--engine", mock.socket)) as server:
        yield mock, server
