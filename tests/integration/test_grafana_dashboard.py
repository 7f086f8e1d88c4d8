"""The Grafana dashboard (packaging/grafana/neutrino.json): the committed file is
tools/grafana_dashboard.py's output; promtool parses every PromQL expression in it (as
recording rules of a file generated from the dashboard); and a real Prometheus server
(Debian's ``prometheus``, which ``make test`` installs with promtool) scraping a live
Neutrino in front of mock_ie, under traffic of every kind the panels show, gives every
expression data: at least one series, each value a finite number."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.procs import MockIE, NeutrinoProc, free_port, serving, wait_for
from tests.support.tools import load_tool

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "packaging" / "grafana" / "neutrino.json"
MODEL = "qwen2.5-mock"
# What Grafana puts in for the dashboard's variables: every model, and a rate window of
# several scrapes (1 s apart here).
VARIABLES = {"$__rate_interval": "15s", "$model": ".*"}

needs_prometheus = pytest.mark.skipif(
    shutil.which("prometheus") is None or shutil.which("promtool") is None,
    reason="Debian's prometheus package (make test installs it)",
)


def _exprs() -> list[str]:
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    out = []
    for panel in doc["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            out.append(expr)
    return out


def test_the_file_is_the_generators_output() -> None:
    assert DASHBOARD.read_text(encoding="utf-8") == load_tool("grafana_dashboard").render()


def test_each_panel_reads_the_chosen_source_and_the_series_it_names_exist() -> None:
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    from neutrino.observability.metrics import HISTOGRAMS, PREFIX

    exported = {PREFIX + name for name, _, _ in HISTOGRAMS}
    for panel in doc["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["targets"], panel["title"]
    text = DASHBOARD.read_text()
    for name in ("time_to_first_token", "inter_token_latency", "e2e_request_latency",
                 "request_queue_time"):  # fmt: skip
        assert f"neutrino_{name}_seconds" in exported and f"neutrino_{name}_seconds_bucket" in text


@needs_prometheus
def test_promtool_parses_every_expression(tmp_path: Path) -> None:
    exprs = _exprs()
    assert len(exprs) >= 20
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr_{i}", "expr": e} for i, e in enumerate(exprs)]}]}  # fmt: skip
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(json.dumps(rules))  # JSON is YAML
    done = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in done.stdout


class _Prometheus:
    def __init__(self, work: Path, target: str) -> None:
        self.port = free_port()
        config = work / "prometheus.yml"
        config.write_text(json.dumps({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "neutrino",
                                "static_configs": [{"targets": [target]}]}],
        }))  # fmt: skip
        self._log = open(work / "prometheus.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={work / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            stdout=self._log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def query(self, expr: str) -> list[dict[str, Any]] | None:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(
            {"query": expr}
        )
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                doc = json.loads(r.read())
        except OSError:
            return None
        assert doc["status"] == "success", doc
        result: list[dict[str, Any]] = doc["data"]["result"]
        return result

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def _post(server: NeutrinoProc, body: dict[str, Any], leave_early: bool = False) -> None:
    req = urllib.request.Request(
        server.base_url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            if leave_early:
                r.read(64)  # the first event, then the client is gone
                return
            r.read()
    except urllib.error.HTTPError as e:
        e.read()


def _traffic(server: NeutrinoProc, stop: threading.Event) -> None:
    """Every kind the panels show: answers whole and streamed, a client that leaves mid
    stream (tokens after disconnect, a cancel frame), and refusals of two kinds."""
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "Tell me more."}],
            "max_tokens": 12}  # fmt: skip
    while not stop.is_set():
        _post(server, chat)
        _post(server, {**chat, "stream": True})
        _post(server, {**chat, "stream": True, "max_tokens": 200}, leave_early=True)
        _post(server, {**chat, "model": "no-such-model"})
        _post(server, {**chat, "temperature": "hot"})


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Prometheus]:
    work = tmp_path_factory.mktemp("grafana")
    mock = MockIE(work, "--itl-ms", "3", "--cancel-lag-tokens", "4").start()
    port = free_port()
    server = NeutrinoProc(work, "--engine", mock.socket, "--metrics-address", f"127.0.0.1:{port}")
    with serving(mock, server) as proc:
        prom = _Prometheus(work, f"127.0.0.1:{port}")
        stop = threading.Event()
        driver = threading.Thread(target=_traffic, args=(proc, stop), daemon=True)
        driver.start()
        try:
            ready = wait_for(lambda: bool(prom.query("neutrino_requests_total")), timeout=30)
            assert ready, (work / "prometheus.log").read_text()[-2000:]
            time.sleep(6)  # several scrapes under traffic, inside every rate window
            yield prom
        finally:
            stop.set()
            driver.join(30)
            prom.stop()


@needs_prometheus
@pytest.mark.parametrize("expr", _exprs())
def test_every_expression_has_data_from_a_live_server(scraped: _Prometheus, expr: str) -> None:
    result = scraped.query(expr)
    assert result, f"no series for {expr}"
    for series in result:
        value = float(series["value"][1])
        assert math.isfinite(value), (expr, series)
