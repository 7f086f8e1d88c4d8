"""Command line: ``python -m mocks.mock_ie --socket PATH [options]`` (or ``--listen
HOST:PORT --token-file FILE``: on TCP, as a node agent runs an engine)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Sequence

from mocks.mock_ie.core import MockEngine, MockModel, Tokenizer, load_tokenizer
from mocks.mock_ie.events import EventLog
from mocks.mock_ie.memory import MockMemory
from mocks.mock_ie.script import Script, ScriptError
from mocks.mock_ie.server import MockServer
from neutrino.engine.messages import Capability
from neutrino.engines.serve import Listen, add_listen_arguments, listen_of

log = logging.getLogger("mock_ie")

DEFAULT_TOKENIZER = "qwen2"
_G, _V = Capability.GENERATE, Capability.VISION
DEFAULT_MODELS: tuple[MockModel, ...] = (
    MockModel("qwen2.5-mock", "qwen2", 32768),
    MockModel("llama3.2-mock", "llama3", 131072),
    MockModel("qwen2.5-vl-mock", "qwen2", 32768, (_G, _V)),
    MockModel("embed-mock", "qwen2", 512, (Capability.EMBED, Capability.RERANK), 384),
    # As Whisper: its audio at 16 kHz (Neutrino resamples what clients send).
    MockModel("whisper-mock", "qwen2", 448, (Capability.TRANSCRIBE,), audio_sample_rate=16000),
    MockModel("tts-mock", "qwen2", 4096, (Capability.SPEECH,)),
    MockModel("detect-mock", "qwen2", 1, (Capability.DETECT,)),
)
_OPTIONAL_DEFAULTS = frozenset({"llama3.2-mock"})  # skipped with a warning if unavailable


def parse_model(spec: str) -> MockModel:
    """``NAME[:TOKENIZER[:CONTEXT[:CAPS]]]``: the tokenizer defaults to qwen2, the context to
    32768, CAPS (capabilities joined by ``+``, e.g. ``embed+rerank``) to ``generate``."""
    parts = spec.split(":")
    if not parts[0] or len(parts) > 4:
        raise argparse.ArgumentTypeError(
            f"bad model {spec!r}: use NAME[:TOKENIZER[:CONTEXT[:CAPS]]]"
        )
    if len(parts) == 4:
        try:
            caps = tuple(Capability[c.upper()] for c in parts[3].split("+") if c)
        except KeyError:
            known = "+".join(c.name.lower() for c in Capability)
            raise argparse.ArgumentTypeError(f"bad capabilities in {spec!r}: {known}") from None
        base = parse_model(":".join(parts[:3]))
        return MockModel(base.name, base.tokenizer, base.context_length, caps or (_G,))
    tokenizer = parts[1] if len(parts) > 1 and parts[1] else DEFAULT_TOKENIZER
    if len(parts) < 3:
        return MockModel(parts[0], tokenizer)
    try:
        context = int(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad context length in {spec!r}") from None
    if context < 1:
        raise argparse.ArgumentTypeError(f"context length must be positive in {spec!r}")
    return MockModel(parts[0], tokenizer, context)


def _at_least(minimum: float, kind: Callable[[str], float | int]) -> Callable[[str], float | int]:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum:g}, got {text}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mocks.mock_ie",
        description="Mock inference engine speaking Neutrino's engine protocol on a UNIX socket.",
    )
    add_listen_arguments(p)
    p.add_argument(
        "--model",
        action="append",
        type=parse_model,
        metavar="NAME[:TOKENIZER[:CONTEXT]]",
        help="a served model (repeatable); default: qwen2.5-mock:qwen2:32768 and "
        "llama3.2-mock:llama3:131072 (the latter only if its tokenizer loads)",
    )
    p.add_argument("--capacity", type=_at_least(1, int), default=256)
    p.add_argument("--ttft-ms", type=_at_least(0, float), default=0.0, help="time to first token")
    p.add_argument("--itl-ms", type=_at_least(0, float), default=0.0, help="inter-token latency")
    p.add_argument(
        "--reply-tokens", type=_at_least(0, int), default=None, help="fixed default reply length"
    )
    p.add_argument("--tokens-per-frame", type=_at_least(1, int), default=1)
    p.add_argument(
        "--no-token-batches",
        dest="token_batches",
        action="store_false",
        help="send every result as its own textResult frame even to clients that accept "
        "tokenBatch frames",
    )
    p.add_argument(
        "--cancel-lag-tokens",
        type=_at_least(0, int),
        default=0,
        help="tokens still generated and sent after a cancel (an engine finishing its step)",
    )
    p.add_argument(
        "--pong-delay-ms",
        type=_at_least(0, float),
        default=0.0,
        help="answer pings this late (a busy engine whose pongs queue behind its tokens)",
    )
    p.add_argument(
        "--socket-mode",
        type=_octal_mode,
        default=0o600,
        help="permissions of the socket, in octal (default 600: the owner only; 660 adds "
        "the group)",
    )
    p.add_argument(
        "--memory-budget",
        type=_at_least(0, int),
        default=0,
        help="bytes its loaded models may take: every model starts unloaded and is loaded "
        "and unloaded on the client's request (0: all loaded, always)",
    )
    p.add_argument(
        "--model-bytes", type=_at_least(1, int), default=1 << 30, help="each model's size"
    )
    p.add_argument("--load-ms", type=_at_least(0, float), default=50.0, help="time to load")
    p.add_argument("--script", default=None, help="JSON file of scripted replies")
    p.add_argument("--events", default=None, help="append one JSON line per event to this file")
    p.add_argument(
        "--log-level",
        default="warning",
        choices=["debug", "info", "warning", "error", "critical"],
        type=str.lower,
    )
    return p


def _octal_mode(text: str) -> int:
    try:
        mode = int(text, 8)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an octal mode: {text!r}") from None
    if not 0 <= mode <= 0o777:
        raise argparse.ArgumentTypeError(f"mode out of range: {text!r}")
    return mode


def _load_models(
    requested: Sequence[MockModel] | None,
) -> tuple[list[MockModel], dict[str, Tokenizer]]:
    explicit = requested is not None
    models: list[MockModel] = []
    tokenizers: dict[str, Tokenizer] = {}
    for model in requested if requested is not None else DEFAULT_MODELS:
        if model.tokenizer not in tokenizers:
            try:
                tokenizers[model.tokenizer] = load_tokenizer(model.tokenizer)
            except Exception as exc:
                if not explicit and model.name in _OPTIONAL_DEFAULTS:
                    log.warning(
                        "skipping model %s: tokenizer %r: %s", model.name, model.tokenizer, exc
                    )
                    continue
                raise SystemExit(
                    f"mock_ie: model {model.name}: cannot load tokenizer {model.tokenizer!r}: {exc}"
                ) from None
        models.append(model)
    return models, tokenizers


async def _serve(server: MockServer, where: Listen) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        if where.path:
            await server.start(where.path)
        else:
            await server.start_tcp(where.host, where.port, where.token)
        names = ",".join(m.name for m in server.engine.models)
        print(f"mock_ie ready on {where.where} models={names}", file=sys.stderr, flush=True)
        await stop.wait()
        log.info("shutting down")
    finally:
        await server.close()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    where = listen_of(args, parser)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s mock_ie %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    models, tokenizers = _load_models(args.model)
    try:
        script = Script.load(args.script) if args.script else None
    except ScriptError as exc:
        raise SystemExit(f"mock_ie: {exc}") from None
    try:
        engine = MockEngine(
            models,
            capacity=args.capacity,
            script=script,
            reply_tokens=args.reply_tokens,
            tokens_per_frame=args.tokens_per_frame,
            tokenizers=tokenizers,
        )
    except ValueError as exc:
        raise SystemExit(f"mock_ie: {exc}") from None
    if args.memory_budget:
        engine.memory = MockMemory(
            args.memory_budget, args.model_bytes, args.load_ms / 1000.0, [m.name for m in models]
        )
    events = EventLog(args.events)
    server = MockServer(
        engine,
        ttft_s=args.ttft_ms / 1000.0,
        itl_s=args.itl_ms / 1000.0,
        events=events,
        token_batches=args.token_batches,
        pong_delay_s=args.pong_delay_ms / 1000.0,
        socket_mode=args.socket_mode,
        cancel_lag_tokens=args.cancel_lag_tokens,
    )
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(_serve(server, where))
    finally:
        events.close()


if __name__ == "__main__":
    main()
