"""The fixed cost of a request, stage by stage: where one chat completion's CPU goes.

The server runs as usual (HTTP/1.1, mock_ie behind it), with the functions that begin
each stage wrapped (``HOOKS``). A wrapper switches the current stage on entry and back on
exit, so each stage's figure is exclusive of the stages nested in it (the engine's frames
in hold the detokenizer, and a stream's render and write), and what runs outside every
stage (the event loop, tasks and futures, the glue between stages) is "the rest".

Two figures a stage, each from a run of its own:
- time: ``perf_counter_ns`` at each switch; the rest is the process's CPU over the
  measured requests less the stages' (the wrappers' own cost, calibrated, taken off);
- instructions: under callgrind, each switch dumps the instructions since the previous
  one labelled with the stage they belong to (``stagemark.c``, built here with gcc;
  the dump's own cost, calibrated, taken off). Noise-free, like ``bench.instructions``.

The wrappers cost some 0.3 us a switch in time, so a stage of a microsecond reads a
little high; the totals are taken without them in ``make bench``'s other sections.

    python -m bench.stages [--requests N] [--stream-requests N] [--tokens N]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import importlib
import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

STAGES = (
    "accept and read",
    "parse into the typed request",
    "admission",
    "template",
    "tokenize",
    "route",
    "encode and write the query",
    "engine frames in",
    "detokenize and stops",
    "render",
    "write",
    "end bookkeeping",
)
REST = "the rest (event loop, tasks, glue)"
_CALIB = "calibration"
_CALIB_OUT = "calibration, around"
_SKIP = "skip"
IDLE = "idle: "  # the idle phase's labels

# (module, attribute: a module-level function or Class.method, stage). Each is looked up
# where it is called (a class's method, or the calling module's global).
HOOKS: tuple[tuple[str, str, str], ...] = (
    ("neutrino.frontends.http.h1.server", "H1Protocol.connection_made", STAGES[0]),
    ("neutrino.frontends.http.h1.server", "H1Protocol.data_received", STAGES[0]),
    ("neutrino.frontends.http.jsonbody", "decode", STAGES[1]),
    ("neutrino.frontends.http.openai.routes", "parse_chat", STAGES[1]),
    ("neutrino.pipeline.auth", "KeyRing.authenticate", STAGES[2]),
    ("neutrino.pipeline.auth", "KeyRing.admit", STAGES[2]),
    ("neutrino.pipeline.orchestrator", "limits.sampling", STAGES[2]),
    ("neutrino.pipeline.admission", "Admission.try_acquire", STAGES[2]),
    ("neutrino.pipeline.admission", "Admission.release", STAGES[2]),
    ("neutrino.pipeline.prompt", "template_messages", STAGES[3]),
    ("neutrino.text.templates", "ChatTemplate.render", STAGES[3]),
    ("neutrino.pipeline.prompt", "PromptBuilder.encode_here", STAGES[4]),
    ("neutrino.engine.fleet.router", "EngineRouter.submit", STAGES[5]),
    ("neutrino.engine.connection", "EngineConnection._flush", STAGES[6]),
    ("neutrino.engine.connection", "EngineConnection.data_received", STAGES[7]),
    ("neutrino.pipeline.generation", "Generation.on_tokens", STAGES[8]),
    ("neutrino.pipeline.generation", "Generation.on_result", STAGES[8]),
    ("neutrino.pipeline.text_stream", "TextStream.feed_tokens", STAGES[8]),
    ("neutrino.pipeline.text_stream", "TextStream.feed", STAGES[8]),
    ("neutrino.frontends.http.openai.routes", "chat_answer", STAGES[9]),
    ("neutrino.frontends.http.sse", "ChoiceWriter.on_text", STAGES[9]),
    ("neutrino.frontends.http.sse", "ChoiceWriter.on_end", STAGES[9]),
    ("neutrino.frontends.http.h1.exchange", "H1Exchange.reply", STAGES[10]),
    ("neutrino.frontends.http.h1.server", "H1Protocol.write", STAGES[10]),
    ("neutrino.frontends.http.sse", "SSEStream.write", STAGES[10]),
    ("neutrino.pipeline.endings", "Endings.done", STAGES[11]),
)


# ------------------------------------------------------------------ in the server


class Recorder:
    """The current stage, and what each stage spent (``switch`` is called at each
    change: time here, a callgrind dump in :class:`Dumps`).

    After the measured requests it goes on measuring the idle server (its timers, the
    engine's pings) until it exits: that rate, times the measured phase's length, is
    taken off each stage (a slow stream's tokens would otherwise carry the idle work of
    the wait between them)."""

    def __init__(self, warmup: int, count: int, idle_s: float) -> None:
        self.cur = REST
        self.idle_s = idle_s
        self.finished = False
        self.active = False
        self.ends = 0
        self.warmup, self.count = warmup, count
        self.calls: dict[str, int] = dict.fromkeys((*STAGES, REST, _CALIB), 0)
        self.measured_calls: dict[str, int] = {}
        self.walls = [0.0, 0.0, 0.0]  # the measured phase's start, its end, the exit

    def enter(self, stage: str) -> str:
        prev = self.cur
        if self.active:
            self.switch(prev)
            self.calls[stage] += 1
        self.cur = stage
        return prev

    def leave(self, prev: str) -> None:
        if self.active:
            self.switch(self.cur)
        self.cur = prev

    def switch(self, spent_in: str) -> None:
        raise NotImplementedError

    def ended(self) -> None:
        """A request ended (after its bookkeeping): start measuring, or go idle."""
        self.ends += 1
        if self.ends == self.warmup:
            self.start()
            self.calls = dict.fromkeys(self.calls, 0)
            self.walls[0] = time.perf_counter()
        elif self.ends == self.warmup + self.count:
            self.walls[1] = time.perf_counter()
            self.measured_calls = dict(self.calls)
            self.idle()
            asyncio.get_running_loop().call_later(self.idle_s, self.finish)

    def start(self) -> None:
        self.active = True

    def idle(self) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """The idle phase ends (``idle_s`` after the last request; at the latest, when
        the server exits)."""
        if self.finished:
            return
        self.finished = True
        if self.active:
            self.switch(self.cur)
            self.active = False
        self.walls[2] = time.perf_counter()

    def report(self) -> dict[str, Any]:
        measured_s, idle_s = self.walls[1] - self.walls[0], self.walls[2] - self.walls[1]
        return {"calls": self.measured_calls, "ends": self.ends, "measured_s": measured_s,
                "idle_s": idle_s}  # fmt: skip


class Clock(Recorder):
    def __init__(self, warmup: int, count: int, idle_s: float) -> None:
        super().__init__(warmup, count, idle_s)
        self.ns: dict[str, int] = dict.fromkeys((*STAGES, REST, _CALIB, _CALIB_OUT), 0)
        self.mark = time.perf_counter_ns()
        self.cpu_ns = 0
        self.overhead_ns = 0.0
        self.measured: dict[str, Any] = {}

    def switch(self, spent_in: str) -> None:
        now = time.perf_counter_ns()
        self.ns[spent_in] += now - self.mark
        self.mark = now

    def start(self) -> None:
        self.overhead_ns = _calibrate(self, 20000) / 2  # per interval
        self.ns = dict.fromkeys(self.ns, 0)
        self.cpu_ns = -time.process_time_ns()
        self.mark = time.perf_counter_ns()
        self.active = True

    def idle(self) -> None:
        self.switch(self.cur)
        self.measured = {"ns": self.ns, "cpu_ns": self.cpu_ns + time.process_time_ns()}
        self.ns = dict.fromkeys(self.ns, 0)
        self.cpu_ns = -time.process_time_ns()

    def finish(self) -> None:
        if not self.finished:
            self.cpu_ns += time.process_time_ns()
        super().finish()

    def report(self) -> dict[str, Any]:
        idle = {"ns": self.ns, "cpu_ns": self.cpu_ns}
        return {**super().report(), **self.measured, "idle": idle,
                "overhead_ns": self.overhead_ns}  # fmt: skip


class Dumps(Recorder):
    def __init__(self, warmup: int, count: int, idle_s: float, lib: str) -> None:
        super().__init__(warmup, count, idle_s)
        self._dump = ctypes.CDLL(lib).stage_dump
        self._dump.argtypes = [ctypes.c_char_p]
        self._names = (*STAGES, REST, _CALIB, _CALIB_OUT, _SKIP)
        self._labels = {s: f"stage:{s}".encode() for s in self._names}

    def switch(self, spent_in: str) -> None:
        self._dump(self._labels[spent_in])

    def start(self) -> None:
        self._dump(self._labels[_SKIP])  # the warm-up's instructions, set aside
        self.active = True
        _calibrate(self, 500)

    def idle(self) -> None:
        self.switch(self.cur)
        self._labels = {s: f"stage:{IDLE}{s}".encode() for s in self._names}


def _calibrate(rec: Recorder, n: int) -> float:
    """Call a wrapped function that does nothing ``n`` times, between its calls in a
    stage of its own: a call's cost to its stage and to the one around it, i.e. two
    intervals (time: ns a call; a dump's is read from the intervals afterwards)."""
    noop = _wrap(lambda: None, _CALIB, rec)
    outer, rec.cur = rec.cur, _CALIB_OUT
    rec.active = True
    t0 = time.perf_counter_ns()
    for _ in range(n):
        noop()
    took = (time.perf_counter_ns() - t0) / n
    rec.switch(_CALIB_OUT)
    rec.cur = outer
    return took


def _wrap(fn: Callable[..., Any], stage: str, rec: Recorder) -> Callable[..., Any]:
    def staged(*args: Any, **kwargs: Any) -> Any:
        prev = rec.enter(stage)
        try:
            return fn(*args, **kwargs)
        finally:
            rec.leave(prev)

    staged.__wrapped__ = fn  # type: ignore[attr-defined]
    return staged


def install(rec: Recorder) -> None:
    """Wrap every hook; the end bookkeeping's wrapper also counts the requests."""
    for module, attr, stage in HOOKS:
        owner: Any = importlib.import_module(module)
        *path, name = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        fn = getattr(owner, name)
        if asyncio.iscoroutinefunction(fn):
            raise TypeError(f"{module}.{attr} is a coroutine function: not a stage's start")
        wrapped: Any = _wrap(fn, stage, rec)
        if stage == STAGES[11]:
            wrapped = _counting(wrapped, rec)
        if isinstance(inspect.getattr_static(owner, name), staticmethod):
            wrapped = staticmethod(wrapped)
        setattr(owner, name, wrapped)


def _counting(fn: Callable[..., Any], rec: Recorder) -> Callable[..., Any]:
    def counted(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        finally:
            rec.ended()

    return counted


def serve(argv: list[str]) -> None:
    """``serve MODE WARMUP COUNT IDLE_S OUT [LIB] -- neutrino's arguments``."""
    split = argv.index("--")
    mode, warmup, count, idle_s, out, *lib = argv[:split]
    n, m, idle = int(warmup), int(count), float(idle_s)
    rec: Recorder = Clock(n, m, idle) if mode == "time" else Dumps(n, m, idle, *lib)
    install(rec)
    from neutrino.__main__ import main as neutrino_main

    sys.argv = ["neutrino", *argv[split + 1 :]]
    try:
        neutrino_main()
    except SystemExit:
        pass
    finally:
        rec.finish()
        Path(out).write_text(json.dumps(rec.report()))


# ------------------------------------------------------------------ the driver

_LABEL = re.compile(rb"^desc: Trigger: Client Request: stage:(.*)$", re.M)
_TOTAL = re.compile(rb"^(?:summary|totals):\s+(\d+)", re.M)


def _read_dumps(folder: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Instructions and intervals by label, over every dump callgrind wrote of the main
    thread (the others' run meanwhile, while a dump lets go of the GIL)."""
    instr: dict[str, int] = {}
    intervals: dict[str, int] = {}
    for path in folder.glob("cg.out*-01"):  # the event loop's thread (not gRPC's pollers)
        data = path.read_bytes()
        label, total = _LABEL.search(data), _TOTAL.search(data)
        if label is None or total is None:
            continue
        name = label.group(1).decode()
        instr[name] = instr.get(name, 0) + int(total.group(1))
        intervals[name] = intervals.get(name, 0) + 1
    return instr, intervals


def build_marker(folder: Path) -> Path | None:
    """stagemark.c as a shared library (None: no gcc or no valgrind headers)."""
    lib = folder / "stagemark.so"
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None or not Path("/usr/include/valgrind/callgrind.h").exists():
        return None
    src = Path(__file__).with_name("stagemark.c")
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


async def _measure(
    mode: str, case: dict[str, Any], sock: str, work: Path, lib: Path | None, args: Any
) -> dict[str, Any]:
    from bench.load import run
    from bench.run import SERVER_CPU, free_port, pin

    port = free_port()
    out = work / f"{mode}-{case['name']}.json"
    dumps = work / f"dumps-{case['name']}"
    dumps.mkdir(exist_ok=True)
    warmup, count = case["warmup"], case["requests"]
    cmd = [sys.executable, "-m", "bench.stages", "serve", mode, str(warmup), str(count),
           str(args.idle_s), str(out)]  # fmt: skip
    if mode == "dump":
        assert lib is not None
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={dumps}/cg.out",
               "--dump-instr=no", "--dump-line=no", "--separate-threads=yes",
               *cmd, str(lib)]  # fmt: skip
    cmd += ["--", "--http-address", f"127.0.0.1:{port}", "--grpc-address", "127.0.0.1:0",
            "--quic-address", "", "--metrics-address", "127.0.0.1:0", "--engine", sock,
            "--log-level", "warning"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": "0"}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    pin(proc.pid, SERVER_CPU)  # alone on its core, as in make bench's other sections
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    try:
        await _ready(url, proc, case["body"]["model"], 900 if mode == "dump" else 60)
        res = await run(url, case["body"], concurrency=1, requests=warmup + count,
                        stream=case["stream"])  # fmt: skip
        if res.errors:
            raise RuntimeError(f"{res.errors} requests failed")
        await asyncio.sleep(args.idle_s + 1)  # the idle server, measured for its rate
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    report: dict[str, Any] = json.loads(out.read_text())
    if mode == "dump":
        report["instr"], report["intervals"] = _read_dumps(dumps)
    keep = os.environ.get("STAGES_KEEP_DUMPS")  # a folder to keep the dumps in
    if keep and mode == "dump":
        shutil.copytree(dumps, Path(keep) / dumps.name, dirs_exist_ok=True)
    shutil.rmtree(dumps, ignore_errors=True)
    return report


async def _ready(url: str, proc: subprocess.Popen[bytes], model: str, limit: float) -> None:
    """Until the server lists ``model`` (a request answered now would count as one)."""
    models = url.replace("/chat/completions", "/models")
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the staged server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(models, timeout=5) as resp:
                if model in resp.read().decode():
                    return
        except OSError:
            pass
        await asyncio.sleep(0.5)
    raise TimeoutError("the staged server did not list its model")


def budget(report: dict[str, Any], per: int) -> dict[str, dict[str, float]]:
    """Each stage's share, per request (``per``: requests), from a time run's or a
    callgrind run's report, less the idle server's rate over the measured phase."""
    calls = report["calls"]
    idle_s = report["idle_s"]  # the idle work to take off (none measured: none)
    scale = report["measured_s"] / idle_s if idle_s >= 1.0 else 0.0
    rows: dict[str, dict[str, float]] = {}
    if "ns" in report:  # time: a call's two switches cost it and what is around it one each
        over, ns, idle = report["overhead_ns"], report["ns"], report["idle"]["ns"]
        spent = {s: ns[s] - over * calls[s] - scale * idle[s] for s in STAGES}
        rest = report["cpu_ns"] - sum(ns[s] for s in STAGES) - over * sum(calls[s] for s in STAGES)
        idle_rest = report["idle"]["cpu_ns"] - sum(idle[s] for s in STAGES)
        spent[REST] = rest - scale * idle_rest
        for s, v in spent.items():
            rows[s] = {"us": max(0.0, v) / per / 1e3, "calls": calls.get(s, 0) / per}
        return rows
    instr, intervals = report["instr"], report["intervals"]
    # An interval's own cost (its two dumps' halves, a wrapper's work): the mean of the
    # calibration's, inside its calls and between them.
    cal = (_CALIB, _CALIB_OUT)
    over = sum(instr.get(c, 0) for c in cal) / max(1, sum(intervals.get(c, 0) for c in cal))
    for s in (*STAGES, REST):
        net = instr.get(s, 0) - over * intervals.get(s, 0)
        idle = instr.get(IDLE + s, 0) - over * intervals.get(IDLE + s, 0)
        net -= scale * idle
        rows[s] = {"kinstr": max(0.0, net) / per / 1e3, "calls": calls.get(s, 0) / per}
    return rows


def cases(args: argparse.Namespace) -> list[dict[str, Any]]:
    """A non-streamed chat (the engine at full speed), and a stream whose tokens come one
    at a time ``--itl-ms`` apart, as a real engine sends them."""
    chat = {"model": args.model, "messages": [{"role": "user", "content": "Hello there!"}],
            "ignore_eos": True}  # fmt: skip
    return [
        {"name": "request", "stream": False, "warmup": args.warmup, "requests": args.requests,
         "tokens": 9, "body": {**chat, "max_tokens": 9}, "engine": [], "engine_dump": []},
        {"name": "stream", "stream": True, "warmup": max(3, args.warmup // 10),
         "tokens": args.tokens, "requests": args.stream_requests,
         "body": {**chat, "max_tokens": args.tokens, "stream": True},
         "engine": ["--itl-ms", str(args.itl_ms)],
         "engine_dump": ["--itl-ms", str(10 * args.itl_ms)]},
    ]  # fmt: skip


def _engine(work: Path, case: dict[str, Any]) -> tuple[subprocess.Popen[bytes], str]:
    """mock_ie for ``case``, beside the load generator (off the server's core)."""
    from bench.run import OTHER_CPUS, pin

    sock = str(work / f"mock-{case['name']}.sock")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "mocks.mock_ie", "--socket", sock, "--log-level", "warning"]
    proc = subprocess.Popen([*argv, *case["engine"]], cwd=REPO, env=env, stderr=subprocess.DEVNULL)
    pin(proc.pid, OTHER_CPUS)
    return proc, sock


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Both cases, timed, and counted under callgrind where it and gcc are here."""
    from bench.run import OTHER_CPUS, pin

    work = Path(tempfile.mkdtemp(prefix="neutrino-stages-"))
    pin(0, OTHER_CPUS)  # the load, beside the engine
    try:
        lib = build_marker(work) if args.instructions and shutil.which("valgrind") else None
        return {case["name"]: await _case(case, work, lib, args) for case in cases(args)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def _case(
    case: dict[str, Any], work: Path, lib: Path | None, args: argparse.Namespace
) -> dict[str, Any]:
    row: dict[str, Any] = {"tokens": case["tokens"]}
    runs = [("time", case, case["engine"])]
    if lib is not None:  # under callgrind fewer requests, and a slower engine: each of the
        # server's dumps takes a while, and its tokens must still come one a read
        light = {**case, "requests": max(5, case["requests"] // 4), "warmup": 3}
        runs.append(("dump", light, case["engine_dump"]))
    for mode, run_case, engine_args in runs:
        engine, sock = _engine(work, {"name": f"{case['name']}-{mode}", "engine": engine_args})
        try:
            report = await _measure(mode, run_case, sock, work, lib, args)
        finally:
            engine.terminate()
            engine.wait()
        kind = "time" if mode == "time" else "instr"
        row[kind] = budget(report, run_case["requests"])
        reads = report["calls"][STAGES[7]] / run_case["requests"]
        row[f"{kind}_reads"] = reads  # the engine's reads a request
    return row


def print_budget(out: dict[str, Any], totals: str = "") -> None:
    """The budget as a markdown table: a non-streamed request's, a streamed one's per
    token (``totals``: a line of other servers' totals to print under it)."""
    cols: list[tuple[str, str, float]] = []  # case, kind, divisor
    heads = []
    for name, row in out.items():
        per = 1.0 if name == "request" else float(row["tokens"])
        what = "a non-streamed request" if name == "request" else "a streamed token"
        for kind, unit in (("time", "us"), ("instr", "k instructions")):
            if kind in row:
                cols.append((name, kind, per))
                heads.append(f"{what}: {unit}")
    print("\n| stage | " + " | ".join(heads) + " |")
    print("|---" * (len(heads) + 1) + "|")
    for stage in (*STAGES, REST, None):
        cells = []
        for name, kind, per in cols:
            key = "us" if kind == "time" else "kinstr"
            table = out[name][kind]
            v = sum(r[key] for r in table.values()) if stage is None else table[stage][key]
            cells.append(f"{v / per:.{1 if key == 'us' or per > 1 else 0}f}")
        print(f"| {stage or 'total'} | " + " | ".join(cells) + " |")
    for name, row in out.items():
        reads = ", ".join(
            f"{row[k]:.1f} in the {'timed' if k == 'time_reads' else 'callgrind'} run"
            for k in ("time_reads", "instr_reads")
            if k in row
        )
        print(f"The engine's reads per {name} ({row['tokens']} tokens): {reads}")
    if totals:
        print(totals)


def defaults() -> argparse.Namespace:
    """The budget's settings when ``make bench`` runs it."""
    return _parser().parse_args([])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        serve(sys.argv[2:])
        return
    args = _parser().parse_args()
    out = asyncio.run(measure(args))
    print_budget(out)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", default="qwen2.5-mock")
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--stream-requests", type=int, default=20)
    p.add_argument("--tokens", type=int, default=64)
    # Slow enough that each token is read alone (under callgrind, ten times this).
    p.add_argument("--itl-ms", type=float, default=20.0, help="the stream's engine's pace")
    p.add_argument("--instructions", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--idle-s", type=float, default=5.0, help="the idle phase measured")
    p.add_argument("--json", help="also write the budget here")
    return p


if __name__ == "__main__":
    main()
