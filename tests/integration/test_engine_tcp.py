"""An engine on TCP (as a node agent runs one): Neutrino's hello carries the engine's
token, and the engine answers no other. Real processes: mock_ie listening on loopback,
Neutrino configured with ``[[engines]] address`` and ``token_file``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.support.procs import MockIE, NeutrinoProc, free_port, wait_for

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MockIE, Path]]:
    work = tmp_path_factory.mktemp("tcp")
    token = work / "token"
    token.write_text("a-shared-secret\n")
    mock = MockIE(work, listen=f"127.0.0.1:{free_port()}", token_file=str(token))
    mock.start()
    try:
        yield mock, token
    finally:
        mock.stop()


def _config(mock: MockIE, token: Path) -> str:
    return f'[[engines]]\nname = "tcp"\naddress = "{mock.listen}"\ntoken_file = "{token}"\n'


def test_neutrino_answers_through_an_engine_on_tcp(
    engine: tuple[MockIE, Path], tmp_path: Path
) -> None:
    mock, token = engine
    proc = NeutrinoProc(tmp_path, config=_config(mock, token)).start()
    try:
        client = openai.OpenAI(base_url=proc.base_url + "/v1", api_key="x", max_retries=0)
        r = client.chat.completions.create(
            model="qwen2.5-mock", max_tokens=4, messages=[{"role": "user", "content": "hi"}]
        )
        assert r.choices[0].message.content and r.usage is not None
        assert r.usage.completion_tokens == 4
        (state,) = proc.get_json("/neutrino/v1/app_state")["engines"]
        assert state["address"] == mock.listen and state["connected"]
    finally:
        proc.stop()
    assert "a-shared-secret" not in proc.log()


def test_a_wrong_token_is_refused_and_said(engine: tuple[MockIE, Path], tmp_path: Path) -> None:
    mock, _ = engine
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-secret\n")
    proc = NeutrinoProc(tmp_path, config=_config(mock, wrong)).start(wait_engine=False)
    try:
        assert wait_for(lambda: "engine refused hello: unauthorized" in proc.log(), 10)
        (state,) = proc.get_json("/neutrino/v1/app_state")["engines"]
        assert not state["connected"]
        status, body = proc.post_json(
            "/v1/chat/completions",
            b'{"model": "qwen2.5-mock", "messages": [{"role": "user", "content": "hi"}]}',
        )
        assert status == 503, body
    finally:
        proc.stop()


def test_an_engine_on_tcp_will_not_start_without_a_token(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    mock = MockIE(tmp_path, listen=f"127.0.0.1:{free_port()}", token_file=str(empty))
    with pytest.raises(RuntimeError, match="exited with 2"):
        mock.start()
