"""`make bench`, real engine: SmolLM2-135M-Instruct in the llama.cpp engine, three ways.

- direct: the engine driven over its socket by our own protocol client (no Neutrino);
- neutrino: the same engine process behind Neutrino, streamed text completions over HTTP
  with the same prompt ids;
- llama_cpp.server: llama-cpp-python's own OpenAI server on the same GGUF, the same texts.

Each engine gets one thread on the same core; Neutrino and the load run on the other. Every
request has a prompt of its own (no prefix is reused) and generates exactly ``--tokens``
tokens (end of sequence ignored, or forbidden by logit bias where ignore_eos is unknown).
Figures: aggregate generated tokens per second and median time to first token, at 1 and 8
concurrent streams; the ways alternate over ``--rounds`` rounds and medians are reported.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bench.run import OTHER_CPUS, REPO, SERVER_CPU, free_port, pin, wait_http

GGUF = Path(sys.prefix) / "share" / "neutrino" / "gguf" / "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = "smollm2-135m-instruct"
WAYS = ("direct", "neutrino", "llama_cpp.server")
CONCURRENCIES = (1, 8)
EOS_IDS = (0, 2, 4)  # SmolLM2's end-of-generation tokens (forbidden for llama_cpp.server)
WORDS = ("river", "stone", "cloud", "market", "garden", "lantern", "engine", "harbor",
         "meadow", "copper", "violin")  # fmt: skip


@dataclass(frozen=True)
class Workload:
    tokens: int = 128  # generated per request
    words: int = 16  # prompt words: a prompt is about words + 12 tokens
    rounds: int = 3


@dataclass
class Phase:
    tokens: int = 0
    wall_s: float = 0.0
    ttfts: list[float] = field(default_factory=list)
    errors: int = 0

    @property
    def tokens_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s else 0.0


def _texts(n: int, tag: str, words: int) -> list[str]:
    """``n`` prompts of about ``words`` + 12 tokens, each with a start of its own (no shared
    prefix)."""
    out = []
    for i in range(n):
        words_ = " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(words))
        out.append(f"Note {tag}-{i}: {words_}. Continue the story:")
    return out


# ---------------------------------------------------------------------- the three ways


async def _direct(sock: str, prompts: list[list[int]], conc: int, tokens: int) -> Phase:
    from neutrino.engine.connection import EngineConnection
    from neutrino.engine.messages import Sampling, TextQuery, TextResult

    conn = await EngineConnection.open(
        sock, "bench", timeout=10, heartbeat_interval=0, heartbeat_timeout=10
    )
    phase, gate = Phase(), asyncio.Semaphore(conc)

    class Sink:
        def __init__(self) -> None:
            self.t0 = time.perf_counter()
            self.first = 0.0
            self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_tokens(self, ids: list[int]) -> bool:
            if not self.first:
                self.first = time.perf_counter()
                phase.ttfts.append(self.first - self.t0)
            phase.tokens += len(ids)
            return False

        def on_result(self, r: TextResult) -> bool:
            self.on_tokens(r.tokens) if r.tokens else None
            if r.finish_reason and not self.done.done():
                self.done.set_result(None)
            return False

        def on_error(self, error: Exception) -> None:
            phase.errors += 1
            if not self.done.done():
                self.done.set_result(None)

        def on_moved(self, engine: str, reason: str) -> None: ...

        def on_modal(self, result: Any) -> None: ...

        def flush(self) -> None: ...

    async def one(ids: list[int]) -> None:
        async with gate:
            sink = Sink()
            sampling = Sampling(max_tokens=tokens, temperature=0.0, ignore_eos=True)
            conn.submit(TextQuery(MODEL, ids, sampling), sink)
            await sink.done

    t0 = time.perf_counter()
    await asyncio.gather(*(one(p) for p in prompts))
    phase.wall_s = time.perf_counter() - t0
    conn.close()
    return phase


async def _http(url: str, bodies: list[dict[str, Any]], conc: int) -> Phase:
    """Streamed completions; a token per content chunk, or the usage the stream ends with."""
    phase, gate = Phase(), asyncio.Semaphore(conc)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:

        async def one(body: dict[str, Any]) -> None:
            async with gate:
                t0 = time.perf_counter()
                chunks, usage = 0, 0
                async with session.post(url, json=body) as r:
                    if r.status != 200:
                        phase.errors += 1
                        await r.read()
                        return
                    async for line in r.content:
                        if not line.startswith(b"data: {"):
                            continue
                        data = json.loads(line[6:])
                        if data.get("usage"):
                            usage = data["usage"]["completion_tokens"]
                        if data.get("choices") and data["choices"][0].get("text"):
                            if not chunks:
                                phase.ttfts.append(time.perf_counter() - t0)
                            chunks += 1
                phase.tokens += usage or chunks

        t0 = time.perf_counter()
        await asyncio.gather(*(one(b) for b in bodies))
        phase.wall_s = time.perf_counter() - t0
    return phase


# ---------------------------------------------------------------------- processes


class Procs:
    """The llama.cpp engine, Neutrino in front of it, and llama_cpp.server."""

    def __init__(self, work: Path) -> None:
        self.sock = str(work / "llamacpp.sock")
        self.nport, self.lport = free_port(), free_port()
        py = sys.executable
        self.procs: list[subprocess.Popen[bytes]] = []
        engine = [py, "-m", "neutrino.engines.llamacpp", "--socket", self.sock,
                  "--gguf", str(GGUF), "--model", MODEL, "--slots", "8", "--threads", "1",
                  "--ctx", "1024", "--log-level", "warning"]  # fmt: skip
        self._start(engine, OTHER_CPUS)
        deadline = time.monotonic() + 120
        while not Path(self.sock).exists():
            if time.monotonic() > deadline or self.procs[0].poll() is not None:
                raise RuntimeError("the llama.cpp engine did not start")
            time.sleep(0.05)
        neutrino = [py, "-m", "neutrino", "--engine", self.sock,
                    "--http-address", f"127.0.0.1:{self.nport}",
                    "--grpc-address", "127.0.0.1:0", "--quic-address", "",
                    "--metrics-address", "", "--log-level", "warning"]  # fmt: skip
        self._start(neutrino, SERVER_CPU)
        wait_http(f"http://127.0.0.1:{self.nport}/neutrino/v1/status", 60)
        # interrupt_requests off: a new request waits for the running stream, not cut it.
        server = [py, "-m", "llama_cpp.server", "--model", str(GGUF), "--n_threads", "1",
                  "--n_threads_batch", "1", "--n_ctx", "2048", "--host", "127.0.0.1",
                  "--port", str(self.lport), "--verbose", "False",
                  "--interrupt_requests", "False"]  # fmt: skip
        self._start(server, OTHER_CPUS)
        wait_http(f"http://127.0.0.1:{self.lport}/v1/models", 120)

    def _start(self, argv: list[str], cpus: set[int]) -> None:
        proc = subprocess.Popen(
            argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.procs.append(proc)
        pin(proc.pid, cpus)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


async def _phase(way: str, procs: Procs, conc: int, n: int, load: Workload, tag: str) -> Phase:
    from neutrino.text.registry import load_tokenizer

    tokens = load.tokens
    texts = _texts(n, tag, load.words)
    tok = load_tokenizer("smollm2")
    ids = [tok.encode(t) for t in texts]
    if way == "direct":
        return await _direct(procs.sock, ids, conc, tokens)
    if way == "neutrino":
        bodies = [
            {"model": MODEL, "prompt": p, "max_tokens": tokens, "temperature": 0,
             "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
            for p in ids
        ]  # fmt: skip
        return await _http(f"http://127.0.0.1:{procs.nport}/v1/completions", bodies, conc)
    bias = {str(t): -100 for t in EOS_IDS}
    bodies = [
        {"model": MODEL, "prompt": t, "max_tokens": tokens, "temperature": 0,
         "logit_bias": bias, "stream": True}
        for t in texts
    ]  # fmt: skip
    return await _http(f"http://127.0.0.1:{procs.lport}/v1/completions", bodies, conc)


async def measure(load: Workload) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="neutrino-bench-real-"))
    procs = Procs(work)
    pin(0, SERVER_CPU)
    results: dict[str, dict[str, list[Phase]]] = {}
    try:
        for r in range(load.rounds):
            for conc in CONCURRENCIES:
                n = conc * 2 if conc > 1 else 3
                ways = WAYS if r % 2 == 0 else tuple(reversed(WAYS))
                for way in ways:
                    phase = await _phase(way, procs, conc, n, load, f"{r}{conc}{way}")
                    results.setdefault(str(conc), {}).setdefault(way, []).append(phase)
    finally:
        procs.stop()
    return {
        conc: {way: _summary(phases) for way, phases in ways.items()}
        for conc, ways in results.items()
    }


def _summary(phases: list[Phase]) -> dict[str, float]:
    return {
        "tokens_s": statistics.median(p.tokens_s for p in phases),
        "ttft_ms": statistics.median(1000 * statistics.median(p.ttfts or [0]) for p in phases),
        "errors": sum(p.errors for p in phases),
    }


def print_real(r: dict[str, Any], load: Workload) -> None:
    print(
        f"\nReal engine: SmolLM2-135M-Instruct (Q4_1) in the llama.cpp engine, 1 thread, "
        f"{load.tokens} tokens per request, distinct prompts of ~{load.words + 12} tokens, "
        f"medians of {load.rounds} rounds"
    )
    print(f"{'streams':>7} {'way':>17} {'tokens/s':>9} {'TTFT ms':>8} {'errors':>6}")
    for conc, ways in r.items():
        for way in WAYS:
            m = ways[way]
            print(
                f"{conc:>7} {way:>17} {m['tokens_s']:>9.1f} {m['ttft_ms']:>8.1f} {m['errors']:>6}"
            )
        n, d, s = ways["neutrino"], ways["direct"], ways["llama_cpp.server"]
        print(
            f"{'':>7} {'ratios':>17} through Neutrino / direct: tokens/s "
            f"{n['tokens_s'] / d['tokens_s']:.3f}x (goal >= 0.97), TTFT "
            f"{n['ttft_ms'] / max(d['ttft_ms'], 1e-9):.2f}x; Neutrino / llama_cpp.server: "
            f"tokens/s {n['tokens_s'] / s['tokens_s']:.2f}x "
            f"(goal {'>= 0.97' if conc == '1' else '>= 1.5'}), TTFT "
            f"{n['ttft_ms'] / max(s['ttft_ms'], 1e-9):.2f}x"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--tokens", type=int, default=Workload.tokens)
    p.add_argument("--words", type=int, default=Workload.words, help="prompt words")
    p.add_argument("--rounds", type=int, default=Workload.rounds)
    args = p.parse_args()
    load = Workload(args.tokens, args.words, args.rounds)
    print_real(asyncio.run(measure(load)), load)


if __name__ == "__main__":
    main()
