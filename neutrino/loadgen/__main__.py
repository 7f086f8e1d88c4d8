"""``test_client``: the load generator's command (see ``test_client --help``).

Exit status: 0 when every request succeeded, 1 when any failed (or none could be sent: the
server unreachable, no model), 2 for a bad command line, 130 when interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import uvloop

from neutrino.loadgen import wire_anthropic, wire_openai
from neutrino.loadgen.api import Params
from neutrino.loadgen.errors import classify
from neutrino.loadgen.options import Options, parse
from neutrino.loadgen.probe import Probe
from neutrino.loadgen.progress import Progress
from neutrino.loadgen.prompts import DatasetError, Lengths, PromptSource, load_dataset
from neutrino.loadgen.report import document, render
from neutrino.loadgen.runner import Driver, Plan, Runner
from neutrino.loadgen.stats import Record, Recorder


def make_driver(opts: Options) -> Driver:
    connections = opts.concurrency or 100
    if opts.protocol == "grpc":
        from neutrino.loadgen.drive_grpc import GrpcDriver

        return GrpcDriver(opts.grpc_address, api_key=opts.api_key)
    if opts.protocol == "h3":
        from neutrino.loadgen.drive_h3 import H3Driver

        host, _, port = opts.quic_address.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        return H3Driver(host, int(port), wire_openai.API, api_key=opts.api_key)
    from neutrino.loadgen.drive_http import HttpDriver

    api = wire_anthropic.API if opts.protocol == "anthropic" else wire_openai.API
    return HttpDriver(opts.url, api, api_key=opts.api_key, connections=connections)


def make_source(opts: Options) -> PromptSource:
    output = Lengths(opts.output_len, opts.output_len_range)
    if opts.dataset is not None:
        items = load_dataset(Path(opts.dataset))
        return PromptSource(seed=opts.seed, output=output, items=items)
    if opts.prompt is not None:
        return PromptSource(seed=opts.seed, output=output, text=opts.prompt)
    synthetic = Lengths(opts.input_len, opts.input_len_range)
    return PromptSource(seed=opts.seed, output=output, synthetic=synthetic)


def target(opts: Options) -> str:
    if opts.protocol == "grpc":
        return opts.grpc_address
    if opts.protocol == "h3":
        return f"https://{opts.quic_address} (HTTP/3)"
    return opts.url


CONNECT_TIMEOUT_S = 30.0


class Abort(Exception):
    """Nothing could be sent (the reason is the message)."""


class Printer:
    """Shows each answer (--show-output) and moves the progress bar as requests end."""

    def __init__(self, opts: Options, progress: Progress) -> None:
        self.show = opts.show_output
        self.single = opts.requests == 1
        self.progress = progress

    def __call__(self, record: Record, probe: Probe) -> None:
        if self.show:
            if record.ok:
                head = "" if self.single else f"--- request {record.index} ---\n"
                sys.stdout.write(f"{head}{probe.text}\n")
            else:
                sys.stderr.write(f"request {record.index} failed: {record.error}\n")
            sys.stdout.flush()
        self.progress.done(record.ok)


async def session(opts: Options, source: PromptSource) -> tuple[Recorder, float, Runner, str]:
    """Connect, find the model, run the plan: the recorder, the duration, the runner and
    the model; Abort when no request could be sent."""
    driver = make_driver(opts)
    try:
        model = await _prepare(driver, opts)
        params = Params(model, opts.stream, opts.ignore_eos, opts.temperature)
        plan = Plan(
            opts.requests, opts.concurrency, opts.rate, opts.duration, opts.timeout, opts.seed
        )
        recorder = Recorder(seed=opts.seed, keep_records=opts.json_requests)
        enabled = opts.progress and sys.stderr.isatty()
        progress = Progress(sys.stderr, total=opts.requests, duration=opts.duration,
                            enabled=enabled)  # fmt: skip
        runner = Runner(driver, params, source, recorder, plan,
                        on_end=Printer(opts, progress), keep_text=opts.show_output)  # fmt: skip
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, runner.stop)
        try:
            duration = await runner.run()
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            progress.close()
        return recorder, duration, runner, model
    finally:
        with contextlib.suppress(Exception):
            await driver.close()


async def _prepare(driver: Driver, opts: Options) -> str:
    """Connect, and find the model to ask (the first one the server lists unless --model
    names one), within CONNECT_TIMEOUT_S; Abort when that fails."""
    what = "connect to the server"
    limit = min(opts.timeout, CONNECT_TIMEOUT_S)
    try:
        async with asyncio.timeout(limit):
            await driver.start()
            if opts.model is not None:
                return opts.model
            what = "list the server's models"
            model = await driver.first_model()
    except TimeoutError:
        raise Abort(f"cannot {what} at {target(opts)}: no answer within {limit:g} s") from None
    except Exception as exc:
        kind, message = driver.classify(exc) or classify(exc)
        raise Abort(f"cannot {what} at {target(opts)}: {kind}: {message}") from None
    if model is None:
        raise Abort("the server lists no model; name one with --model")
    return model


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    try:
        source = make_source(opts)
    except (DatasetError, OSError) as exc:
        print(f"test_client: {exc}", file=sys.stderr)
        return 2
    started = time.time()
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as loop:
            recorder, duration, runner, model = loop.run(session(opts, source))
    except Abort as exc:
        print(f"test_client: {exc}", file=sys.stderr)
        return 1
    summary = recorder.summary(duration, opts.percentiles)
    if opts.rate is not None:
        summary["max_schedule_lag_ms"] = 1000.0 * runner.max_lag
    summary["interrupted"] = runner.interrupted
    mode = "streamed" if opts.stream else "not streamed"
    head = [("Protocol", f"{opts.protocol} ({mode})"), ("Target", target(opts)),
            ("Model", model)]  # fmt: skip
    print(render(summary, head, opts.percentiles))
    if opts.json is not None:
        config: dict[str, Any] = {**opts.describe(), "model": model, "started": started}
        requests = recorder.record_dicts() if opts.json_requests else None
        Path(opts.json).write_text(json.dumps(document(config, summary, requests), indent=2))
    if runner.stopping:
        return 130
    return 0 if recorder.failed == 0 and recorder.ok > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
