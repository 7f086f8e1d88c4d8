"""A start that fails: one line on stderr, an exit status, and nothing left behind.

The real ``neutrino`` command runs until it exits; its temporary folders (the embedded
mock_ie's socket folder) go under the test's own TMPDIR, so leftovers are this test's.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.procs import run_neutrino

FREE = ("--http-address", "127.0.0.1:0", "--grpc-address", "127.0.0.1:0")


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port some other program listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.fixture
def tmpdir_(tmp_path: Path) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    return folder


def _mock_children(tmpdir: Path) -> list[int]:
    """mock_ie processes whose socket is under ``tmpdir`` (started by that neutrino)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if (
            state != "Z"
            and b"mocks.mock_ie" in argv
            and any(str(tmpdir).encode() in a for a in argv)
        ):
            found.append(int(proc.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def assert_nothing_left(tmpdir: Path) -> None:
    deadline = time.monotonic() + 10
    while _mock_children(tmpdir) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _mock_children(tmpdir) == []
    assert sorted(p.name for p in tmpdir.iterdir()) == []  # no neutrino-* folder


def error_lines(stderr: str) -> list[str]:
    """stderr without log records (``2026-… LEVEL name: …``) and mock_ie's own lines."""
    logged = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ ")
    return [
        line
        for line in stderr.splitlines()
        if not logged.match(line) and not line.startswith("mock_ie ")
    ]


@pytest.mark.parametrize(
    "extra",
    [(), ("--no-uvloop", "--config", "aiohttp.toml")],
    ids=["fast-path-uvloop", "aiohttp-asyncio"],
)
def test_busy_http_port_is_one_line_and_stops_the_embedded_mock(
    tmpdir_: Path, tmp_path: Path, busy_port: int, extra: tuple[str, ...]
) -> None:
    (tmp_path / "aiohttp.toml").write_text("[http]\nfast_path = false\n")
    extra = tuple(str(tmp_path / a) if a.endswith(".toml") else a for a in extra)
    run = run_neutrino(
        tmpdir_,
        *("--http-address", f"127.0.0.1:{busy_port}", "--grpc-address", "127.0.0.1:0"),
        *("--log-level", "info", *extra),
    )
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert error_lines(run.stderr) == [
        f"neutrino: cannot listen for HTTP on 127.0.0.1:{busy_port}: address already in use "
        "(set [server] http_host and http_port, or --http-address)"
    ]
    # The embedded mock_ie had been started before the port was tried; it is stopped.
    started = re.search(r"engine embedded-mock started \(pid (\d+)\)", run.stderr)
    assert started is not None, run.stderr
    assert not _alive(int(started[1]))
    assert_nothing_left(tmpdir_)


def test_busy_grpc_port_is_exactly_one_line(tmpdir_: Path, busy_port: int) -> None:
    run = run_neutrino(
        tmpdir_,
        *("--http-address", "127.0.0.1:0", "--grpc-address", f"127.0.0.1:{busy_port}"),
        *("--log-level", "error"),
    )
    assert run.returncode == 1, run.stderr
    # Nothing else either: not gRPC's own log line about the port, not a traceback.
    assert [ln for ln in run.stderr.splitlines() if not ln.startswith("mock_ie ")] == [
        f"neutrino: cannot listen for gRPC on 127.0.0.1:{busy_port}: address already in use "
        "(set [grpc] address, --grpc-address, or [grpc] enabled = false)"
    ]
    assert_nothing_left(tmpdir_)


def test_debug_shows_the_traceback_before_the_line(tmpdir_: Path, busy_port: int) -> None:
    run = run_neutrino(tmpdir_, "--http-address", f"127.0.0.1:{busy_port}", "--log-level", "debug")
    assert run.returncode == 1
    assert "Traceback" in run.stderr and "OSError" in run.stderr
    assert run.stderr.splitlines()[-1].startswith(
        f"neutrino: cannot listen for HTTP on 127.0.0.1:{busy_port}: address already in use"
    )
    assert_nothing_left(tmpdir_)


@pytest.mark.parametrize(
    ("config", "flags", "message"),
    [
        (
            "[limits]\nrequest_timeout_s = -5\n",
            (),
            "{cfg}: [limits].request_timeout_s must be > 0 and <= 4294967, got -5.0",
        ),
        (
            None,
            ("--request-timeout", "-5"),
            "--request-timeout must be > 0 and <= 4294967, got -5.0",
        ),
        (
            '[[engines]]\nsocket = "/run/e.sock"\nconnections = "two"\n',
            (),
            "{cfg}: [engines][0].connections must be an integer, got 'two'",
        ),
        ("[limits]\nmax_queue = -1\n", (), "{cfg}: [limits].max_queue must be >= 0, got -1"),
        (
            "[limit]\nmax_queue = 1\n",
            (),
            "{cfg}: unknown section [limit] (known: engines, server, model, tokenizer, mock, "
            "limits, engine_link, http, grpc, shutdown, admin, metrics, tracing, logging, "
            "sombrero, discovery, responses, auth, routing, routes, nodes, catalogue, fleet)",
        ),
        (None, ("--no-such-flag",), "unrecognized arguments: --no-such-flag (see neutrino --help)"),
        (
            '[model]\ndefault_family = "no-such-family"\n',  # refused after the mock's folder
            (),
            "unknown default family 'no-such-family'",
        ),
    ],
    ids=[
        "toml-timeout",
        "flag-timeout",
        "toml-type",
        "toml-queue",
        "toml-section",
        "flag",
        "family",
    ],
)
def test_bad_config_is_one_line_exit_2_and_nothing_left(
    tmpdir_: Path, tmp_path: Path, config: str | None, flags: tuple[str, ...], message: str
) -> None:
    cfg = tmp_path / "neutrino.toml"
    args = list(FREE) + list(flags)
    if config is not None:
        cfg.write_text(config)
        args += ["--config", str(cfg)]
    run = run_neutrino(tmpdir_, *args, timeout=30)
    assert (run.returncode, run.stderr.splitlines()) == (
        2,
        ["neutrino: " + message.format(cfg=cfg)],
    )
    assert_nothing_left(tmpdir_)


@pytest.mark.parametrize("how", ["--config", "NEUTRINO_CFG"])
def test_missing_config_file_is_one_line(tmpdir_: Path, tmp_path: Path, how: str) -> None:
    missing = tmp_path / "missing.toml"
    if how == "--config":
        run = run_neutrino(tmpdir_, *FREE, "--config", str(missing), timeout=30)
    else:
        run = run_neutrino(tmpdir_, *FREE, env={"NEUTRINO_CFG": str(missing)}, timeout=30)
    assert (run.returncode, run.stderr.splitlines()) == (
        2,
        [f"neutrino: cannot read config file {missing} ({how}): no such file or directory"],
    )
    assert_nothing_left(tmpdir_)
