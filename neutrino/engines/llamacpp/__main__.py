"""``python -m neutrino.engines.llamacpp --socket S --gguf PATH --model NAME``: serve a GGUF
model through llama.cpp, with continuous batching over ``--slots`` sequences (``--listen
HOST:PORT`` with a token instead of ``--socket``: on TCP, as a node agent runs it)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from neutrino.engines.serve import add_listen_arguments, exit_missing, listen_of, start_logging


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _bytes(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    scale = units.get(text[-1:].upper(), 1)
    try:
        value = int(float(text[:-1] if scale > 1 else text) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return value


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m neutrino.engines.llamacpp", description=__doc__)
    add_listen_arguments(p)
    p.add_argument("--gguf", help="the model file (GGUF)")
    p.add_argument("--model", help="the model's name, as clients ask for it")
    p.add_argument(
        "--models-dir",
        help="serve every GGUF file of this folder instead (each named by its file's stem), "
        "loaded and unloaded on the client's request within --memory-budget",
    )
    p.add_argument(
        "--memory-budget",
        type=_bytes,
        default=0,
        help="with --models-dir: bytes of GGUF files loaded at once (e.g. 2G)",
    )
    p.add_argument("--slots", type=_positive, default=4, help="sequences decoded together")
    p.add_argument("--threads", type=_positive, default=1, help="CPU threads for llama.cpp")
    p.add_argument("--ctx", type=_positive, default=2048, help="context per sequence (tokens)")
    p.add_argument("--chunk", type=_positive, default=256, help="prompt tokens prefilled per step")
    p.add_argument("--gpu-layers", type=int, default=0, help="layers offloaded to a GPU")
    p.add_argument("--max-waiting", type=int, default=256, help="queries queued beyond the slots")
    p.add_argument("--stats", default=None, help="write the engine's counters (JSON) here")
    p.add_argument("--log-level", default="info")
    args = p.parse_args(argv)
    if args.models_dir is None and (args.gguf is None or args.model is None):
        p.error("give --gguf and --model, or --models-dir and --memory-budget")
    if args.models_dir is not None and not args.memory_budget:
        p.error("--models-dir needs --memory-budget")
    args.where = listen_of(args, p)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    start_logging(args.log_level)
    # llama.cpp's own log lines (model loading) only at warning and above.
    logging.getLogger("llama-cpp-python").setLevel(logging.WARNING)
    try:
        from neutrino.engines.llamacpp.backend import Backend, BackendConfig, BackendError
        from neutrino.engines.llamacpp.handler import LlamaEngine, connection
        from neutrino.engines.serve import serve_until_signalled
    except ImportError as exc:
        exit_missing(
            "the llama.cpp engine needs the 'llamacpp' extra",
            exc,
            "pip install 'neutrino[llamacpp]'",
        )
    if args.models_dir is not None:
        _serve_shelf(args)
        return
    if not Path(args.gguf).is_file():
        print(f"--gguf: no such file {args.gguf!r}", file=sys.stderr)
        raise SystemExit(2)
    cfg = BackendConfig(args.gguf, args.slots, args.threads, args.ctx, args.chunk, args.gpu_layers)
    try:
        backend = Backend(cfg)
    except BackendError as exc:
        print(str(exc), file=sys.stderr)
        raise SystemExit(1) from None
    engine = LlamaEngine(backend, args.model, max_waiting=args.max_waiting, stats_path=args.stats)

    async def serve() -> None:
        engine.start()
        ready = (
            f"llamacpp ready on {args.where.where} model={args.model} slots={args.slots} "
            f"ctx={backend.n_ctx_seq} ({backend.description})"
        )
        await serve_until_signalled(args.where, lambda: connection(engine), ready)
        await asyncio.to_thread(engine.stop)

    asyncio.run(serve())


def _serve_shelf(args: argparse.Namespace) -> None:
    """--models-dir: every GGUF of the folder, loaded on demand (shelf.py)."""
    from neutrino.engines.llamacpp.backend import Backend, BackendConfig
    from neutrino.engines.llamacpp.handler import LlamaEngine
    from neutrino.engines.llamacpp.shelf import Shelf, connection
    from neutrino.engines.serve import serve_until_signalled

    folder = Path(args.models_dir)
    if not folder.is_dir():
        print(f"--models-dir: no such folder {args.models_dir!r}", file=sys.stderr)
        raise SystemExit(2)

    def make(path: Path, name: str) -> LlamaEngine:
        cfg = BackendConfig(
            str(path), args.slots, args.threads, args.ctx, args.chunk, args.gpu_layers
        )
        return LlamaEngine(Backend(cfg), name, max_waiting=args.max_waiting)

    shelf = Shelf(folder, args.memory_budget, args.ctx, args.slots, make)

    async def serve() -> None:
        ready = (
            f"llamacpp ready on {args.where.where} models={','.join(shelf.files)} "
            f"budget={args.memory_budget}"
        )
        await serve_until_signalled(args.where, lambda: connection(shelf), ready)
        await shelf.close()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
