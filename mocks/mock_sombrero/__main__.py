"""Command line: ``python -m mocks.mock_sombrero --address HOST:PORT [options]``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Sequence

import grpc.aio
from aiohttp import web

from mocks.mock_sombrero.server import EventLog, Registry, SombreroService, http_app
from neutrino.registration.wire import pb_grpc

log = logging.getLogger("mock_sombrero")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mocks.mock_sombrero",
        description="Mock Sombrero load balancer: the sombrero.v1 gRPC service, in memory.",
    )
    p.add_argument("--address", default="127.0.0.1:50151", help="gRPC HOST:PORT (port 0: any)")
    p.add_argument("--http-address", help="HOST:PORT of the JSON page (GET / or /instances)")
    p.add_argument(
        "--fail-register", type=_count, default=0, help="the first N Register calls fail"
    )
    p.add_argument("--events", help="append one JSON line per event to this file")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


async def serve(args: argparse.Namespace) -> None:
    registry = Registry(EventLog(args.events))
    registry.failing["register"] = args.fail_register
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    pb_grpc.add_SombreroServicer_to_server(SombreroService(registry), server)
    port = server.add_insecure_port(args.address)
    await server.start()
    runner: web.AppRunner | None = None
    where = f"grpc {args.address.rpartition(':')[0]}:{port}"
    if args.http_address:
        runner = web.AppRunner(http_app(registry), access_log=None)
        await runner.setup()
        host, http_port = _split(args.http_address)
        await web.TCPSite(runner, host, http_port).start()
        where += f", http {args.http_address}"
    print(f"mock_sombrero listening on {where}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        if runner is not None:
            await runner.cleanup()
        with contextlib.suppress(asyncio.CancelledError):
            await server.stop(grace=0.5)
        registry.events.close()


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        asyncio.run(serve(args))
    except (OSError, RuntimeError) as exc:  # a taken port: gRPC says RuntimeError
        sys.exit(f"mock_sombrero: {exc}")


if __name__ == "__main__":
    main()
