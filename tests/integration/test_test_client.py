"""The test_client console script against a real Neutrino and mock_ie, over every protocol:
its --json report's counts must match the server's own history (requests, input and output
tokens) and its Prometheus counters; open loop, datasets, errors by kind, --show-output."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from neutrino.loadgen.schedule import poisson_arrivals
from tests.support.procs import (
    REPO,
    MockIE,
    NeutrinoProc,
    free_port,
    free_udp_port,
    serving,
    wait_for,
)

MODEL = "qwen2.5-mock"  # the first model mock_ie lists: test_client's default
SCRIPT = Path(sys.executable).with_name("test_client")
HAS_QUIC = importlib.util.find_spec("neutrino.frontends.quic") is not None


@dataclass
class Stack:
    server: NeutrinoProc
    grpc: str
    quic: str | None
    metrics_url: str

    def history(self) -> tuple[int, list[dict[str, Any]]]:
        got = self.server.get_json("/neutrino/v1/history?limit=1000")
        return got["total"], got["data"]

    def counters(self) -> dict[str, float]:
        """requests_total by outcome, and the token counters, for MODEL (every protocol)."""
        with urllib.request.urlopen(self.metrics_url, timeout=10) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.labels.get("model") != MODEL:
                    continue
                if s.name == "neutrino_requests_total":
                    key = "requests_" + s.labels["outcome"]
                elif s.name in ("neutrino_prompt_tokens_total", "neutrino_generation_tokens_total"):
                    key = s.name
                else:
                    continue
                out[key] = out.get(key, 0.0) + s.value
        return out


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("test_client")
    mock = MockIE(work, "--itl-ms", "2").start()  # tokens apart: streams of many chunks
    grpc, metrics = f"127.0.0.1:{free_port()}", free_port()
    args = ["--engine", mock.socket, "--grpc-address", grpc,
            "--metrics-address", f"127.0.0.1:{metrics}"]  # fmt: skip
    quic = f"127.0.0.1:{free_udp_port()}" if HAS_QUIC else None
    if quic is not None:
        args += ["--quic-address", quic]
    server = NeutrinoProc(work, *args)
    with serving(mock, server):
        yield Stack(server, grpc, quic, f"http://127.0.0.1:{metrics}/metrics")


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    report: dict[str, Any]

    @property
    def summary(self) -> dict[str, Any]:
        s: dict[str, Any] = self.report["summary"]
        return s


def run_client(stack: Stack, tmp_path: Path, *args: str, protocol: str = "http") -> Run:
    """Run the console script to its end against ``stack``."""
    assert SCRIPT.exists(), f"{SCRIPT} missing: install the package (pip install -e .)"
    out = tmp_path / f"report-{random.randrange(1 << 30)}.json"
    target = {
        "http": ["--url", stack.server.base_url],
        "anthropic": ["--url", stack.server.base_url],
        "grpc": ["--grpc-address", stack.grpc],
        "h3": ["--quic-address", stack.quic or ""],
    }[protocol]
    argv = [str(SCRIPT), "--protocol", protocol, *target, "--json", str(out), *args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    report = json.loads(out.read_text()) if out.exists() else {}
    return Run(proc.returncode, proc.stdout, proc.stderr, report)


def since(stack: Stack, total_before: int) -> list[dict[str, Any]]:
    total, data = stack.history()
    new = total - total_before
    assert 0 <= new <= len(data)
    return data[:new]


def assert_matches_server(
    stack: Stack, run: Run, before: int, metrics_before: dict[str, float]
) -> None:
    """The report's counts are the server's: its history of the run's requests, and the
    change of its Prometheus counters."""
    s = run.summary
    entries = since(stack, before)
    done = [e for e in entries if e["state"] == "complete"]
    assert len(done) == s["completed"]
    assert len(entries) - len(done) == s["failed"]
    assert sum(e["prompt_tokens"] for e in done) == s["total_input_tokens"]
    assert sum(e["completion_tokens"] for e in done) == s["total_output_tokens"]
    after = stack.counters()

    def delta(key: str) -> float:
        return after.get(key, 0.0) - metrics_before.get(key, 0.0)

    assert delta("requests_ok") == s["completed"]
    assert delta("neutrino_prompt_tokens_total") == s["total_input_tokens"]
    assert delta("neutrino_generation_tokens_total") == s["total_output_tokens"]


def measured(run: Run, stack: Stack, before: int, metrics: dict[str, float], n: int) -> None:
    assert run.rc == 0, run.stderr
    s = run.summary
    assert (s["completed"], s["failed"], s["errors"]) == (n, 0, {})
    assert s["requests_without_usage"] == 0
    assert s["total_output_tokens"] > 0 and s["total_input_tokens"] > 0
    assert s["e2el_ms"]["median"] > 0 and s["request_throughput"] > 0
    assert_matches_server(stack, run, before, metrics)
    assert "Successful requests" in run.stdout


PROTOCOLS = ["http", "grpc", "anthropic", "h3"]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "no-stream"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_each_protocol_matches_the_server(
    stack: Stack, tmp_path: Path, protocol: str, stream: bool
) -> None:
    if protocol == "h3" and stack.quic is None:
        pytest.skip("this checkout has no HTTP/3 listener (neutrino/frontends/quic)")
    before, metrics = stack.history()[0], stack.counters()
    flag = "--stream" if stream else "--no-stream"
    lengths = ["--input-len", "40", "--input-len-range", "0.5", "--output-len", "20"]
    run = run_client(stack, tmp_path, "-n", "8", "-c", "3", flag, *lengths, protocol=protocol)
    measured(run, stack, before, metrics, 8)
    s = run.summary
    assert run.report["config"]["model"] == MODEL
    if stream:  # TTFT, TPOT and ITL are measured on streamed answers
        assert s["ttft_ms"]["p99"] >= s["ttft_ms"]["median"] > 0
        assert s["itl_samples"] > 0 and s["tpot_ms"] is not None
        assert s["ttft_ms"]["median"] <= s["e2el_ms"]["median"]
    else:
        assert s["ttft_ms"] is None and s["tpot_ms"] is None and s["itl_ms"] is None
        assert "measured on streamed answers only" in run.stdout


def test_open_loop_follows_its_seeded_schedule(stack: Stack, tmp_path: Path) -> None:
    before, metrics = stack.history()[0], stack.counters()
    run = run_client(stack, tmp_path, "--rate", "40", "-n", "15", "--seed", "11",
                      "--json-requests", "--output-len", "8")  # fmt: skip
    measured(run, stack, before, metrics, 15)
    records = sorted(run.report["requests"], key=lambda r: r["index"])
    planned = list(poisson_arrivals(40.0, random.Random(11), count=15))
    assert [r["index"] for r in records] == list(range(15))
    for record, at in zip(records, planned, strict=True):
        assert record["start"] >= at - 0.005  # never before its arrival time
    assert run.summary["max_schedule_lag_ms"] >= 0


def test_open_loop_for_a_duration(stack: Stack, tmp_path: Path) -> None:
    before, metrics = stack.history()[0], stack.counters()
    run = run_client(stack, tmp_path, "--rate", "20", "--duration", "1", "--output-len", "8")
    assert run.rc == 0, run.stderr
    assert run.report["config"]["requests"] is None
    assert run.summary["completed"] > 0
    assert_matches_server(stack, run, before, metrics)


def test_dataset_conversations(stack: Stack, tmp_path: Path) -> None:
    data = tmp_path / "chats.jsonl"
    lines = [
        {"messages": [{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": "Name a colour."}], "max_tokens": 3},
        {"prompt": "Tell me a story about a lighthouse.", "max_tokens": 5},
        {"messages": [{"role": "user", "content": "Hi"},
                      {"role": "assistant", "content": "Hello!"},
                      {"role": "user", "content": "Count to ten."}], "max_tokens": 7},
    ]  # fmt: skip
    data.write_text("".join(json.dumps(x) + "\n" for x in lines))
    before, metrics = stack.history()[0], stack.counters()
    run = run_client(stack, tmp_path, "--dataset", str(data), "-n", "6", "-c", "2",
                      "--ignore-eos", "--json-requests")  # fmt: skip
    measured(run, stack, before, metrics, 6)
    # Each conversation twice, in turn; --ignore-eos: exactly max_tokens each.
    assert run.summary["total_output_tokens"] == 2 * (3 + 5 + 7)
    by_index = {r["index"]: r for r in run.report["requests"]}
    for i in range(3):
        assert by_index[i]["prompt_tokens"] == by_index[i + 3]["prompt_tokens"]


@pytest.mark.parametrize(
    ("protocol", "kind"),
    [("http", "http 404 model_not_found"), ("grpc", "grpc NOT_FOUND"),
     ("anthropic", "http 404 not_found_error")],
)  # fmt: skip
def test_errors_by_kind(stack: Stack, tmp_path: Path, protocol: str, kind: str) -> None:
    before = stack.history()[0]
    run = run_client(stack, tmp_path, "--model", "no-such-model", "-n", "5", "-c", "2",
                      protocol=protocol)  # fmt: skip
    assert run.rc == 1
    s = run.summary
    assert (s["completed"], s["failed"]) == (0, 5)
    assert list(s["errors"]) == [kind] and s["errors"][kind]["count"] == 5
    assert "no-such-model" in s["errors"][kind]["message"]
    assert "Errors by kind" in run.stdout and kind in run.stdout
    entries = since(stack, before)
    assert [e["error"]["kind"] for e in entries] == ["model_not_found"] * 5


def test_connection_errors_and_timeouts(stack: Stack, tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    run = run_client(stack, tmp_path, "--url", closed, "--model", MODEL, "-n", "3")
    assert run.rc == 1
    assert run.summary["errors"]["connection"]["count"] == 3
    nothing = run_client(stack, tmp_path, "--url", closed, "-n", "3")  # no model to list
    assert nothing.rc == 1 and nothing.report == {}
    assert "cannot list the server's models at http://127.0.0.1:" in nothing.stderr
    assert ": connection: " in nothing.stderr
    late = run_client(stack, tmp_path, "--model", MODEL, "-n", "3", "--timeout", "0.000001")
    assert late.rc == 1
    assert late.summary["errors"]["timeout"]["count"] == 3


def test_show_output_prints_the_answer(stack: Stack, tmp_path: Path) -> None:
    prompt = "Tell me a story about a lighthouse."
    run = run_client(stack, tmp_path, "--show-output", "-n", "1", "-c", "1", "--prompt",
                      prompt, "--output-len", "30")  # fmt: skip
    assert run.rc == 0, run.stderr
    body = {"model": MODEL, "messages": [{"role": "user", "content": prompt}], "max_tokens": 30}
    status, answer = stack.server.post_json("/v1/chat/completions", json.dumps(body).encode())
    assert status == 200
    text = answer["choices"][0]["message"]["content"]
    assert text and run.stdout.startswith(text + "\n")
    assert run.summary["total_output_tokens"] == answer["usage"]["completion_tokens"]


def test_bad_command_lines(stack: Stack, tmp_path: Path) -> None:
    for args in (["--rate", "0"], ["--prompt", "x", "--dataset", "y"], ["--protocol", "smtp"],
                 ["--protocol", "anthropic", "--ignore-eos"], ["--url", "ftp://x"]):  # fmt: skip
        run = run_client(stack, tmp_path, *args)
        assert run.rc == 2 and run.report == {} and "test_client: error:" in run.stderr
    missing = run_client(stack, tmp_path, "--dataset", str(tmp_path / "nope.jsonl"))
    assert missing.rc == 2 and "nope.jsonl" in missing.stderr


def test_ctrl_c_stops_and_reports(stack: Stack, tmp_path: Path) -> None:
    """SIGINT: nothing more is started, requests in flight are cancelled, and the report of
    what finished is printed and written (exit 130)."""
    out = tmp_path / "interrupted.json"
    before = stack.history()[0]
    argv = [str(SCRIPT), "--url", stack.server.base_url, "--rate", "20", "--duration", "60",
            "--json", str(out)]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: stack.history()[0] - before >= 3, timeout=30)
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    summary = json.loads(out.read_text())["summary"]
    assert summary["completed"] >= 3 and summary["failed"] == 0
    assert summary["duration_s"] < 60
    assert "Successful requests" in stdout


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A server that wants an API key."""
    work = tmp_path_factory.mktemp("test_client_keys")
    mock = MockIE(work).start()
    grpc, metrics = f"127.0.0.1:{free_port()}", free_port()
    args = ["--engine", mock.socket, "--grpc-address", grpc,
            "--metrics-address", f"127.0.0.1:{metrics}"]  # fmt: skip
    if HAS_QUIC:
        args += ["--quic-address", f"127.0.0.1:{free_udp_port()}"]
    server = NeutrinoProc(work, *args, config=f'[auth]\napi_keys = ["{KEY}"]\n')
    with serving(mock, server):
        yield Stack(server, grpc, None, f"http://127.0.0.1:{metrics}/metrics")


KEY = "sk-test-client-0123456789"


@pytest.mark.parametrize(
    ("protocol", "refused"),
    [("http", "http 401"), ("grpc", "grpc UNAUTHENTICATED"), ("anthropic", "http 401")],
)
def test_api_key(keyed: Stack, tmp_path: Path, protocol: str, refused: str) -> None:
    ok = run_client(keyed, tmp_path, "--api-key", KEY, "-n", "3", protocol=protocol)
    assert ok.rc == 0, ok.stderr
    assert ok.summary["completed"] == 3 and ok.report["config"]["api_key"] == "set"
    assert KEY not in json.dumps(ok.report) and KEY not in ok.stdout
    bad = run_client(keyed, tmp_path, "--model", MODEL, "-n", "3", protocol=protocol)
    assert bad.rc == 1 and bad.summary["failed"] == 3
    ((kind, tally),) = bad.summary["errors"].items()
    assert kind.startswith(refused) and tally["count"] == 3
