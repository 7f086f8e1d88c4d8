"""`make bench`: Neutrino + mock_ie (zero engine delay) against three baselines.

Everything is measured in this one run: the same load generator drives a bare
aiohttp server that answers by itself (``bench.baseline``), a bare aiohttp
pass-through proxy in front of such a server (``bench.relay``; like Neutrino, it
has a backend in another process), a raw uvloop relay that only frames bytes
(``bench.floor``: what the socket calls and wake-ups of a relay cost, non-streamed
only), and Neutrino. The report prints Neutrino's figures next to them and its
ratios to the two aiohttp baselines. CPU cost is the server process's CPU time (user +
system, from /proc) over a load phase divided by requests or tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.load import VARY, Result, run
from bench.metrics_cost import tally_us

REPO = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")
WRK_SECONDS = 4
# The server under test gets a core of its own; the engine and the load generator
# share the other, so contention does not change the server's cost per request.
CPUS = sorted(os.sched_getaffinity(0))
SERVER_CPU = {CPUS[0]}
OTHER_CPUS = set(CPUS[1:]) or SERVER_CPU


def pin(pid: int, cpus: set[int]) -> None:
    os.sched_setaffinity(pid, cpus)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_http(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise TimeoutError(url)


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class Server:
    def __init__(
        self,
        name: str,
        argv: list[str],
        ready_url: str | None,
        port: int,
        cpus: set[int] = SERVER_CPU,
        repo: Path = REPO,
    ) -> None:
        self.name = name
        self.port = port
        self.load_cpus = OTHER_CPUS  # where wrk runs when it drives this server
        env = dict(os.environ, PYTHONPATH=str(repo))  # repo: another checkout's (a before)
        self.proc = subprocess.Popen(
            argv, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        pin(self.proc.pid, cpus)
        try:
            if ready_url:
                wait_http(ready_url)
            else:
                wait_port(port)
        except BaseException:
            self.stop()  # never left running when it did not come up
            raise

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def cpu(self) -> float:
        """CPU seconds the server has used so far."""
        return cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def phase(
    server: Server, body: dict[str, Any], concurrency: int, requests: int, stream: bool
) -> tuple[Result, float]:
    await run(
        server.url, body, concurrency=concurrency, requests=max(20, requests // 10), stream=stream
    )  # warm-up
    c0 = server.cpu()
    res = await run(server.url, body, concurrency=concurrency, requests=requests, stream=stream)
    return res, server.cpu() - c0


WRK = shutil.which("wrk")


def _seconds(text: str) -> float:
    units = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}
    for unit in ("us", "ms", "m", "s"):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * units[unit]
    return float(text)


async def wrk_phase(
    server: Server, body: dict[str, Any], concurrency: int, seconds: int
) -> tuple[Result, float]:
    """Drive ``server`` with wrk (C, a fraction of the Python client's cost per request)."""
    with tempfile.TemporaryDirectory(prefix="neutrino-wrk-") as tmp:
        return await _wrk_phase(Path(tmp) / "post.lua", server, body, concurrency, seconds)


async def _wrk_phase(
    script: Path, server: Server, body: dict[str, Any], concurrency: int, seconds: int
) -> tuple[Result, float]:
    assert WRK is not None
    head, _, tail = json.dumps(body).partition(VARY.decode())
    # Each request's user message carries its own number (see bench.load.VARY).
    script.write_text(
        'wrk.method = "POST"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
        f"local head, tail = [==[{head}]==], [==[{tail}]==]\n"
        "local n = 0\n"
        "request = function()\n"
        "  n = n + 1\n"
        "  return wrk.format(nil, nil, nil, head .. n .. tail)\n"
        "end\n"
    )

    def run_wrk(duration: int) -> str:
        argv = [
            "taskset",
            "-c",
            ",".join(map(str, sorted(server.load_cpus))),
            WRK,
            "-t1",
            f"-c{concurrency}",
            f"-d{int(duration)}s",
            "--latency",
            "-s",
            str(script),
            server.url,
        ]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

    await asyncio.to_thread(run_wrk, 1)  # warm-up
    c0 = server.cpu()
    out = await asyncio.to_thread(run_wrk, seconds)
    cpu = server.cpu() - c0
    res = Result()
    for line in out.splitlines():
        words = line.split()
        if "requests in" in line:
            res.requests = int(words[0])
            res.wall_s = _seconds(words[3].rstrip(","))
        elif words[:1] == ["50%"]:
            res.latencies.append(_seconds(words[1]))
        elif words[:1] == ["99%"]:
            res.p99 = _seconds(words[1])
        elif line.strip().startswith("Non-2xx"):
            res.errors += int(words[-1])
        elif line.strip().startswith("Socket errors"):  # connect N, read N, write N, timeout N
            res.errors += sum(int(w.rstrip(",")) for w in words[3::2])
    if res.requests == 0:
        raise RuntimeError(f"{server.name} answered no request under wrk:\n{out}")
    return res, cpu


def _median(values: list[float]) -> float:
    s = sorted(values)
    return s[len(s) // 2]


async def measured(
    servers: list[Server],
    body: dict[str, Any],
    concurrency: int,
    requests: int,
    stream: bool,
    repeats: int,
) -> dict[str, dict[str, Any]]:
    """Run each server ``repeats`` times, alternating, and keep the median run of each.

    Alternating spreads slow drifts of a shared machine over both servers alike.
    """
    runs: dict[str, list[tuple[Result, float]]] = {s.name: [] for s in servers}
    for _ in range(repeats):
        for srv in servers:
            if WRK is not None and not stream:
                runs[srv.name].append(await wrk_phase(srv, body, concurrency, WRK_SECONDS))
            else:
                runs[srv.name].append(await phase(srv, body, concurrency, requests, stream))
    out: dict[str, dict[str, Any]] = {}
    for name, rs in runs.items():
        unit = [cpu / max(1, (r.tokens if stream else r.requests)) for r, cpu in rs]
        mid = _median(unit)
        res, _ = rs[unit.index(mid)]
        out[name] = {
            "res": res,
            "cpu_unit_us": 1e6 * mid,
            "cpu_unit_spread_us": [1e6 * min(unit), 1e6 * max(unit)],
        }
    return out


def fmt(v: float, unit: str = "") -> str:
    return f"{v:,.1f}{unit}" if v == v else "n/a"


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="neutrino-bench-"))
    sock = str(work / "mock.sock")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    engine_argv = [
        "mocks.mock_ie",
        "--socket",
        sock,
        "--capacity",
        "4096",
        "--log-level",
        "warning",
    ]
    fsock = str(work / "floor.sock")
    nport, bport, rport, uport = free_port(), free_port(), free_port(), free_port()
    fport = free_port()
    servers: list[Server] = []
    # The engine and the relays' backends run beside the load generator, off the server core.
    backends = [
        subprocess.Popen(
            [sys.executable, "-m", *argv], cwd=REPO, env=env, stderr=subprocess.DEVNULL
        )
        for argv in (
            engine_argv,
            ["bench.baseline", str(uport)],
            ["bench.floor", "backend", fsock],
        )
    ]
    try:
        for proc in backends:
            pin(proc.pid, OTHER_CPUS)
        pin(0, OTHER_CPUS)
        deadline = time.monotonic() + 30
        for path in (sock, fsock):  # mock_ie's and the floor relay's backend's
            while not os.path.exists(path):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no socket at {path}")
                time.sleep(0.02)
        wait_port(uport)  # the relay's backend
        servers.append(
            Server("baseline", [sys.executable, "-m", "bench.baseline", str(bport)], None, bport)
        )
        servers.append(
            Server("floor", [sys.executable, "-m", "bench.floor", str(fport), fsock], None, fport)
        )
        servers.append(
            Server(
                "relay", [sys.executable, "-m", "bench.relay", str(rport), str(uport)], None, rport
            )
        )
        common = [
            "--quic-address",  # HTTP/3 is not measured here
            "",
            "--grpc-address",
            "127.0.0.1:0",
            "--metrics-address",
            "127.0.0.1:0",
            "--log-level",
            "warning",
        ]
        neutrino_argv = [*common, "--engine", sock, "--http-address", f"127.0.0.1:{nport}"]
        neutrino = Server(
            "neutrino",
            [sys.executable, "-m", "neutrino", *neutrino_argv],
            f"http://127.0.0.1:{nport}/neutrino/v1/status",
            nport,
        )
        servers.append(neutrino)
        mport = free_port()
        unmetered_argv = [*neutrino_argv, "--http-address", f"127.0.0.1:{mport}"]
        servers.append(
            Server(
                "unmetered",
                [sys.executable, "-m", "neutrino", *unmetered_argv, "--metrics-address", ""],
                f"http://127.0.0.1:{mport}/neutrino/v1/status",
                mport,
            )
        )
        servers.append(_passthrough(work, common, uport))
        report = await _measure_all(servers, neutrino, args)
        if not args.no_workers:
            from bench.workers import compare  # bench.workers builds on this module

            report["workers"] = await compare(backends[0].pid, sock, args, set(CPUS))
        if not args.no_protocols:
            from bench.protocols import compare_protocols

            report["protocols"] = await asyncio.to_thread(compare_protocols, sock, args)
        return report
    finally:
        stop_all(servers, backends, work)


def _passthrough(work: Path, common: list[str], backend_port: int) -> Server:
    """Neutrino relaying to the relay's own backend in passthrough mode (no engine)."""
    cfg = work / "passthrough.toml"
    cfg.write_text(
        f'[[engines]]\nurl = "http://127.0.0.1:{backend_port}/v1"\nmode = "passthrough"\n'
        'models = ["qwen2.5-mock"]\ncapacity = 4096\n'
    )
    port = free_port()
    return Server(
        "passthru",
        [sys.executable, "-m", "neutrino", *common, "--http-address", f"127.0.0.1:{port}",
         "--config", str(cfg)],
        f"http://127.0.0.1:{port}/neutrino/v1/status",
        port,
    )  # fmt: skip


def stop_all(servers: list[Server], backends: list[subprocess.Popen[bytes]], work: Path) -> None:
    """Stop what a bench started (servers first, then their backends) and remove its folder."""
    for srv in servers:
        srv.stop()
    for proc in backends:
        proc.terminate()
        proc.wait(10)
    shutil.rmtree(work, ignore_errors=True)


async def _measure_all(
    servers: list[Server], neutrino: Server, args: argparse.Namespace
) -> dict[str, Any]:
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Write a short note about the weather on day #N#."},
    ]
    report: dict[str, Any] = {"non_stream": [], "stream": {}}
    for conc in (1, 16, 64):
        body = {
            "model": "qwen2.5-mock",
            "messages": messages,
            "max_tokens": args.tokens,
            "ignore_eos": True,
        }
        row: dict[str, Any] = {"concurrency": conc}
        n = args.requests if conc > 1 else args.requests // 2
        got = await measured(servers, body, conc, n, False, args.repeats)
        for name, m in got.items():
            res = m["res"]
            row[name] = {
                "req_s": res.requests / res.wall_s,
                "p50_ms": 1000 * res.pct(res.latencies, 50),
                "p99_ms": 1000 * (res.p99 if res.p99 is not None else res.pct(res.latencies, 99)),
                "cpu_us_per_req": m["cpu_unit_us"],
                "cpu_spread": m["cpu_unit_spread_us"],
                "errors": res.errors,
            }
        report["non_stream"].append(row)
    body = {
        "model": "qwen2.5-mock",
        "messages": messages,
        "max_tokens": args.stream_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    got = await measured(
        [srv for srv in servers if srv.name in STREAM_SERVERS],
        body,
        args.stream_concurrency,
        args.stream_requests,
        True,
        args.repeats,
    )
    for name, m in got.items():
        res = m["res"]
        report["stream"][name] = {
            "tokens_s": res.tokens / res.wall_s,
            "ttft_p50_ms": 1000 * res.pct(res.ttfts, 50),
            "ttft_p99_ms": 1000 * res.pct(res.ttfts, 99),
            "cpu_us_per_token": m["cpu_unit_us"],
            "cpu_spread": m["cpu_unit_spread_us"],
            "tokens": res.tokens,
            "errors": res.errors,
        }
    report["parser"] = await parser_cost(neutrino, body, args)
    return report


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


async def parser_cost(server: Server, body: dict[str, Any], args: argparse.Namespace) -> Any:
    """Per-token CPU of the same stream without and with the output parser running.

    Offering tools turns on the model family's tool parser (hermes for Qwen2.5), which
    then scans every streamed token; runs alternate, medians are compared.
    """
    plain: list[float] = []
    parsed: list[float] = []
    with_tools = {**body, "tools": TOOLS}
    for _ in range(args.repeats):
        for sink, b in ((plain, body), (parsed, with_tools)):
            res, cpu = await phase(server, b, args.stream_concurrency, args.stream_requests, True)
            sink.append(1e6 * cpu / max(1, res.tokens))
    return {"plain_us": _median(plain), "parsed_us": _median(parsed)}


# "unmetered": Neutrino without its metrics ([metrics] address ""), for what they cost.
# "passthru": Neutrino relaying to the relay's backend in passthrough mode (HTTP upstream).
SERVERS = ("baseline", "floor", "relay", "neutrino", "unmetered", "passthru")
STREAM_SERVERS = ("baseline", "relay", "neutrino", "unmetered", "passthru")  # floor: whole only


def _ratios(row: dict[str, Any], key: str) -> str:
    """Neutrino's CPU cost as a multiple of the aiohttp baselines', from the same run, and
    its passthrough mode's against the bare relay (both relay one backend's answers)."""
    ours = row["neutrino"][key]
    out = [f"neutrino/{name} {ours / row[name][key]:.2f}x" for name in ("baseline", "relay")]
    out.append(f"passthru/relay {row['passthru'][key] / row['relay'][key]:.2f}x")
    return ", ".join(out)


def _one_at_a_time(rows: list[dict[str, Any]]) -> str:
    """How much dearer a request is when requests come one at a time than at 16 at once.

    At concurrency 1 a server sleeps after each request (twice for a relay: once for
    the client, once for its backend) and wakes with cold caches; the floor relay shows
    what the sleeping and waking alone cost.
    """
    by_conc = {row["concurrency"]: row for row in rows}
    one, many = by_conc[1], by_conc[16]
    ratios = ", ".join(
        f"{name} {one[name]['cpu_us_per_req'] / many[name]['cpu_us_per_req']:.2f}x"
        for name in SERVERS
    )
    return (
        f"CPU per request at concurrency 1 against 16: {ratios}; the floor relay (no parsing) "
        f"costs {one['floor']['cpu_us_per_req']:.0f} us at concurrency 1"
    )


def _metrics_cost(r: dict[str, Any]) -> str:
    """What the Prometheus tallies cost: Neutrino against itself without them."""
    per_req = ", ".join(
        f"{row['neutrino']['cpu_us_per_req'] / row['unmetered']['cpu_us_per_req'] - 1:+.1%} "
        f"at concurrency {row['concurrency']}"
        for row in r["non_stream"]
    )
    s = r["stream"]
    per_token = s["neutrino"]["cpu_us_per_token"] / s["unmetered"]["cpu_us_per_token"] - 1
    tally = tally_us()
    c16 = next(row for row in r["non_stream"] if row["concurrency"] == 16)
    share = tally / c16["neutrino"]["cpu_us_per_req"]
    return (
        f"Metrics' cost (Neutrino with them against without, same run): per request {per_req}; "
        f"per streamed token {per_token:+.1%} (target: under 3 % of each; the spread between "
        f"runs is larger). Measured in process: {tally:.2f} us per request, {share:.1%} of a "
        "request's CPU at concurrency 16, and nothing per token"
    )


def print_report(r: dict[str, Any], args: argparse.Namespace) -> None:
    print(
        f"\nNeutrino benchmark (mock_ie, zero engine delay; {len(CPUS)} CPUs: server on "
        f"{sorted(SERVER_CPU)}, engine and load on {sorted(OTHER_CPUS)})"
    )
    driver = "wrk" if WRK else "the Python load generator (install wrk for a lighter one)"
    print(f"non-streaming chat, max_tokens={args.tokens}, driven by {driver}:")
    # busy: the share of its core the server used; well under 100% means its engine (or
    # backend) and the load generator, sharing the other core, set the pace.
    print(
        f"{'conc':>5} {'server':>9} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'busy':>5} "
        f"{'CPU us/req':>11}"
    )
    for row in r["non_stream"]:
        for name in SERVERS:
            m = row[name]
            lo, hi = m["cpu_spread"]
            busy = m["req_s"] * m["cpu_us_per_req"] / 1e4
            print(
                f"{row['concurrency']:>5} {name:>9} {fmt(m['req_s']):>9} {fmt(m['p50_ms']):>8} "
                f"{fmt(m['p99_ms']):>8} {busy:>4.0f}% {fmt(m['cpu_us_per_req']):>11}"
                f"  ({lo:.0f}-{hi:.0f})"
            )
        print(f"{'':>5} {'ratios':>9}  {_ratios(row, 'cpu_us_per_req')}")
    s = r["stream"]
    print(
        f"streaming chat, max_tokens={args.stream_tokens}, concurrency={args.stream_concurrency}:"
    )
    print(f"{'server':>9} {'tokens/s':>10} {'TTFT p50':>9} {'TTFT p99':>9} {'CPU us/token':>13}")
    for name in STREAM_SERVERS:
        m = s[name]
        lo, hi = m["cpu_spread"]
        print(
            f"{name:>9} {fmt(m['tokens_s']):>10} {fmt(m['ttft_p50_ms']):>9} "
            f"{fmt(m['ttft_p99_ms']):>9} {m['cpu_us_per_token']:>13.2f}  ({lo:.2f}-{hi:.2f})"
        )
    print(f"{'ratios':>9}  {_ratios(s, 'cpu_us_per_token')}")
    per_conc = ", ".join(
        f"{row['neutrino']['cpu_us_per_req']:.0f} at concurrency {row['concurrency']}"
        for row in r["non_stream"]
    )
    print(f"\nNeutrino CPU per non-streamed request (us): {per_conc} (target <= 200)")
    print(_one_at_a_time(r["non_stream"]))
    print(
        f"Neutrino CPU per streamed token: {s['neutrino']['cpu_us_per_token']:.2f} us (target <= 8)"
    )
    print(_metrics_cost(r))
    pc = r["parser"]
    print(
        f"Output parser (hermes tool parser, tools offered): {pc['parsed_us']:.2f} us per "
        f"streamed token vs {pc['plain_us']:.2f} without, i.e. "
        f"{pc['parsed_us'] - pc['plain_us']:+.2f} us per token for parsing"
    )
    if "workers" in r:
        from bench.workers import print_workers

        print_workers(r["workers"])
    if "protocols" in r:
        from bench.protocols import print_protocols

        print_protocols(r["protocols"])
    errors = sum(row[n]["errors"] for row in r["non_stream"] for n in SERVERS)
    errors += sum(s[n]["errors"] for n in s)
    if errors:
        print(f"WARNING: {errors} requests failed")


def _stage_totals(r: dict[str, Any]) -> str:
    """The per-request totals beside the budget: Neutrino's and the relay's, from the
    non-streamed table's first concurrency (the budget's own has the stages' wrappers)."""
    row = r["non_stream"][0]
    return (
        f"Totals without the wrappers, from the table above at concurrency "
        f"{row['concurrency']}: Neutrino {row['neutrino']['cpu_us_per_req']:.0f} us a "
        f"request, the aiohttp relay {row['relay']['cpu_us_per_req']:.0f} us"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--requests", type=int, default=3000)
    p.add_argument(
        "--tokens",
        type=int,
        default=1,
        help="max_tokens of non-streamed requests (1: the per-request cost)",
    )
    p.add_argument("--repeats", type=int, default=3, help="runs per server; medians reported")
    p.add_argument("--stream-requests", type=int, default=300)
    p.add_argument("--stream-tokens", type=int, default=256)
    p.add_argument("--stream-concurrency", type=int, default=16)
    p.add_argument("--no-workers", action="store_true", help="skip one worker against two")
    p.add_argument(
        "--no-protocols", action="store_true", help="skip the cost of each client protocol"
    )
    p.add_argument(
        "--no-real", action="store_true", help="skip the real engine (llama.cpp) section"
    )
    p.add_argument("--real-tokens", type=int, default=128, help="tokens per real-engine request")
    p.add_argument("--no-loop-hold", action="store_true", help="skip the loop-hold table")
    p.add_argument("--no-decode", action="store_true", help="skip the typed-request section")
    p.add_argument("--no-stages", action="store_true", help="skip the per-stage budget")
    p.add_argument("--no-routing", action="store_true", help="skip the routing section")
    p.add_argument("--no-migration", action="store_true", help="skip the migration section")
    p.add_argument("--no-fairness", action="store_true", help="skip the noisy-neighbour section")
    p.add_argument("--no-prompt-path", action="store_true", help="skip the long-prompt section")
    p.add_argument("--no-tokenize", action="store_true", help="skip the tokenizer-speed section")
    p.add_argument("--no-audio", action="store_true", help="skip the audio-decoding section")
    p.add_argument(
        "--loop-hold-before",
        type=Path,
        help="another checkout (the commit to compare with): a before column in that table",
    )
    p.add_argument("--json", help="also write the report here")
    args = p.parse_args()
    report = asyncio.run(main_async(args))
    print_report(report, args)
    if not args.no_stages:
        from bench import stages

        report["stages"] = asyncio.run(stages.measure(stages.defaults()))
        print("\nWhere a chat completion's CPU goes, stage by stage (bench/stages.py), at c=1:")
        stages.print_budget(report["stages"], _stage_totals(report))
    if not args.no_decode:
        from bench.decode import measure as measure_decode
        from bench.decode import print_decode

        report["decode"] = measure_decode()
        print_decode(report["decode"])
    if not args.no_migration:
        from bench.migration import measure as measure_migration
        from bench.migration import print_migration

        report["migration"] = measure_migration()
        print_migration(report["migration"])
    if not args.no_fairness:
        from bench.fairness import measure as measure_fairness
        from bench.fairness import print_fairness

        report["fairness"] = measure_fairness()
        print_fairness(report["fairness"])
    if not args.no_routing:
        from bench.routing import measure as measure_routing
        from bench.routing import print_routing

        report["routing"] = measure_routing()
        print_routing(report["routing"])
    if not args.no_prompt_path:
        from bench import prompt_path

        report["prompt_path"] = prompt_path.measure()
        prompt_path.print_prompt_path(report["prompt_path"])
    if not args.no_tokenize:
        from bench import tokenize

        report["tokenize"] = tokenize.measure()
        tokenize.print_tokenize(report["tokenize"])
    if not args.no_audio:
        from bench import audio

        report["audio"] = audio.measure()
        audio.print_audio(report["audio"])
    if not args.no_real:
        from bench.real_engine import Workload, measure, print_real

        load = Workload(tokens=args.real_tokens)
        report["real"] = asyncio.run(measure(load))
        print_real(report["real"], load)
    if not args.no_loop_hold:
        from bench import loop_hold

        report["loop_hold"] = loop_hold.measure()
        before = args.loop_hold_before
        report["loop_hold_before"] = loop_hold.measure(before) if before else None
        loop_hold.print_table(report["loop_hold"], report["loop_hold_before"])
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
