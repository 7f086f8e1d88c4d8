"""Prometheus metrics of a real server, scraped during and after real traffic: the
counters and histograms move as the requests did (streamed, cancelled, failed, queued),
tokens the engine sent after a client left are counted, promtool accepts the output, and
a client naming unknown models creates no series."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.procs import MockIE, NeutrinoProc, free_port, serving, wait_for

MODEL = "qwen2.5-mock"
LAG = 3  # tokens mock_ie still sends after a cancel


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


class Stack:
    def __init__(self, mock: MockIE, server: NeutrinoProc, metrics_port: int) -> None:
        self.mock = mock
        self.server = server
        self.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"

    def scrape_text(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=")
            return str(r.read().decode())

    def scrape(self) -> Samples:
        out: Samples = {}
        for fam in text_string_to_metric_families(self.scrape_text()):
            for s in fam.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    def chat(self, model: str = MODEL, **extra: object) -> tuple[int, dict[str, object]]:
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}], **extra}
        return self.server.post_json("/v1/chat/completions", json.dumps(body).encode())


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("metrics")
    mock = MockIE(work, "--itl-ms", "20", "--cancel-lag-tokens", str(LAG)).start()
    port = free_port()
    config = "[limits]\nmax_inflight = 2\nmax_queue = 16\n"
    server = NeutrinoProc(
        work, "--engine", mock.socket, "--metrics-address", f"127.0.0.1:{port}", config=config
    )
    with serving(mock, server):
        yield Stack(mock, server, port)


def _get(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def _requests(samples: Samples, outcome: str, model: str = MODEL, route: str = "chat") -> float:
    labels = {"model": model, "outcome": outcome, "protocol": "http", "route": route}
    return _get(samples, "neutrino_requests_total", **labels)


def _stream_then_leave(stack: Stack, chunks: int) -> None:
    """A streamed chat whose client reads ``chunks`` events and then closes its socket."""
    body = json.dumps(
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "max_tokens": 200,
        }
    ).encode()
    with socket.create_connection(("127.0.0.1", stack.server.port)) as sock:
        head = (
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        sock.sendall(head.encode() + body)
        seen = b""
        while seen.count(b"data: ") < chunks:
            got = sock.recv(65536)
            assert got, "the stream ended early"
            seen += got


def test_counters_and_histograms_follow_traffic(stack: Stack) -> None:
    before = stack.scrape()
    for _ in range(3):
        status, _ = stack.chat(max_tokens=5)
        assert status == 200
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "max_tokens": 4}  # fmt: skip
    req = urllib.request.Request(
        stack.server.base_url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.read().endswith(b"data: [DONE]\n\n")
    after = stack.scrape()
    assert _requests(after, "ok") - _requests(before, "ok") == 4
    for hist in (
        "neutrino_time_to_first_token_seconds",
        "neutrino_e2e_request_latency_seconds",
        "neutrino_request_queue_time_seconds",
        "neutrino_request_prefill_time_seconds",
    ):
        moved = _get(after, f"{hist}_count", model=MODEL) - _get(
            before, f"{hist}_count", model=MODEL
        )
        assert moved == 4, hist
    # Every gap between deliveries: mock_ie sends each token alone, 20 ms apart, so 5
    # tokens make 4 gaps, 4 tokens 3.
    gaps = _get(after, "neutrino_inter_token_latency_seconds_count", model=MODEL) - _get(
        before, "neutrino_inter_token_latency_seconds_count", model=MODEL
    )
    assert gaps == 3 * 4 + 3
    itl = _get(after, "neutrino_inter_token_latency_seconds_sum", model=MODEL) - _get(
        before, "neutrino_inter_token_latency_seconds_sum", model=MODEL
    )
    assert 15 * 0.015 < itl < 15 * 0.2
    gen = _get(after, "neutrino_generation_tokens_total", model=MODEL) - _get(
        before, "neutrino_generation_tokens_total", model=MODEL
    )
    assert gen == 3 * 5 + 4
    assert _get(after, "neutrino_prompt_tokens_total", model=MODEL) > _get(
        before, "neutrino_prompt_tokens_total", model=MODEL
    )
    assert _get(after, "neutrino_engine_connections", engine="engine0") == 2


def test_failures_are_counted_by_kind(stack: Stack) -> None:
    before = stack.scrape()
    status, _ = stack.chat(max_tokens=0)  # refused while parsing: no model label
    assert status == 400
    status, _ = stack.server.post_json("/v1/chat/completions", b"{not json")
    assert status == 400
    status, _ = stack.chat(max_tokens=10**6)  # past the model's context: the pipeline's
    assert status == 400
    after = stack.scrape()
    assert _requests(after, "bad_request", "") - _requests(before, "bad_request", "") == 2
    assert _requests(after, "context_length") - _requests(before, "context_length") == 1


def test_unknown_models_add_no_series(stack: Stack) -> None:
    before = stack.scrape()
    for i in range(20):
        status, _ = stack.chat(model=f"no-such-model-{i}")
        assert status == 404
    after = stack.scrape()
    names = {k for k in after if not k[0].startswith(("process_", "python_"))}
    assert names == {k for k in before if not k[0].startswith(("process_", "python_"))}
    assert _requests(after, "model_not_found", "") - _requests(before, "model_not_found", "") == 20


def test_cancelled_stream_counts_cancel_and_tokens_after_disconnect(stack: Stack) -> None:
    before = stack.scrape()
    _stream_then_leave(stack, chunks=3)
    assert wait_for(
        lambda: _requests(stack.scrape(), "cancelled") - _requests(before, "cancelled") == 1
    )
    stack.mock.wait_event("cancel", count=1)

    def engine(after: Samples, name: str) -> float:
        return _get(after, name, engine="engine0") - _get(before, name, engine="engine0")

    assert wait_for(lambda: engine(stack.scrape(), "neutrino_tokens_after_disconnect_total") == LAG)
    after = stack.scrape()
    assert engine(after, "neutrino_engine_cancel_frames_total") == 1
    cancels = [e for e in stack.mock.events("cancel")]
    assert len(cancels) >= 1


def test_gauges_during_traffic_and_queue(stack: Stack) -> None:
    """Four slow requests with two slots: while they run, two run and two wait."""
    before = stack.scrape()
    results: list[int] = []

    def slow() -> None:
        status, _ = stack.chat(max_tokens=40)
        results.append(status)

    threads = [threading.Thread(target=slow) for _ in range(4)]
    for t in threads:
        t.start()
    seen: list[tuple[float, float]] = []

    def busy() -> bool:
        now = stack.scrape()
        seen.append((_get(now, "neutrino_num_requests_running"),
                     _get(now, "neutrino_num_requests_waiting")))  # fmt: skip
        return seen[-1] == (2.0, 2.0)

    assert wait_for(busy, timeout=5), seen
    for t in threads:
        t.join(30)
    assert results == [200] * 4
    after = stack.scrape()
    assert _get(after, "neutrino_num_requests_running") == 0
    assert _get(after, "neutrino_num_requests_waiting") == 0
    queue_sum = _get(after, "neutrino_request_queue_time_seconds_sum", model=MODEL) - _get(
        before, "neutrino_request_queue_time_seconds_sum", model=MODEL
    )
    assert queue_sum > 0.5  # two of them waited for a ~0.8 s request to end


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian prometheus)")
def test_promtool_accepts_the_exposition(stack: Stack, tmp_path: Path) -> None:
    stack.chat(max_tokens=3)
    text = stack.scrape_text()
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_metrics_listener_is_its_own(stack: Stack) -> None:
    """/metrics is on the metrics address, not on the API's."""
    status = 0
    try:
        urllib.request.urlopen(stack.server.base_url + "/metrics", timeout=5)
    except urllib.error.HTTPError as e:
        status = e.code
    assert status == 404
