"""``neutrino`` command: load config once, run until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from neutrino.config import ConfigError, load


async def _serve(app: object) -> None:
    from neutrino.app import Neutrino

    assert isinstance(app, Neutrino)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await app.start()
    await stop.wait()
    logging.getLogger("neutrino").info("shutting down")
    await app.stop()


def main(argv: list[str] | None = None) -> None:
    try:
        cfg = load(argv)
    except ConfigError as exc:
        print(f"neutrino: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    logging.basicConfig(
        level=cfg.server.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from neutrino.app import Neutrino

    try:
        app = Neutrino(cfg)
    except ValueError as exc:  # a configured family or parser that does not exist
        print(f"neutrino: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if cfg.server.uvloop:
        try:
            import uvloop

            uvloop.run(_serve(app))
            return
        except ImportError:
            pass
    asyncio.run(_serve(app))


if __name__ == "__main__":
    main()
