"""``python -m neutrino.engines.vllm --socket S --model-dir DIR --served-name NAME``: serve
a model through vLLM's ``AsyncLLM`` (the optional ``vllm`` install: ``make vllm``), token
ids in and out, on the engine protocol (``--listen HOST:PORT`` with a token: on TCP)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from neutrino.engines.serve import add_listen_arguments, exit_missing, listen_of, start_logging


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m neutrino.engines.vllm", description=__doc__)
    add_listen_arguments(p)
    p.add_argument("--model-dir", required=True, help="the model (a Hugging Face folder)")
    p.add_argument("--served-name", required=True, help="the model's name, as clients ask")
    p.add_argument("--max-model-len", type=int, default=2048, help="context in tokens")
    p.add_argument("--max-num-seqs", type=int, default=16, help="sequences batched together")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--stats", default=None, help="write the engine's counters (JSON) here")
    p.add_argument("--log-level", default="info")
    args = p.parse_args(argv)
    args.where = listen_of(args, p)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    start_logging(args.log_level)
    try:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM
    except ImportError as exc:
        exit_missing("the vLLM engine needs vLLM", exc, "make vllm")
    from neutrino.engines.serve import serve_until_signalled
    from neutrino.engines.vllm.handler import VllmEngine

    if not Path(args.model_dir).is_dir():
        print(f"--model-dir: no such folder {args.model_dir!r}", file=sys.stderr)
        raise SystemExit(2)

    # The model's own tokenizer, when its folder has one, serves structured outputs only.
    folder = Path(args.model_dir)
    grammars = (folder / "tokenizer.json").is_file() or (folder / "tokenizer.model").is_file()

    async def serve() -> None:
        engine_args = AsyncEngineArgs(
            model=args.model_dir,
            skip_tokenizer_init=not grammars,
            max_model_len=args.max_model_len,
            max_num_seqs=args.max_num_seqs,
            dtype=args.dtype,
            enforce_eager=True,
            served_model_name=[args.served_name],
        )
        llm = AsyncLLM.from_engine_args(engine_args)
        engine = VllmEngine(llm, args.served_name, args.max_num_seqs, args.stats, grammars)
        ready = (
            f"vllm ready on {args.where.where} model={args.served_name} ctx={engine.context} "
            f"seqs={args.max_num_seqs}"
        )
        try:
            await serve_until_signalled(args.where, engine.connection, ready)
        finally:
            llm.shutdown()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
