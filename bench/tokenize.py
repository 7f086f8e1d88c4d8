"""`make bench`'s tokenizer section: encode speed per vocabulary, the ``tokenizers`` library
against the tiktoken encoder Neutrino serves each converted ``tokenizer.json`` with
(``neutrino/text/hf_tiktoken.py``; ids identical, as its tests prove), and how long the
longest encode left on the event loop holds it.

The text is a mix of English prose, code and some CJK, about 256 KB, encoded whole (best of
5). A prompt of up to ``[tokenizer] offload_chars`` characters (16,384 by default) is
tokenized on the event loop, a longer one on a worker thread; the last column is what such
a prompt holds the loop for, from scratch (nothing of it cached).

Run alone: ``python -m bench.tokenize``.
"""

from __future__ import annotations

import json
import random
import time
import zipfile
from typing import Any

import tokenizers

from neutrino.config import TokenizerConfig
from neutrino.text import registry

VOCABULARIES = (
    "glm47-flash",
    "deepseek-v3",
    "deepseek-r1-distill-llama",
    "deepseek-r1-distill-qwen",
    "olmo2",
    "smollm2",
)
_PROSE = (
    "The river runs past the old mill, where the stones have worn smooth over a century "
    "of patient water. It's 12:45 and we'll meet at the harbor; don't be late! "
)
_CODE = "def f(x: int) -> dict[str, list[int]]:\n    return {'k': [x, x ** 2]}  # square\n"
_CJK = "今天天气很好，我们去公园散步。日本語のテキストも少し。"  # noqa: RUF001


def sample_text(chars: int = 256_000, seed: int = 3) -> str:
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < chars:
        part = rng.choice((_PROSE, _PROSE, _CODE, _CJK))
        parts.append(part)
        size += len(part)
    return "".join(parts)[:chars]


def _library(name: str) -> tokenizers.Tokenizer:
    source = registry._SOURCES[name]
    folder = registry._package_dir(source)
    assert folder is not None
    path = folder / source.files[0]
    if path.suffix == ".zip":
        text = zipfile.ZipFile(path).read("tokenizer.json").decode("utf-8")
    else:
        text = path.read_text(encoding="utf-8")
    return tokenizers.Tokenizer.from_str(text)


def _best(f: Any, runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def measure() -> dict[str, Any]:
    text = sample_text()
    on_loop = text[: TokenizerConfig().offload_chars]
    out: dict[str, Any] = {}
    for name in VOCABULARIES:
        if name not in registry.available_tokenizers():
            continue
        served, library = registry.load_tokenizer(name), _library(name)
        ids = served.encode(text)
        assert ids == library.encode(text, add_special_tokens=False).ids
        lib_s = _best(lambda lib=library: lib.encode(text, add_special_tokens=False))
        ours_s = _best(lambda tok=served: tok.encode(text))
        hold = _best(lambda tok=served: tok.encode(on_loop))
        out[name] = {
            "served_by": type(served).__name__,
            "tokens": len(ids),
            "library_mtok_s": len(ids) / lib_s / 1e6,
            "served_mtok_s": len(ids) / ours_s / 1e6,
            "loop_hold_ms": 1e3 * hold,
            "loop_hold_chars": len(on_loop),
        }
    return out


def print_tokenize(report: dict[str, Any]) -> None:
    print("\nTokenizers: encode speed, million tokens/s (256 KB of mixed text, best of 5):")
    print("  vocabulary                  served by           library  served  ratio   loop hold")
    for name, r in report.items():
        ratio = r["served_mtok_s"] / r["library_mtok_s"]
        print(
            f"  {name:<27} {r['served_by']:<18} {r['library_mtok_s']:>8.2f}"
            f" {r['served_mtok_s']:>7.2f} {ratio:>5.1f}x {r['loop_hold_ms']:>8.2f} ms"
        )
    if report:
        chars = next(iter(report.values()))["loop_hold_chars"]
        print(f"  loop hold: the longest prompt tokenized on the event loop ({chars:,} chars)")


if __name__ == "__main__":
    result = measure()
    print_tokenize(result)
    print(json.dumps(result, indent=1))
