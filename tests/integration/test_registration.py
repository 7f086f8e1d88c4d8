"""Registration against real servers: SombreroRegistrar with a real mock_sombrero process,
EtcdRegistrar with a real etcd process (skipped only where the etcd binary is missing).

The registrars run in the test's event loop with a FakeSource whose load the test sets;
what the balancer and etcd hold is read back through their own interfaces (List, the JSON
page, the events file; etcd's range and lease calls).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from neutrino.config import DiscoveryConfig, SombreroConfig
from neutrino.registration import etcd_api as api
from neutrino.registration.etcd import EtcdRegistrar
from neutrino.registration.record import ServedModel
from neutrino.registration.sombrero import SombreroRegistrar
from neutrino.registration.wire import record_from_pb, report_from_pb
from tests.support.procs import free_port
from tests.support.registration import ETCD, NO_ETCD, Etcd, FakeSource, MockSombrero

pytestmark = pytest.mark.timeout(30)

PREFIX = "/neutrino/instances/"


async def until(pred: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def _snap(registrar: SombreroRegistrar) -> dict[str, Any]:
    return registrar.snapshot()


def sombrero_cfg(address: str) -> SombreroConfig:
    return SombreroConfig(
        address=address, report_interval_s=0.1, backoff_initial_s=0.05, backoff_max_s=0.3
    )


@pytest.fixture
def balancer(tmp_path: Path) -> Iterator[MockSombrero]:
    mock = MockSombrero(tmp_path)
    yield mock
    mock.stop()


async def _started(
    registrar: SombreroRegistrar, balancer: MockSombrero, source: FakeSource
) -> SombreroRegistrar:
    registrar.start()
    assert await until(lambda: _snap(registrar)["registered"]), registrar.snapshot()
    assert await until(
        lambda: [e.record.instance_id for e in balancer.listed()] == [source.instance_id]
    )
    return registrar


def ours_at_warning(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Neutrino's own log records at WARNING or above. grpc.aio's process-wide poller may
    log an asyncio error for an event loop an earlier test closed; that is not the
    registrar's."""
    return [
        r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("neutrino")
    ]


async def test_balancer_down_at_start_then_up(
    balancer: MockSombrero, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "neutrino.registration")
    source = FakeSource()
    registrar = SombreroRegistrar(sombrero_cfg(balancer.address), source)
    began = time.monotonic()
    registrar.start()
    assert time.monotonic() - began < 0.1  # the server's start does not wait
    try:
        assert await until(lambda: _snap(registrar)["attempts"] >= 4)
        snap = _snap(registrar)
        assert not snap["registered"] and "UNAVAILABLE" in snap["last_error"]
        balancer.start("--fail-register", "2")  # up, and refuses twice more
        assert await until(lambda: _snap(registrar)["registered"])
        assert [e["event"] for e in balancer.events()][:3] == ["fail", "fail", "register"]
        (entry,) = balancer.listed()
        assert record_from_pb(entry.record) == source.record()
        assert balancer.listed("embed-mock") and not balancer.listed("other-model")
        page = balancer.instances()
        assert page[0]["record"]["instance_id"] == source.instance_id
    finally:
        await registrar.stop()
    warnings = ours_at_warning(caplog)
    assert len(warnings) == 1, [r.getMessage() for r in warnings]  # not one per retry
    assert "cannot register" in warnings[0].getMessage() and warnings[0].exc_info is None
    assert any("registered with" in r.getMessage() for r in caplog.records)


async def test_balancer_restart_reregisters_the_same_id(balancer: MockSombrero) -> None:
    balancer.start()
    source = FakeSource("restart-me")
    registrar = await _started(
        SombreroRegistrar(sombrero_cfg(balancer.address), source), balancer, source
    )
    try:
        balancer.kill()  # the registry goes with it
        balancer.start()
        assert await until(
            lambda: [e.record.instance_id for e in balancer.listed()] == ["restart-me"]
        )
        assert await until(lambda: registrar.snapshot()["registrations"] == 2)
        registers = balancer.events("register")
        assert [e["instance_id"] for e in registers] == ["restart-me", "restart-me"]
        assert registers[-1]["replaced"] is False  # the new balancer did not know it
        assert await until(lambda: balancer.listed()[0].HasField("last_report"))
    finally:
        await registrar.stop()


async def test_forgotten_or_broken_stream_registers_again(balancer: MockSombrero) -> None:
    balancer.start()
    source = FakeSource()
    registrar = await _started(
        SombreroRegistrar(sombrero_cfg(balancer.address), source), balancer, source
    )
    try:
        assert balancer.forget(source.instance_id)  # the next report hears UNKNOWN_INSTANCE
        assert await until(lambda: len(balancer.events("register")) == 2)
        assert any(not e["known"] for e in balancer.events("report"))
        balancer.fail(1, "report")  # the stream breaks with UNAVAILABLE
        assert await until(lambda: len(balancer.events("register")) == 3)
        assert await until(lambda: _snap(registrar)["registered"])
        assert registrar.snapshot()["registrations"] == 3
        sequences = [e["sequence"] for e in balancer.events("report") if e["known"]]
        assert sequences == sorted(sequences) and len(set(sequences)) == len(sequences)
    finally:
        await registrar.stop()


async def test_load_reports_follow_the_load(balancer: MockSombrero) -> None:
    balancer.start()
    source = FakeSource()
    registrar = await _started(
        SombreroRegistrar(sombrero_cfg(balancer.address), source), balancer, source
    )

    def last_report() -> tuple[int, int, float, float]:
        load = report_from_pb(balancer.listed()[0].last_report)
        return load.inflight, load.queue_depth, load.tokens_per_s, load.estimated_wait_s

    try:
        assert await until(lambda: last_report() == (0, 0, 0.0, 0.0))
        source.inflight, source.queue_depth = 8, 5
        source.tokens_per_s, source.estimated_wait_s = 950.5, 2.25
        assert await until(lambda: last_report() == (8, 5, 950.5, 2.25))
        source.inflight, source.queue_depth, source.estimated_wait_s = 3, 0, 0.0
        assert await until(lambda: last_report() == (3, 0, 950.5, 0.0))
        assert _snap(registrar)["reports_sent"] >= 3
    finally:
        await registrar.stop()


async def test_a_changed_record_is_registered_again(balancer: MockSombrero) -> None:
    balancer.start()
    source = FakeSource()
    source.models = ()  # no engine yet
    registrar = SombreroRegistrar(sombrero_cfg(balancer.address), source)
    await _started(registrar, balancer, source)
    try:
        assert list(balancer.listed()[0].record.models) == []
        source.models = (ServedModel("late-model", 4096, ("generate", "vision")),)
        assert await until(lambda: len(balancer.listed("late-model")) == 1)
        assert [e["replaced"] for e in balancer.events("register")] == [False, True]
        assert registrar.snapshot()["registrations"] == 1  # the same registration
        assert record_from_pb(balancer.listed()[0].record) == source.record()
    finally:
        await registrar.stop()


async def test_deregister_removes_the_instance(
    balancer: MockSombrero, caplog: pytest.LogCaptureFixture
) -> None:
    balancer.start()
    source = FakeSource()
    registrar = await _started(
        SombreroRegistrar(sombrero_cfg(balancer.address), source), balancer, source
    )
    await registrar.deregister(timeout_s=2.0)
    assert balancer.listed() == []
    (event,) = balancer.events("deregister")
    assert event["instance_id"] == source.instance_id and event["found"] is True
    reports = len(balancer.events("report"))
    await asyncio.sleep(0.3)
    assert len(balancer.events("report")) == reports  # no report after deregistering
    snap = registrar.snapshot()
    assert snap["phase"] == "deregistered" and not snap["registered"]
    await registrar.deregister(timeout_s=2.0)  # again: nothing
    await registrar.stop()
    assert len(balancer.events("deregister")) == 1
    assert not ours_at_warning(caplog)


async def test_deregister_is_bounded_when_the_balancer_is_down_or_hangs() -> None:
    down = SombreroRegistrar(sombrero_cfg(f"127.0.0.1:{free_port()}"), FakeSource())
    down.start()
    await asyncio.sleep(0.2)
    began = time.monotonic()
    await down.deregister(timeout_s=1.0)  # never raises
    assert time.monotonic() - began < 1.5
    # A listener that accepts and never answers: the calls hang until the limit.
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        hung = SombreroRegistrar(sombrero_cfg(f"127.0.0.1:{port}"), FakeSource())
        hung.start()
        await asyncio.sleep(0.2)
        began = time.monotonic()
        await hung.deregister(timeout_s=0.5)
        assert time.monotonic() - began < 1.5
        assert hung.snapshot()["phase"] == "deregistered"
    finally:
        server.close()


# --- etcd ---------------------------------------------------------------------------------

needs_etcd = pytest.mark.skipif(ETCD is None, reason=NO_ETCD)


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[Etcd]:
    if ETCD is None:
        pytest.skip(NO_ETCD)
    server = Etcd(tmp_path)
    yield server
    server.stop()


def etcd_cfg(*urls: str, ttl: int = 2) -> DiscoveryConfig:
    return DiscoveryConfig(etcd=urls, prefix=PREFIX, lease_ttl_s=ttl)


async def _registered(etcd: Etcd, key: str, timeout: float = 5.0) -> dict[str, object]:
    assert await until(lambda: key in etcd.records(PREFIX), timeout), etcd.log()
    found: dict[str, object] = etcd.records(PREFIX)[key]
    return found


@needs_etcd
async def test_etcd_down_at_start_and_a_dead_endpoint_first(etcd: Etcd) -> None:
    source = FakeSource("etcd-1")
    dead = f"http://127.0.0.1:{free_port()}"
    registrar = EtcdRegistrar(etcd_cfg(dead, etcd.url), source)
    registrar.start()
    try:
        await asyncio.sleep(0.5)
        assert not registrar.snapshot()["registered"]
        etcd.start()
        record = await _registered(etcd, PREFIX + "etcd-1")
        assert {k: v for k, v in record.items() if k not in ("load", "_lease")} == (
            source.record().to_dict()
        )
        assert record["load"] == source.load().to_dict()
        assert record["_lease"] == registrar.snapshot()["lease"]
        assert 0 < etcd.lease_ttl(int(str(record["_lease"]))) <= 2
        source.inflight, source.estimated_wait_s = 6, 1.5
        await asyncio.sleep(3.0)  # past the TTL: the keep-alives hold the lease
        record = etcd.records(PREFIX)[PREFIX + "etcd-1"]
        assert record["load"]["inflight"] == 6 and record["load"]["estimated_wait_s"] == 1.5
        assert registrar.snapshot()["registrations"] == 1
    finally:
        await registrar.stop()


@needs_etcd
async def test_etcd_lease_expires_after_a_stop_without_deregistering(etcd: Etcd) -> None:
    etcd.start()
    registrar = EtcdRegistrar(etcd_cfg(etcd.url), FakeSource("etcd-2"))
    registrar.start()
    await _registered(etcd, PREFIX + "etcd-2")
    await registrar.stop()  # a crash, as etcd sees it
    assert PREFIX + "etcd-2" in etcd.records(PREFIX)
    assert await until(lambda: not etcd.records(PREFIX), timeout=5.0)


@needs_etcd
async def test_etcd_deregister_deletes_the_key_and_revokes_the_lease(etcd: Etcd) -> None:
    etcd.start()
    registrar = EtcdRegistrar(etcd_cfg(etcd.url, ttl=30), FakeSource("etcd-3"))
    registrar.start()
    record = await _registered(etcd, PREFIX + "etcd-3")
    await registrar.deregister(timeout_s=2.0)
    assert etcd.records(PREFIX) == {}
    assert etcd.lease_ttl(int(str(record["_lease"]))) == -1
    assert registrar.snapshot()["phase"] == "deregistered"


@needs_etcd
async def test_etcd_lost_lease_and_restart_put_the_record_again(etcd: Etcd) -> None:
    etcd.start()
    registrar = EtcdRegistrar(etcd_cfg(etcd.url), FakeSource("etcd-4"))
    registrar.start()
    try:
        first = await _registered(etcd, PREFIX + "etcd-4")
        etcd.call(api.revoke(int(str(first["_lease"]))))  # the lease is lost: key gone
        second = await _registered(etcd, PREFIX + "etcd-4")
        assert second["_lease"] != first["_lease"]
        etcd.kill()
        etcd.start(wipe=True)  # etcd restarts without its data
        third = await _registered(etcd, PREFIX + "etcd-4")
        assert third["_lease"] == registrar.snapshot()["lease"]
        assert await until(lambda: registrar.snapshot()["registrations"] == 3)
    finally:
        await registrar.stop()


async def test_etcd_deregister_is_bounded_when_etcd_is_down() -> None:
    registrar = EtcdRegistrar(etcd_cfg(f"http://127.0.0.1:{free_port()}"), FakeSource())
    registrar.start()
    await asyncio.sleep(0.2)
    began = time.monotonic()
    await registrar.deregister(timeout_s=1.0)
    assert time.monotonic() - began < 1.5


def test_both_registrars_under_uvloop(balancer: MockSombrero, tmp_path: Path) -> None:
    """Neutrino runs on uvloop by default: grpc.aio and aiohttp work there too."""
    uvloop = pytest.importorskip("uvloop")
    balancer.start()
    server = Etcd(tmp_path).start() if ETCD is not None else None

    async def scenario() -> None:
        source = FakeSource("uv-1")
        sombrero = await _started(
            SombreroRegistrar(sombrero_cfg(balancer.address), source), balancer, source
        )
        await sombrero.deregister(timeout_s=2.0)
        assert balancer.listed() == []
        if server is not None:
            discovery = EtcdRegistrar(etcd_cfg(server.url), source)
            discovery.start()
            await _registered(server, PREFIX + "uv-1")
            await discovery.deregister(timeout_s=2.0)
            assert server.records(PREFIX) == {}

    try:
        uvloop.run(scenario())
    finally:
        if server is not None:
            server.stop()
