"""``neutrino`` command: load config once, run until SIGINT/SIGTERM.

A start that fails is one line on stderr, ``neutrino: <what failed and what to set>``,
never a traceback (``--log-level debug`` prints it before the line), and an exit status:
2 for a bad configuration or command line, 1 for a failure while starting (a port taken).
Whatever had started is stopped first (``Neutrino.start``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import traceback
from typing import NoReturn

from neutrino.config import ConfigError, load
from neutrino.errors import StartupError
from neutrino.observability.logsetup import configure_logging

EXIT_CONFIG = 2
EXIT_START = 1


async def _serve(app: object) -> None:
    from neutrino.app import Neutrino

    assert isinstance(app, Neutrino)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await app.start()
    except (StartupError, asyncio.CancelledError):
        raise
    except Exception as exc:  # not foreseen; still one line (the traceback under debug)
        raise StartupError(f"start-up failed: {type(exc).__name__}: {exc}") from exc
    await stop.wait()
    logging.getLogger("neutrino").info("shutting down")
    await app.stop()


def _fail(exc: BaseException, status: int, debug: bool = False) -> NoReturn:
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    print(f"neutrino: {exc}", file=sys.stderr, flush=True)
    raise SystemExit(status) from None


def main(argv: list[str] | None = None) -> None:
    # What Neutrino creates (the embedded engine's folder and socket, which its child
    # makes) is for this user alone, whatever umask it was started with.
    os.umask(os.umask(0o077) | 0o077)
    try:
        cfg = load(argv)
    except ConfigError as exc:
        _fail(exc, EXIT_CONFIG)
    debug = cfg.log_level == "debug"
    try:
        configure_logging(cfg.logging, cfg.log_level)
    except StartupError as exc:  # a log file that cannot be opened
        _fail(exc, EXIT_START, debug)
    from neutrino.app import Neutrino

    try:
        app = Neutrino(cfg)
    except ValueError as exc:  # a configured family or parser that does not exist
        _fail(exc, EXIT_CONFIG, debug)
    except ImportError as exc:  # the gRPC stubs were never generated
        _fail(exc, EXIT_START, debug)
    except Exception as exc:
        _fail(StartupError(f"start-up failed: {type(exc).__name__}: {exc}"), EXIT_START, debug)
    run = asyncio.run
    if cfg.server.uvloop:
        try:
            import uvloop

            run = uvloop.run
        except ImportError:
            pass
    try:
        run(_serve(app))
    except StartupError as exc:
        _fail(exc, EXIT_START, debug)


if __name__ == "__main__":
    main()
