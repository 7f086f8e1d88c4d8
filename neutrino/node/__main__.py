"""``neutrino node`` (or ``python -m neutrino.node``): run the node agent until SIGINT or
SIGTERM. A bad flag is one line and exit 2; a failure while starting, exit 1."""

from __future__ import annotations

import asyncio
import os
import sys

from neutrino.config import ConfigError, LoggingConfig
from neutrino.errors import StartupError


def main(argv: list[str] | None = None) -> None:
    # What it writes (its engines' files) is for this user alone.
    os.umask(os.umask(0o077) | 0o077)
    from neutrino.node.config import load
    from neutrino.observability.logsetup import configure_logging

    try:
        cfg = load(argv)
    except ConfigError as exc:
        print(f"neutrino node: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    configure_logging(LoggingConfig(), cfg.log_level)
    from neutrino.node.server import serve

    try:
        asyncio.run(serve(cfg))
    except StartupError as exc:
        print(f"neutrino node: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
