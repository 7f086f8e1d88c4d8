"""`make bench`, protocols: what each client protocol costs Neutrino, in the same run.

One Neutrino (HTTP/1.1, HTTP/3 and gRPC listeners on) in front of the run's mock_ie; the
`test_client` load generator (a process of its own) sends the same chat requests over
OpenAI HTTP/1.1, Anthropic's Messages API, gRPC and HTTP/3 in turn, and Neutrino's own
CPU time is read from /proc around each phase: per whole answer (one token) and per
streamed token. Ratios are against HTTP/1.1's figure of the same round; each figure is the
median of ``--repeats`` rounds, the protocols alternating.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.run import REPO, Server, free_port

PROTOCOLS = ("http", "anthropic", "grpc", "h3")
CONCURRENCY = 16
STREAM_TOKENS = 128


class Frontends(Server):
    """Neutrino with every client listener on, in front of ``engine``."""

    def __init__(self, engine: str) -> None:
        self.grpc_port, self.quic_port = free_port(), free_port()
        port = free_port()
        argv = [
            *(sys.executable, "-m", "neutrino", "--engine", engine),
            *("--http-address", f"127.0.0.1:{port}"),
            *("--grpc-address", f"127.0.0.1:{self.grpc_port}"),
            *("--quic-address", f"127.0.0.1:{self.quic_port}"),
            *("--metrics-address", "", "--log-level", "warning"),
        ]
        super().__init__("protocols", argv, f"http://127.0.0.1:{port}/neutrino/v1/status", port)


def _test_client(srv: Frontends, protocol: str, extra: list[str]) -> dict[str, Any]:
    """Run test_client to its end; its JSON report."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        argv = [
            *(sys.executable, "-m", "neutrino.loadgen", "--protocol", protocol),
            *("--url", f"http://127.0.0.1:{srv.port}"),
            *("--grpc-address", f"127.0.0.1:{srv.grpc_port}"),
            *("--quic-address", f"127.0.0.1:{srv.quic_port}"),
            *("-c", str(CONCURRENCY), "--input-len", "32", "--no-progress", "--json", str(out)),
            *extra,
        ]
        subprocess.run(argv, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        report: dict[str, Any] = json.loads(out.read_text())
        return report


def _counts(report: dict[str, Any]) -> tuple[int, int]:
    """Completed requests and output tokens in a test_client report."""
    summary = report["summary"]
    return int(summary["completed"]), int(summary["total_output_tokens"])


def _phase(srv: Frontends, protocol: str, extra: list[str]) -> tuple[float, int, int]:
    """Neutrino's CPU seconds for one load phase (after a short warm-up), with its counts."""
    _test_client(srv, protocol, ["-n", "50", *extra])
    c0 = srv.cpu()
    done, tokens = _counts(_test_client(srv, protocol, extra))
    return srv.cpu() - c0, done, tokens


def _one_round(srv: Frontends, requests: int, stream_requests: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for protocol in PROTOCOLS:
        whole = ["-n", str(requests), "--no-stream", "--output-len", "1"]
        cpu, done, _ = _phase(srv, protocol, whole)
        streamed = ["-n", str(stream_requests), "--stream", "--output-len", str(STREAM_TOKENS)]
        if protocol != "anthropic":  # Anthropic's API has no ignore_eos
            streamed.append("--ignore-eos")
        s_cpu, s_done, tokens = _phase(srv, protocol, streamed)
        per_request = cpu / max(done, 1)
        # Per token: what the streams cost beyond their requests' own cost, so that
        # protocols whose answers differ in length (Anthropic's API has no ignore_eos)
        # compare per token.
        beyond = max(0.0, s_cpu - s_done * per_request)
        out[protocol] = {
            "us_per_request": per_request * 1e6,
            "us_per_token": beyond / max(tokens, 1) * 1e6,
            "tokens_per_stream": tokens / max(s_done, 1),
            "failed": (requests - done) + (stream_requests - s_done),
        }
    return out


def compare_protocols(engine: str, args: Any) -> dict[str, Any]:
    srv = Frontends(engine)
    try:
        requests = max(200, args.requests)
        stream_requests = max(50, args.stream_requests)
        rounds = [_one_round(srv, requests, stream_requests) for _ in range(args.repeats)]
    finally:
        srv.stop()
    return {
        p: {k: statistics.median(r[p][k] for r in rounds) for k in rounds[0][p]} for p in PROTOCOLS
    }


def print_protocols(r: dict[str, Any]) -> None:
    print(
        f"\nProtocols: Neutrino's CPU per request by client protocol, same server and run "
        f"(test_client, concurrency {CONCURRENCY}; whole answers of 1 token; streams of "
        f"{STREAM_TOKENS} tokens)"
    )
    print(
        f"{'protocol':>10} {'us/request':>11} {'vs http':>8} {'us/token':>9} {'vs http':>8}"
        f" {'tokens/stream':>14}   (us/token: a stream's CPU beyond its request's, per token)"
    )
    base = r["http"]
    for p in PROTOCOLS:
        m = r[p]
        print(
            f"{p:>10} {m['us_per_request']:>11.1f} "
            f"{m['us_per_request'] / base['us_per_request']:>7.2f}x "
            f"{m['us_per_token']:>9.2f} {m['us_per_token'] / base['us_per_token']:>7.2f}x"
            f" {m['tokens_per_stream']:>14.1f}"
        )
    failed = sum(r[p]["failed"] for p in PROTOCOLS)
    if failed:
        print(f"WARNING: {failed:g} protocol-bench requests did not complete")
