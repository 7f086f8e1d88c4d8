"""`make bench`'s prompt-path section: what a long prompt costs before it leaves for the
engine.

- **Per turn of a long conversation** (one process, the qwen2.5 family's template and
  tokenizer): a 32-turn conversation of about 9,000 tokens, each turn resent whole as
  clients do. At turns 8, 16 and 32, after the turns before were taken as requests take
  them: templating plus tokenizing the turn from scratch (``encode``) against the way
  requests take it (``encode_prompt``: the head of the previous turn's prompt, and the
  text between special tokens seen before, are not tokenized again), the best and the
  median of 21 (the way requests take it is ~0.15 ms, which a busy machine's noise
  doubles in one sample of three: the best is the cost, the median what noise adds).
- **Request to engine** (processes): Neutrino in front of ``mock_ie``; fresh chat prompts
  (no text seen before) of about 8,000 and 32,000 tokens; the time from the client's
  send to the engine's receipt of the query (the engine's event log, same clock), median
  of 7 each, sent on one kept-alive connection.

Run alone: ``python -m bench.prompt_path``.
"""

from __future__ import annotations

import http.client
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from neutrino.config import ModelConfig
from neutrino.pipeline.models import ModelTexts

WORDS = ("river", "stone", "cloud", "market", "garden", "lantern", "engine", "harbor",
         "meadow", "copper", "violin", "amber", "falcon", "glacier", "orchard")  # fmt: skip
MODEL = "qwen2.5-mock"


def _turn(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) + str(rng.randrange(100)) for _ in range(words))


def conversation(turns: int = 32, seed: int = 1) -> list[dict[str, str]]:
    """A system prompt and ``turns`` user/assistant pairs (~8k tokens at 32 turns)."""
    rng = random.Random(seed)
    messages = [{"role": "system", "content": "You are a helpful assistant."}]
    for _ in range(turns):
        messages.append({"role": "user", "content": _turn(rng, 45)})
        messages.append({"role": "assistant", "content": _turn(rng, 45)})
    return messages


def per_turn(runs: int = 21) -> dict[str, Any]:
    """Turns 8, 16 and 32: each timed after the turns before it were taken as requests
    take them (the tokenizer's caches cleared first), best and median of ``runs``."""
    text = ModelTexts(ModelConfig()).get(MODEL)
    template, tok = text.template, text.tokenizer
    convo = conversation()

    def render(turn: int) -> str:
        messages = convo[: 2 * turn - 1]  # up to that turn's user message
        rendered: str = template.render(messages, add_generation_prompt=True, tools=None)
        return rendered

    out: dict[str, Any] = {}
    for turn in (8, 16, 32):
        full, incremental = [], []
        for _ in range(runs):
            tok.clear_caches()  # type: ignore[attr-defined]
            for earlier in range(1, turn):
                tok.encode_prompt(render(earlier))
            t0 = time.perf_counter()
            again = tok.encode_prompt(render(turn))
            t1 = time.perf_counter()
            ids = tok.encode(render(turn))
            t2 = time.perf_counter()
            assert again == ids
            incremental.append(t1 - t0)
            full.append(t2 - t1)
        out[str(turn)] = {
            "tokens": len(ids),
            "full_ms": 1e3 * min(full),
            "incremental_ms": 1e3 * min(incremental),
            "full_median_ms": 1e3 * statistics.median(full),
            "incremental_median_ms": 1e3 * statistics.median(incremental),
        }
    return out


def to_engine(sizes: tuple[int, ...] = (8000, 32000), runs: int = 7) -> dict[str, float]:
    """Milliseconds from a fresh prompt's send to its query at the engine, by size."""
    from tests.support.procs import MockIE, NeutrinoProc

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        mock = MockIE(work, "--model", f"{MODEL}:qwen2:131072", "--reply-tokens", "1").start()
        server = NeutrinoProc(work, config=f'[[engines]]\nsocket = "{mock.socket}"\n')
        try:
            server.start(timeout=60)
            rng = random.Random(7)
            tokens: list[int] = []
            # One kept-alive connection, as clients' pools keep them: the time counted is
            # Neutrino's (and the engine's receipt), not a TCP handshake per request.
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            headers = {"Content-Type": "application/json"}
            for size in sizes:
                delays = []
                for _ in range(runs):
                    words = size * 8 // 25  # a word and its number: about 3.1 tokens
                    body = {"model": MODEL, "max_tokens": 1, "messages": [
                        {"role": "user", "content": _turn(rng, words)}]}  # fmt: skip
                    data = json.dumps(body).encode()
                    sent = time.time()
                    conn.request("POST", "/v1/chat/completions", data, headers)
                    conn.getresponse().read()
                    query = mock.events("query")[-1]
                    delays.append(1e3 * (query["t"] - sent))
                    tokens.append(query["prompt_tokens"])
                out[str(statistics.median(tokens))] = statistics.median(delays)
                tokens.clear()
            conn.close()
        finally:
            server.stop()
            mock.stop()
    return out


def measure() -> dict[str, Any]:
    return {"per_turn": per_turn(), "to_engine_ms": to_engine()}


def print_prompt_path(report: dict[str, Any]) -> None:
    print("\nPrompt path: template + tokenize per turn of a 32-turn conversation (ms, best of 21;"
          " medians after /):")  # fmt: skip
    print("  turn  tokens           full   as requests take it           ratio")
    for turn, r in report["per_turn"].items():
        ratio = r["full_ms"] / max(1e-9, r["incremental_ms"])
        median = r["full_median_ms"] / max(1e-9, r["incremental_median_ms"])
        print(f"  {turn:>4} {r['tokens']:>7} {r['full_ms']:>7.2f} / {r['full_median_ms']:.2f}"
              f" {r['incremental_ms']:>9.2f} / {r['incremental_median_ms']:.2f}"
              f" {ratio:>9.1f}x / {median:.1f}x")  # fmt: skip
    sizes = ", ".join(f"{float(s):,.0f} tokens {ms:.1f} ms"
                      for s, ms in report["to_engine_ms"].items())  # fmt: skip
    print(f"  a fresh prompt, from the client's send to the engine's receipt (median): {sizes}")


if __name__ == "__main__":
    print_prompt_path(measure())
