"""test_client's command line: the options, checked, as one frozen :class:`Options`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

PROTOCOLS = ("http", "grpc", "h3", "anthropic")
DEFAULT_URL = "http://127.0.0.1:51055"  # Neutrino's [server] http address
DEFAULT_GRPC = "127.0.0.1:50051"  # [grpc] address
DEFAULT_QUIC = "127.0.0.1:51056"  # [server] quic_address
DEFAULT_REQUESTS = 100
DEFAULT_CONCURRENCY = 10

N = TypeVar("N", int, float)


@dataclass(frozen=True, slots=True)
class Options:
    protocol: str
    url: str
    grpc_address: str
    quic_address: str
    model: str | None
    api_key: str | None
    requests: int | None
    concurrency: int | None
    rate: float | None
    duration: float | None
    timeout: float
    seed: int
    stream: bool
    input_len: int
    input_len_range: float
    output_len: int
    output_len_range: float
    prompt: str | None
    dataset: str | None
    ignore_eos: bool
    temperature: float | None
    show_output: bool
    progress: bool
    json: str | None
    json_requests: bool
    percentiles: tuple[float, ...]

    def describe(self) -> dict[str, Any]:
        """The settings for the JSON report (never the API key)."""
        out = asdict(self)
        out["api_key"] = "set" if self.api_key else None
        return out


def _parsed(kind: Callable[[str], N], text: str, noun: str = "a number") -> N:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {noun}: {text!r}") from None


def _positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        value = _parsed(kind, text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return value

    return parse


def _at_least_zero(text: str) -> int:
    value = _parsed(int, text, "a whole number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"cannot be negative, got {text}")
    return value


def _ratio(text: str) -> float:
    value = _parsed(float, text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be from 0 to 1, got {text}")
    return value


def _percentiles(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not values or any(not 0 < p < 100 for p in values) or len(values) > 8:
        raise argparse.ArgumentTypeError("one to eight percentiles, each between 0 and 100")
    return values


def _address(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"not HOST:PORT: {text!r}")
    return text


def _url(text: str) -> str:
    if not text.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"not an http:// or https:// URL: {text!r}")
    return text.rstrip("/")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="test_client",
        description="Load generator for Neutrino (and other OpenAI-compatible servers): sends "
        "chat requests over HTTP, gRPC, HTTP/3 or Anthropic's Messages API and reports "
        "throughput and latency as vLLM's bench serve does.",
    )
    _target(p.add_argument_group("target"))
    _load(p.add_argument_group("load"))
    _requests(p.add_argument_group("requests"))
    _output(p.add_argument_group("output"))
    return p


def _target(t: argparse._ArgumentGroup) -> None:
    t.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="http",
        help="http: OpenAI chat completions; anthropic: /v1/messages over HTTP; "
        "grpc: neutrino.v1.Inference; h3: chat completions over HTTP/3 (default http)",
    )
    t.add_argument(
        "--url",
        type=_url,
        default=DEFAULT_URL,
        help=f"HTTP server for http and anthropic (default {DEFAULT_URL})",
    )
    t.add_argument(
        "--grpc-address",
        type=_address,
        default=DEFAULT_GRPC,
        metavar="HOST:PORT",
        help=f"gRPC server (default {DEFAULT_GRPC})",
    )
    t.add_argument(
        "--quic-address",
        type=_address,
        default=DEFAULT_QUIC,
        metavar="HOST:PORT",
        help=f"HTTP/3 server; its certificate is not checked (default {DEFAULT_QUIC})",
    )
    t.add_argument("--model", help="model name (default: the first one the server lists)")
    t.add_argument("--api-key", help="API key (Authorization: Bearer, or x-api-key)")


def _load(load: argparse._ArgumentGroup) -> None:
    load.add_argument(
        "-n",
        "--requests",
        type=_positive(int),
        help=f"requests to send (default {DEFAULT_REQUESTS} unless --duration)",
    )
    load.add_argument(
        "-c",
        "--concurrency",
        type=_positive(int),
        help="closed loop: requests in flight (default "
        f"{DEFAULT_CONCURRENCY}); with --rate: the most in flight (default 10000)",
    )
    load.add_argument(
        "--rate",
        type=_positive(float),
        metavar="R",
        help="open loop: Poisson arrivals, R requests a second on average",
    )
    load.add_argument(
        "--duration",
        type=_positive(float),
        metavar="S",
        help="start no request after S seconds (those in flight finish)",
    )
    load.add_argument(
        "--timeout",
        type=_positive(float),
        default=300.0,
        metavar="S",
        help="longest a request may take (default 300)",
    )
    load.add_argument(
        "--seed", type=int, default=0, help="seeds prompts, lengths and arrivals (default 0)"
    )


def _requests(r: argparse._ArgumentGroup) -> None:
    r.add_argument(
        "--stream",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="streamed answers (default); TTFT, TPOT and ITL need them",
    )
    r.add_argument(
        "--input-len",
        type=_at_least_zero,
        default=128,
        metavar="N",
        help="synthetic prompts of about N tokens (default 128)",
    )
    r.add_argument(
        "--input-len-range",
        type=_ratio,
        default=0.0,
        metavar="F",
        help="input lengths uniform in N*(1-F)..N*(1+F) (default 0)",
    )
    r.add_argument(
        "--output-len",
        type=_at_least_zero,
        default=128,
        metavar="N",
        help="max_tokens of each request (default 128; 0: not sent)",
    )
    r.add_argument(
        "--output-len-range",
        type=_ratio,
        default=0.0,
        metavar="F",
        help="output lengths uniform in N*(1-F)..N*(1+F) (default 0)",
    )
    r.add_argument("--prompt", help="send this text as every request's user message")
    r.add_argument(
        "--dataset",
        metavar="FILE.jsonl",
        help="conversations, one JSON object a line: messages or prompt, and "
        "optionally max_tokens; used in turn",
    )
    r.add_argument(
        "--ignore-eos",
        action="store_true",
        help="generate max_tokens whatever the model's end token (not anthropic)",
    )
    r.add_argument("--temperature", type=float)


def _output(o: argparse._ArgumentGroup) -> None:
    o.add_argument("--show-output", action="store_true", help="print each answer's text")
    o.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a progress bar on stderr when it is a terminal (default)",
    )
    o.add_argument("--json", metavar="FILE", help="write the full report as JSON")
    o.add_argument(
        "--json-requests",
        action="store_true",
        help="add one record per request to the --json report",
    )
    o.add_argument(
        "--percentiles",
        type=_percentiles,
        default=(99.0,),
        metavar="P,...",
        help="latency percentiles besides mean and median (default 99)",
    )


def parse(argv: list[str] | None = None) -> Options:
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.prompt is not None and ns.dataset is not None:
        parser.error("--prompt and --dataset cannot be used together")
    if ns.protocol == "anthropic":
        if ns.ignore_eos:
            parser.error("--ignore-eos has no equivalent in Anthropic's Messages API")
        if ns.output_len == 0:
            parser.error("--protocol anthropic needs max_tokens: --output-len above 0")
    if ns.input_len == 0 and ns.prompt is None and ns.dataset is None:
        parser.error("--input-len must be above 0 for synthetic prompts")
    if ns.requests is None and ns.duration is None:
        ns.requests = DEFAULT_REQUESTS
    if ns.concurrency is None and ns.rate is None:
        ns.concurrency = DEFAULT_CONCURRENCY
    return Options(**vars(ns))
