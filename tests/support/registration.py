"""Real processes for the registration tests: mock_sombrero and etcd, and a fake Source."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import grpc

from neutrino.registration import etcd_api as api
from neutrino.registration.record import InstanceRecord, Listener, LoadReport, ServedModel
from neutrino.registration.wire import pb, pb_grpc
from tests.support.procs import REPO, _env, free_port

ETCD = shutil.which("etcd")
NO_ETCD = "the etcd binary is missing: `make test` installs Debian's etcd-server"


class FakeSource:
    """A Source whose load the test sets."""

    def __init__(self, instance_id: str = "test-instance-1") -> None:
        self.instance_id = instance_id
        self.inflight = 0
        self.queue_depth = 0
        self.tokens_per_s = 0.0
        self.estimated_wait_s = 0.0
        self.capacity = 8
        self.models: tuple[ServedModel, ...] = (
            ServedModel("qwen2.5-mock", 32768),
            ServedModel("embed-mock", 512, ("embed",)),
        )

    def record(self) -> InstanceRecord:
        return InstanceRecord(
            instance_id=self.instance_id,
            version="0.1.0",
            listeners=(Listener("http", "127.0.0.1:51055"), Listener("grpc", "127.0.0.1:50051")),
            models=self.models,
            capacity=self.capacity,
            workers=1,
            started_at=1700000000.0,
        )

    def load(self) -> LoadReport:
        return LoadReport(
            inflight=self.inflight,
            queue_depth=self.queue_depth,
            tokens_per_s=self.tokens_per_s,
            estimated_wait_s=self.estimated_wait_s,
            capacity=self.capacity,
        )


def _stop(proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
    if proc is not None and proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _post(url: str, body: dict[str, Any] | None = None, timeout: float = 5.0) -> Any:
    data = json.dumps(body or {}).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


class MockSombrero:
    """A real ``mock_sombrero`` process on fixed ports (the same after a restart)."""

    def __init__(self, workdir: Path, *args: str) -> None:
        self.port, self.http_port = free_port(), free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.http_url = f"http://127.0.0.1:{self.http_port}"
        self.args = list(args)
        self.events_path = workdir / f"sombrero-{self.port}.events.jsonl"
        self.log_path = workdir / f"sombrero-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *extra: str, timeout: float = 10.0) -> MockSombrero:
        argv = [sys.executable, "-m", "mocks.mock_sombrero", "--address", self.address]
        argv += ["--http-address", f"127.0.0.1:{self.http_port}"]
        argv += ["--events", str(self.events_path), *self.args, *extra]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, cwd=REPO, env=_env(), stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.instances()
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"mock_sombrero did not start: {self.log()}") from None
                time.sleep(0.05)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def instances(self) -> list[dict[str, Any]]:
        """The registry as the JSON page shows it."""
        with urllib.request.urlopen(self.http_url + "/instances", timeout=5) as r:
            found: list[dict[str, Any]] = json.loads(r.read())["instances"]
            return found

    def listed(self, model: str = "") -> list[Any]:
        """The registry as the List call answers it (RegistryEntry messages)."""
        with grpc.insecure_channel(self.address) as channel:
            reply = pb_grpc.SombreroStub(channel).List(pb.ListRequest(model=model), timeout=5)
            return list(reply.instances)

    def fail(self, count: int, method: str = "register") -> None:
        _post(f"{self.http_url}/fail?count={count}&method={method}")

    def forget(self, instance_id: str) -> bool:
        found: bool = _post(f"{self.http_url}/forget?instance_id={instance_id}")["found"]
        return found

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        if not self.events_path.exists():
            return []
        lines = self.events_path.read_text().splitlines()
        events = [json.loads(x) for x in lines if x.strip()]
        return [e for e in events if kind is None or e["event"] == kind]

    def kill(self) -> None:
        """SIGKILL: the balancer vanishes, its registry with it."""
        _stop(self.proc, signal.SIGKILL)

    def stop(self) -> None:
        _stop(self.proc)


class Etcd:
    """A real single-member etcd on free ports with its data under ``workdir``."""

    def __init__(self, workdir: Path) -> None:
        assert ETCD is not None, NO_ETCD
        self.workdir = workdir
        self.port, self.peer_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_dir = workdir / f"etcd-{self.port}"
        self.log_path = workdir / f"etcd-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wipe: bool = False, timeout: float = 15.0) -> Etcd:
        if wipe:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        peer = f"http://127.0.0.1:{self.peer_port}"
        argv = [str(ETCD), "--name", "default", "--data-dir", str(self.data_dir)]
        argv += ["--listen-client-urls", self.url, "--advertise-client-urls", self.url]
        argv += ["--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer]
        argv += ["--initial-cluster", f"default={peer}"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, cwd=self.workdir, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while not self._healthy():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"etcd did not start: {self.log()}")
            time.sleep(0.05)
        return self

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                return bool(json.loads(r.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def call(self, request: api.Request) -> dict[str, Any]:
        try:
            raw = _post(self.url + request.path, request.body)
        except urllib.error.HTTPError as e:
            return api.check(e.code, e.read().decode())
        return api.check(200, json.dumps(raw))

    def records(self, prefix: str) -> dict[str, Any]:
        """key -> decoded JSON value of every key under ``prefix``, with its lease."""
        answer = self.call(api.range_prefix(prefix))
        found: dict[str, Any] = {}
        for kv in answer.get("kvs", ()):
            (key, value), lease = api.range_values({"kvs": [kv]}).popitem(), kv.get("lease")
            found[key] = {**json.loads(value), "_lease": int(lease or 0)}
        return found

    def lease_ttl(self, lease: int) -> int:
        """The lease's remaining TTL (-1: none)."""
        return int(self.call(api.Request("/v3/lease/timetolive", {"ID": str(lease)}))["TTL"])

    def kill(self) -> None:
        _stop(self.proc, signal.SIGKILL)

    def stop(self) -> None:
        _stop(self.proc)
