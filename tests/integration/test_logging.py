"""A real Neutrino with ``--log-format json``: every line it logs, from start to exit, is
one JSON object with its level, logger and message; neither a prompt nor an API key is in
it at the default level."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.support.procs import MockIE, NeutrinoProc, run_neutrino, wait_for

PROMPT = "the zebra prompt 7731"
KEY = "sk-never-logged-5512"


def test_json_log_is_one_object_a_line(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    server = neutrino_factory("--engine", mock_factory().socket, "--log-format", "json")
    body = json.dumps({"model": "qwen2.5-mock", "messages": [{"role": "user", "content": PROMPT}]})
    request = urllib.request.Request(
        server.base_url + "/v1/chat/completions",
        data=body.encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200
    assert server.post_json("/v1/chat/completions", b"{not json")[0] == 400
    assert server.stop() == 0
    lines = server.log_path.read_text().splitlines()
    assert len(lines) >= 3, lines
    for line in lines:
        doc = json.loads(line)
        assert isinstance(doc, dict), line
        assert doc["level"] in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"), line
        assert isinstance(doc["logger"], str) and isinstance(doc["message"], str), line
        assert doc["ts"].endswith("Z"), line
    messages = [json.loads(line)["message"] for line in lines]
    assert any(m.startswith("Neutrino listening on") for m in messages)
    assert "shutting down" in messages
    assert PROMPT not in server.log_path.read_text() and KEY not in server.log_path.read_text()


def test_a_log_file_that_cannot_be_opened_stops_the_start(tmp_path: Path) -> None:
    cfg = tmp_path / "n.toml"
    target = tmp_path / "missing" / "n.log"
    cfg.write_text(f'[logging]\nfile = "{target}"\n')
    done = run_neutrino(tmp_path, "--config", str(cfg))
    assert done.returncode == 1
    assert done.stderr == (
        f"neutrino: cannot open log file {target}: no such file or directory (set [logging] file)\n"
    )
    debug = run_neutrino(tmp_path, "--config", str(cfg), "--log-level", "debug")
    assert debug.returncode == 1
    assert debug.stderr.startswith("Traceback") and debug.stderr.endswith(done.stderr)


def test_default_start_warns_of_nothing_but_an_unknown_chat_model(
    mock_factory: Callable[..., MockIE], neutrino_factory: Callable[..., NeutrinoProc]
) -> None:
    """The default start (the embedded mock: chat, embedding, speech, transcription and
    detection models) logs no warning, to its stop: a model that does not generate text needs
    no chat family. A chat model that matches no family is still named, once."""
    quiet = neutrino_factory()
    assert wait_for(lambda: quiet.status_code() == 200)  # every model's assets loaded
    # SIGTERM to the whole process group, as Ctrl-C or a signal to `make run` sends it: the
    # embedded engine is Neutrino's to stop, so its going away is no surprise to log.
    assert quiet.stop(group=True) == 0
    log = quiet.log_path.read_text()
    assert "WARNING" not in log, log

    mock = mock_factory("--model", "acme-chat:qwen2:4096", "--model", "qwen2.5-mock:qwen2:4096")
    loud = neutrino_factory("--engine", mock.socket)
    assert wait_for(lambda: loud.status_code() == 200)
    assert loud.stop() == 0
    warnings = [line for line in loud.log_path.read_text().splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and "model acme-chat matches no known model family" in warnings[0]
