"""``--workers``' parts that need no process: flags, the restart policy, the tallies of
dead workers, the reserved ports."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any, cast

import pytest

from neutrino.config import ConfigError, from_mapping, load, parser
from neutrino.errors import StartupError
from neutrino.observability.metrics import Raw, merge
from neutrino.restarts import RestartPolicy, Restarts
from neutrino.workers.ports import Reservation
from neutrino.workers.tallies import left_behind, retire, write_snapshot

# ---------------------------------------------------------------------- flags


def test_worker_flags_are_hidden_and_checked() -> None:
    cfg = load(["--workers", "2", "--worker-index", "1", "--worker-dir", "/d"], environ={})
    assert (cfg.worker.index, cfg.worker.dir, cfg.worker.active) == (1, "/d", True)
    assert not load([], environ={}).worker.active
    assert "--worker-index" not in parser().format_help()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--worker-index", "0"], "--worker-index and --worker-dir go together"),
        (["--worker-dir", "/d"], "--worker-index and --worker-dir go together"),
        (["--worker-index", "-1", "--worker-dir", "/d"], "--worker-index must be >= 0"),
        (["--worker-index", "1", "--worker-dir", "/d"], "--worker-index must be < --workers (1)"),
        (["--workers", "2", "--worker-index", "0", "--worker-dir", ""], "--worker-dir must not"),
        (["--workers", "0"], "--workers must be >= 1 and <= 256, got 0"),
        (["--admin-address", "nowhere"], "--admin-address must be HOST:PORT"),
    ],
)
def test_bad_worker_flags(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(argv, environ={})
    assert str(err.value).startswith(message)


def test_worker_is_no_toml_section() -> None:
    with pytest.raises(ConfigError, match=r"unknown section \[worker\]"):
        from_mapping({"worker": {"index": 0}})


# ---------------------------------------------------------------------- restart policy

POLICY = RestartPolicy(initial_s=0.1, max_s=0.5, quick_s=1.0, give_up_after=3)


def test_quick_deaths_back_off_and_a_long_run_resets() -> None:
    r = Restarts(2, POLICY)
    r.started(0, 0.0)
    delays = []
    for t in range(4):
        death = r.died(0, t + 0.5)
        delays.append(death.delay_s)
        r.started(0, t + 1.0)
    assert delays == [0.1, 0.2, 0.4, 0.5]  # doubling, bounded
    death = r.died(0, 100.0)  # it ran for 96 s
    assert (death.quick, death.delay_s, r.streak(0)) == (False, 0.1, 0)
    assert not death.give_up and r.total == 5


def test_gives_up_only_when_every_worker_keeps_dying_at_start() -> None:
    r = Restarts(2, POLICY)
    for i in (0, 1):
        r.started(i, 0.0)
    for _ in range(5):  # worker 0 alone crashes at start: the other one serves
        assert not r.died(0, 0.1).give_up
        r.started(0, 0.1)
    assert not r.died(1, 0.2).give_up
    r.started(1, 0.2)
    assert not r.died(1, 0.3).give_up
    r.started(1, 0.3)
    assert r.died(1, 0.4).give_up  # its third quick death in a row: both keep dying


# ---------------------------------------------------------------------- tallies


def raw(requests: int, running: int = 0, connections: int = 2) -> Raw:
    return cast(
        Raw,
        {
            "requests": [["http", "chat", "m", "ok", requests]],
            "models": {},
            "live": {
                "running": running,
                "waiting": running,
                "tokens_per_s": 9.5,
                "auth_refused": requests,
            },
            "engines": {"e": {"connections": connections, "reconnects": 1}},
        },
    )


def total(raws: list[Any]) -> tuple[int, float, float]:
    merged = merge(raws)
    (*_, n), *_ = merged["requests"]
    return n, merged["live"].get("running", 0), merged["engines"]["e"]["connections"]


def test_a_dead_workers_counts_stay_and_its_gauges_go(tmp_path: Path) -> None:
    write_snapshot(tmp_path, 11, raw(5, running=3))
    write_snapshot(tmp_path, 12, raw(7, running=1))
    # Worker 11 answers live; 12 does not (stuck or dead): its file stands in for it.
    assert total([raw(6, running=2), *left_behind(tmp_path, {11})]) == (13, 3, 4)
    retire(tmp_path, 12)  # the supervisor saw 12 die
    assert not (tmp_path / "raw-12.json").exists()
    got = left_behind(tmp_path, {11, 13})
    assert total([raw(6, running=2), raw(1), *got]) == (14, 2, 4)
    retired = json.loads((tmp_path / "retired.json").read_text())
    assert retired["pids"] == [12]
    assert retired["raw"]["engines"]["e"] == {"connections": 0, "reconnects": 1}
    assert retired["raw"]["live"] == {"auth_refused": 7}  # a counter kept; no gauge, no rate


def test_a_worker_retired_during_a_scrape_counts_once(tmp_path: Path) -> None:
    """A scrape that read a worker's file and then finds it in retired.json skips the file."""
    write_snapshot(tmp_path, 12, raw(7))
    retire(tmp_path, 12)
    write_snapshot(tmp_path, 12, raw(7))  # as read before the supervisor removed it
    assert total(left_behind(tmp_path, set()))[0] == 7


def test_retiring_a_worker_that_never_reported(tmp_path: Path) -> None:
    retire(tmp_path, 99)
    assert left_behind(tmp_path, set()) == []


# ---------------------------------------------------------------------- ports


def test_port_zero_is_chosen_once_and_held(tmp_path: Path) -> None:
    cfg = load(
        ["--http-address", "127.0.0.1:0", "--grpc-address", "127.0.0.1:0",
         "--metrics-address", "", "--workers", "2"],
        environ={},
    )  # fmt: skip
    held = Reservation(cfg)
    try:
        http, grpc = held.addresses["HTTP"], held.addresses["gRPC"]
        assert held.argv == ["--http-address", http, "--grpc-address", grpc]
        port = int(http.rpartition(":")[2])
        assert port > 0
        with socket.socket() as other, pytest.raises(OSError):  # no one else takes it
            other.bind(("127.0.0.1", port))
        with socket.socket() as worker:  # a worker does, with SO_REUSEPORT
            worker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            worker.bind(("127.0.0.1", port))
            worker.listen()
    finally:
        held.release()


def test_a_port_taken_is_the_usual_one_line_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cfg = load(
            ["--http-address", "127.0.0.1:0", "--grpc-address", "127.0.0.1:0",
             "--metrics-address", f"127.0.0.1:{port}", "--workers", "2"],
            environ={},
        )  # fmt: skip
        with pytest.raises(StartupError) as err:
            Reservation(cfg)
    assert str(err.value) == (
        f"cannot listen for metrics on 127.0.0.1:{port}: address already in use "
        '(set [metrics] address or --metrics-address; "" turns it off)'
    )
