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
from typing import TYPE_CHECKING, NoReturn

from neutrino.config import Config, ConfigError, load
from neutrino.errors import StartupError
from neutrino.observability.logsetup import configure_logging

if TYPE_CHECKING:
    from neutrino.app import Neutrino

EXIT_CONFIG = 2
EXIT_START = 1


async def _serve(app: object) -> None:
    from neutrino.app import Neutrino

    assert isinstance(app, Neutrino)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, lambda: _reload_soon(app))
    try:
        await app.start()
    except (StartupError, asyncio.CancelledError):
        raise
    except Exception as exc:  # not foreseen; still one line (the traceback under debug)
        raise StartupError(f"start-up failed: {type(exc).__name__}: {exc}") from exc
    await stop.wait()
    logging.getLogger("neutrino").info("shutting down")
    await app.stop()


_reloads: set[asyncio.Task[None]] = set()


def _reload_soon(app: Neutrino) -> None:
    """SIGHUP: re-read the configuration; a refused one is logged, the running one stays."""

    async def reload() -> None:
        try:
            await app.reload()
        except ConfigError as exc:
            logging.getLogger("neutrino").error("reload refused, the running config stays: %s", exc)

    task = asyncio.get_running_loop().create_task(reload(), name="reload")
    _reloads.add(task)
    task.add_done_callback(_reloads.discard)


def _fail(exc: BaseException, status: int, debug: bool = False) -> NoReturn:
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    print(f"neutrino: {exc}", file=sys.stderr, flush=True)
    raise SystemExit(status) from None


def _supervise(cfg: Config, argv: list[str], debug: bool) -> NoReturn:
    """``--workers N``: this process starts and watches N workers, and serves nothing."""
    from neutrino.workers.supervisor import supervise

    try:
        status = supervise(cfg, argv)
    except StartupError as exc:
        _fail(exc, EXIT_START, debug)
    raise SystemExit(status)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["node"]:  # ``neutrino node ...``: the node agent (neutrino/node)
        from neutrino.node.__main__ import main as node

        node(args[1:])
        return
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
    if cfg.server.workers > 1 and not cfg.worker.active:
        _supervise(cfg, sys.argv[1:] if argv is None else argv, debug)
    from neutrino.app import Neutrino

    try:
        app = Neutrino(cfg, reload_config=lambda: load(argv))
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
