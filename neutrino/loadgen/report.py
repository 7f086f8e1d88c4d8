"""The run's report: the text printed at the end, and the JSON document of ``--json``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

RULE = "=" * 64
LATENCIES = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"), ("e2el_ms", "E2E"))


def _line(label: str, value: object) -> str:
    return f"{label + ':':<40}{value}"


def render(
    summary: Mapping[str, Any],
    head: Sequence[tuple[str, str]],
    percentiles: Sequence[float] = (99,),
) -> str:
    """The report as text: ``head``'s (label, value) lines, then the figures."""
    s = summary
    lines = [RULE, " test_client report ".center(64, "="), RULE]
    lines += [_line(label, value) for label, value in head]
    lines += [
        _line("Successful requests", s["completed"]),
        _line("Failed requests", s["failed"]),
        _line("Duration (s)", f"{s['duration_s']:.2f}"),
        _line("Total input tokens", s["total_input_tokens"]),
        _line("Total output tokens", s["total_output_tokens"]),
        _line("Request throughput (req/s)", f"{s['request_throughput']:.2f}"),
        _line("Output token throughput (tok/s)", f"{s['output_throughput']:.2f}"),
        _line("Total token throughput (tok/s)", f"{s['total_token_throughput']:.2f}"),
    ]
    if s["requests_without_usage"]:
        lines.append(_line("Answers without usage (not counted)", s["requests_without_usage"]))
    lines += _latencies(s, ["mean", "median", *(f"p{p:g}" for p in percentiles)])
    lines += _errors(s["errors"])
    lines.append(RULE)
    return "\n".join(lines)


def _latencies(s: Mapping[str, Any], columns: list[str]) -> list[str]:
    out = ["-" * 64, f"{'Latency (ms)':<14}" + "".join(f"{c:>12}" for c in columns)]
    for key, label in LATENCIES:
        dist = s[key]
        cells = [f"{dist[c]:>12.2f}" if dist else f"{'-':>12}" for c in columns]
        out.append(f"{label:<14}" + "".join(cells))
    if s["ttft_ms"] is None and s["completed"]:
        out.append("(TTFT, TPOT and ITL are measured on streamed answers only: use --stream)")
    if s["itl_sampled"]:
        out.append(f"(ITL percentiles from a uniform sample of {s['itl_samples']} gaps)")
    return out


def _errors(errors: Mapping[str, Mapping[str, Any]]) -> list[str]:
    if not errors:
        return []
    out = ["-" * 64, "Errors by kind:"]
    for kind, tally in sorted(errors.items(), key=lambda kv: -int(kv[1]["count"])):
        out.append(f"  {kind:<36}{tally['count']:>8}  {tally['message'][:120]}")
    return out


def document(
    config: Mapping[str, object],
    summary: Mapping[str, object],
    requests: list[dict[str, Any]] | None,
) -> dict[str, object]:
    """The ``--json`` document: the run's settings, its figures, and (when asked) one record
    per request."""
    doc: dict[str, object] = {"config": dict(config), "summary": dict(summary)}
    if requests is not None:
        doc["requests"] = requests
    return doc
