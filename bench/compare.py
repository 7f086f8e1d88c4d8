"""`make bench-compare BASE=<commit>`: this working tree against another commit, in one run.

The base commit is checked out beside the tree (a detached ``git worktree``, its gRPC stubs
generated there, removed afterwards). Both run as Neutrino servers in front of one mock_ie
(zero engine delay), each pinned to the same core, and the load alternates between them
run by run (base, head, base, head ...), so that a slow drift of the machine falls on both
alike. A bare aiohttp relay (``bench.relay``) runs in the same rotation for the ratio the
issues quote. Reported: CPU per non-streamed request at concurrency 1, 16 and 64 (wrk when
installed) and per streamed token at 16 and 64, the median of ``--repeats`` runs each, and
head/base and head/relay ratios. A regression guard for any change to the request path.
Where valgrind is installed, the same three servers' instructions per request and per
streamed token follow, counted under callgrind (``bench.instructions``): a figure that
moves by about 0.2 % from run to run where CPU time moves by a few percent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import instructions
from bench.run import (
    OTHER_CPUS,
    REPO,
    Server,
    free_port,
    measured,
    pin,
    stop_all,
    wait_port,
)

MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Write a short note about the weather on day #N#."},
]


@contextmanager
def checkout(commit: str) -> Iterator[Path]:
    """``commit`` checked out in a temporary folder, with its own generated gRPC stubs."""
    where = Path(tempfile.mkdtemp(prefix="neutrino-base-")) / "tree"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(where), commit],
        check=True,
    )
    try:
        subprocess.run(
            [sys.executable, "-m", "neutrino.frontends.grpc.codegen"],
            cwd=where,
            env={"PYTHONPATH": str(where), "PATH": "/usr/bin:/bin"},
            check=True,
            stdout=subprocess.DEVNULL,
        )
        yield where
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(where)], check=False
        )
        shutil.rmtree(where.parent, ignore_errors=True)


def _neutrino_argv(port: int, sock: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "neutrino",
        "--engine",
        sock,
        "--http-address",
        f"127.0.0.1:{port}",
        "--grpc-address",
        "127.0.0.1:0",
        "--quic-address",
        "",
        "--metrics-address",
        "127.0.0.1:0",
        "--log-level",
        "warning",
    ]


def _neutrino(name: str, repo: Path, sock: str) -> Server:
    port = free_port()
    ready = f"http://127.0.0.1:{port}/neutrino/v1/status"
    return Server(name, _neutrino_argv(port, sock), ready, port, repo=repo)


def _body(tokens: int, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "qwen2.5-mock",
        "messages": MESSAGES,
        "max_tokens": tokens,
        "ignore_eos": True,
    }
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return body


async def compare(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Rows of per-request and per-token CPU (us) for base, head and the relay."""
    work = Path(tempfile.mkdtemp(prefix="neutrino-compare-"))
    sock = str(work / "mock.sock")
    uport, rport = free_port(), free_port()
    backends = [
        subprocess.Popen([sys.executable, "-m", *argv], cwd=REPO, stderr=subprocess.DEVNULL)
        for argv in (
            ["mocks.mock_ie", "--socket", sock, "--capacity", "4096", "--log-level", "warning"],
            ["bench.baseline", str(uport)],
        )
    ]
    servers: list[Server] = []
    try:
        for proc in backends:
            pin(proc.pid, OTHER_CPUS)
        pin(0, OTHER_CPUS)
        deadline = time.monotonic() + 30
        while not Path(sock).exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"no socket at {sock}")
            await asyncio.sleep(0.02)
        wait_port(uport)
        servers.append(_neutrino("base", base, sock))
        servers.append(_neutrino("head", REPO, sock))
        relay_argv = [sys.executable, "-m", "bench.relay", str(rport), str(uport)]
        servers.append(Server("relay", relay_argv, None, rport))
        rows: list[dict[str, Any]] = []
        for conc in args.concurrency:
            got = await measured(servers, _body(1, False), conc, args.requests, False, args.repeats)
            rows.append(_row("request", conc, got))
        for conc in args.stream_concurrency:
            got = await measured(
                servers,
                _body(args.stream_tokens, True),
                conc,
                args.stream_requests,
                True,
                args.repeats,
            )
            rows.append(_row("token", conc, got))
        report: dict[str, Any] = {"rows": rows}
        if args.instructions:
            for srv in servers:  # the callgrind runs start their own
                srv.stop()
            servers = []
            report["instructions"] = await instruction_rows(base, sock, uport, args)
        return report
    finally:
        stop_all(servers, backends, work)


async def instruction_rows(
    base: Path, sock: str, backend_port: int, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Instructions per request and per streamed token at concurrency 16 of base, head and
    the relay, each counted under callgrind (``bench.instructions``)."""
    rows: list[dict[str, Any]] = []
    for unit, stream, n in (("request", False, args.instr_requests), ("token", True, 20)):
        body = _body(args.stream_tokens if stream else 1, stream)
        row: dict[str, Any] = {"unit": unit, "concurrency": 16}
        for name, repo in (("base", base), ("head", REPO), ("relay", REPO)):
            port = free_port()
            if name == "relay":
                argv = [sys.executable, "-m", "bench.relay", str(port), str(backend_port)]
                ready = None
            else:
                argv = _neutrino_argv(port, sock)
                ready = f"http://127.0.0.1:{port}/neutrino/v1/status"
            row[name] = await instructions.count(
                argv,
                repo,
                ready,
                f"http://127.0.0.1:{port}/v1/chat/completions",
                body,
                requests=n,
                concurrency=16,
                stream=stream,
            )
        rows.append(row)
    return rows


def _row(unit: str, conc: int, got: dict[str, dict[str, Any]]) -> dict[str, Any]:
    row: dict[str, Any] = {"unit": unit, "concurrency": conc}
    for name, m in got.items():
        row[name] = {
            "cpu_us": m["cpu_unit_us"],
            "spread": m["cpu_unit_spread_us"],
            "errors": m["res"].errors,
        }
    return row


def print_rows(rows: list[dict[str, Any]], base: str) -> None:
    print(f"\nNeutrino at HEAD (working tree) against {base}, one alternating run:")
    print(
        f"{'CPU per':>8} {'conc':>5} {'base us':>9} {'head us':>9} {'relay us':>9} "
        f"{'head/base':>10} {'head/relay':>11} {'base/relay':>11}"
    )
    for r in rows:
        b, h, rl = r["base"]["cpu_us"], r["head"]["cpu_us"], r["relay"]["cpu_us"]
        print(
            f"{r['unit']:>8} {r['concurrency']:>5} {b:>9.1f} {h:>9.1f} {rl:>9.1f} "
            f"{h / b:>9.3f}x {h / rl:>10.2f}x {b / rl:>10.2f}x"
        )
    errors = sum(r[n]["errors"] for r in rows for n in ("base", "head", "relay"))
    if errors:
        print(f"WARNING: {errors} requests failed")


def print_instructions(rows: list[dict[str, Any]]) -> None:
    print("\nInstructions (thousands) under callgrind, concurrency 16:")
    print(
        f"{'per':>8} {'base':>9} {'head':>9} {'relay':>9} "
        f"{'head/base':>10} {'head/relay':>11} {'base/relay':>11}"
    )
    for r in rows:
        b, h, rl = r["base"], r["head"], r["relay"]
        print(
            f"{r['unit']:>8} {b / 1e3:>9.1f} {h / 1e3:>9.1f} {rl / 1e3:>9.1f} "
            f"{h / b:>9.3f}x {h / rl:>10.2f}x {b / rl:>10.2f}x"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--base", required=True, help="the commit to compare with (BASE=...)")
    p.add_argument("--repeats", type=int, default=3, help="runs per server; medians reported")
    p.add_argument("--requests", type=int, default=3000, help="per run, without wrk")
    # Given without values, a list skips that part of the CPU table (e.g. instructions only).
    p.add_argument("--concurrency", type=int, nargs="*", default=[1, 16, 64])
    p.add_argument("--stream-concurrency", type=int, nargs="*", default=[16, 64])
    p.add_argument("--stream-requests", type=int, default=300)
    p.add_argument("--stream-tokens", type=int, default=256)
    p.add_argument("--json", help="also write the rows here")
    p.add_argument(
        "--instructions",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also count instructions per request and per token under callgrind "
        "(default: when valgrind is installed; some 7 minutes more)",
    )
    p.add_argument("--instr-requests", type=int, default=500, help="requests counted per server")
    args = p.parse_args()
    if args.instructions is None:
        args.instructions = instructions.available()
    elif args.instructions and not instructions.available():
        p.error("--instructions needs valgrind (callgrind_control): apt-get install valgrind")
    with checkout(args.base) as base:
        report = asyncio.run(compare(base, args))
    if report["rows"]:
        print_rows(report["rows"], args.base)
    if "instructions" in report:
        print_instructions(report["instructions"])
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
