"""A real Neutrino registers itself: with mock_sombrero (down at start, then up, then
restarted) and in a real etcd; its load reports follow its load (in flight, queued, an
estimated wait learnt from the requests that ended); SIGTERM deregisters it from both
before anything else, and it exits 0."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.procs import MockIE, NeutrinoProc, wait_for
from tests.support.registration import ETCD, NO_ETCD, Etcd, MockSombrero

pytestmark = [pytest.mark.timeout(60), pytest.mark.skipif(ETCD is None, reason=NO_ETCD)]

MODEL = "qwen2.5-mock"
PREFIX = "/neutrino/instances/"


@pytest.fixture
def balancer(tmp_path: Path) -> Iterator[MockSombrero]:
    mock = MockSombrero(tmp_path)
    yield mock
    mock.stop()


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[Etcd]:
    server = Etcd(tmp_path).start()
    yield server
    server.stop()


def _config(engine: str, balancer: MockSombrero, etcd: Etcd) -> str:
    return (
        f'[[engines]]\nsocket = "{engine}"\n'
        "[limits]\nmax_inflight = 2\n"
        f'[sombrero]\naddress = "{balancer.address}"\ninstance_id = "neutrino-e2e"\n'
        "report_interval_s = 0.1\nbackoff_initial_s = 0.05\nbackoff_max_s = 0.3\n"
        f'[discovery]\netcd = ["{etcd.url}"]\nlease_ttl_s = 5\n'
        "[shutdown]\ngrace_s = 5.0\n"
    )


def _load(server: NeutrinoProc, n: int) -> list[threading.Thread]:
    body = json.dumps(
        {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 25}
    ).encode()
    threads = [
        threading.Thread(target=server.post_json, args=("/v1/chat/completions", body))
        for _ in range(n)
    ]
    for t in threads:
        t.start()
    return threads


def test_registers_reports_load_and_deregisters_on_drain(
    mock_factory: Callable[..., MockIE],
    neutrino_factory: Callable[..., NeutrinoProc],
    balancer: MockSombrero,
    etcd: Etcd,
) -> None:
    mock = mock_factory("--itl-ms", "20", "--reply-tokens", "1000")
    # The balancer is down when the server starts: it serves all the same.
    server = neutrino_factory(config=_config(mock.socket, balancer, etcd))
    assert server.status_code() == 200
    assert wait_for(lambda: len(etcd.records(PREFIX)) == 1)
    balancer.start()
    assert wait_for(lambda: len(balancer.instances()) == 1)
    (entry,) = balancer.instances()
    record = entry["record"]
    assert record["instance_id"] == "neutrino-e2e"
    listeners = {x["protocol"]: x["address"] for x in record["listeners"]}
    assert listeners["http"] == f"127.0.0.1:{server.port}"
    assert {"grpc", "metrics"} <= set(listeners)
    models = {m["name"]: m for m in record["models"]}
    assert models[MODEL]["context_length"] == 32768 and "generate" in models[MODEL]["capabilities"]
    (stored,) = etcd.records(PREFIX).values()
    assert stored["instance_id"] == "neutrino-e2e" and stored["listeners"] == record["listeners"]

    # Load: six requests of ~0.5 s on two slots; the reports show them and a wait.
    for t in _load(server, 2):  # teaches the estimator a service time
        t.join(30)
    threads = _load(server, 6)

    def busy() -> bool:
        reports = balancer.events("report")
        last = reports[-1] if reports else {}
        return bool(
            last.get("inflight") == 2
            and last.get("queue_depth", 0) >= 2
            and last.get("estimated_wait_s", 0) > 0.2
        )

    assert wait_for(busy, 10), balancer.events("report")[-3:]
    for t in threads:
        t.join(30)
    assert wait_for(lambda: balancer.events("report")[-1].get("inflight", 0) == 0, 5)
    assert balancer.events("report")[-1].get("tokens_per_s", 0) > 0

    # The balancer restarts, its registry empty: the server registers again, same id.
    balancer.kill()
    balancer.start()
    assert wait_for(lambda: [i["record"]["instance_id"] for i in balancer.instances()]
                    == ["neutrino-e2e"], 10)  # fmt: skip

    assert server.proc is not None
    t0 = time.time()
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(15) == 0
    (gone,) = balancer.events("deregister")
    assert gone["instance_id"] == "neutrino-e2e" and gone["t"] >= t0
    assert balancer.instances() == []
    assert etcd.records(PREFIX) == {}
    assert "Traceback" not in server.log()
