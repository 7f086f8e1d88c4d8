"""Writes packaging/grafana/neutrino.json, the Grafana dashboard of Neutrino's metrics:

    python tools/grafana_dashboard.py packaging/grafana/neutrino.json

The panels are listed below once, as PromQL over the series ``neutrino/observability``
exports; ``tests/integration/test_grafana_dashboard.py`` checks that the committed file is
this script's output, that promtool parses every expression, and that a real Prometheus
scraping a live Neutrino gives each one data.
"""

from __future__ import annotations

import json
import sys
from typing import Any

RATE = "$__rate_interval"
MODEL = 'model=~"$model"'
QUANTILES = ((0.5, "p50"), (0.9, "p90"), (0.99, "p99"))


def _quantiles(metric: str) -> list[tuple[str, str]]:
    return [
        (
            f"histogram_quantile({q}, sum by (le) (rate({metric}_bucket{{{MODEL}}}[{RATE}])))",
            name,
        )
        for q, name in QUANTILES
    ]


# (title, unit, description, [(expr, legend)])
LATENCY = (
    ("Time to first token", "s", "From receiving a request to its first token.",
     _quantiles("neutrino_time_to_first_token_seconds")),
    ("Inter-token latency", "s",
     "Every gap between deliveries of a request's tokens (a stall shows as itself).",
     _quantiles("neutrino_inter_token_latency_seconds")),
    ("End-to-end latency", "s", "From receiving a request to its end.",
     _quantiles("neutrino_e2e_request_latency_seconds")),
    ("Queue time", "s", "Time a request waited for an engine slot.",
     _quantiles("neutrino_request_queue_time_seconds")),
)  # fmt: skip
THROUGHPUT = (
    ("Tokens per second", "short", "Generated and prompt tokens of finished requests.", [
        (f"sum by (model) (rate(neutrino_generation_tokens_total{{{MODEL}}}[{RATE}]))",
         "generated {{model}}"),
        (f"sum by (model) (rate(neutrino_prompt_tokens_total{{{MODEL}}}[{RATE}]))",
         "prompt {{model}}"),
    ]),
    ("Requests per second", "reqps", "Ended requests by outcome.", [
        (f"sum by (outcome) (rate(neutrino_requests_total[{RATE}]))", "{{outcome}}"),
    ]),
    ("Errors by kind", "reqps", "Requests that failed, by the kind of error.", [
        (f'sum by (outcome) (rate(neutrino_requests_total{{outcome!~"ok|cancelled"}}[{RATE}]))',
         "{{outcome}}"),
    ]),
    ("Requests in flight", "short", "Running at an engine, and waiting for a slot.", [
        ("sum(neutrino_num_requests_running)", "running"),
        ("sum(neutrino_num_requests_waiting)", "waiting"),
    ]),
    ("Prefix cache hits", "percentunit", "Prompt tokens the engines found cached.", [
        (f"sum(rate(neutrino_cached_tokens_total{{{MODEL}}}[{RATE}])) / "
         f"sum(rate(neutrino_prompt_tokens_total{{{MODEL}}}[{RATE}]))", "cached share"),
    ]),
)  # fmt: skip
ENGINES = (
    ("Engine connections", "short", "Open connections to each engine (0: it is down).", [
        ("sum by (engine) (neutrino_engine_connections)", "{{engine}}"),
    ]),
    ("Engine reconnects and heartbeat misses", "short", "Per second, by engine.", [
        (f"sum by (engine) (rate(neutrino_engine_reconnects_total[{RATE}]))",
         "reconnects {{engine}}"),
        (f"sum by (engine) (rate(neutrino_engine_heartbeat_misses_total[{RATE}]))",
         "heartbeat misses {{engine}}"),
    ]),
    ("Tokens after disconnect", "short",
     "Tokens engines produced for requests whose client had gone, per second, and cancel "
     "frames sent.", [
        (f"sum by (engine) (rate(neutrino_tokens_after_disconnect_total[{RATE}]))",
         "tokens {{engine}}"),
        (f"sum by (engine) (rate(neutrino_engine_cancel_frames_total[{RATE}]))",
         "cancels {{engine}}"),
    ]),
)  # fmt: skip


def _panel(pid: int, title: str, unit: str, desc: str, targets: list[tuple[str, str]],
           x: int, y: int) -> dict[str, Any]:  # fmt: skip
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "description": desc,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [
            {
                "refId": chr(ord("A") + i),
                "expr": expr,
                "legendFormat": legend,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
            }
            for i, (expr, legend) in enumerate(targets)
        ],
    }


def dashboard() -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    y = 0
    pid = 1
    for row, group in (("Latency", LATENCY), ("Throughput and errors", THROUGHPUT),
                       ("Engines", ENGINES)):  # fmt: skip
        panels.append({"id": pid, "type": "row", "title": row, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})  # fmt: skip
        pid, y = pid + 1, y + 1
        for i, (title, unit, desc, targets) in enumerate(group):
            panels.append(_panel(pid, title, unit, desc, targets, 12 * (i % 2), y + 8 * (i // 2)))
            pid += 1
        y += 8 * ((len(group) + 1) // 2)
    return {
        "title": "Neutrino",
        "uid": "neutrino-overview",
        "description": "Neutrino's request latency, throughput, errors and engines.",
        "tags": ["neutrino", "llm", "inference"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                },
                {
                    "name": "model",
                    "label": "Model",
                    "type": "query",
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "query": {
                        "query": 'label_values(neutrino_requests_total{model!=""}, model)',
                        "refId": "models",
                    },
                    "definition": 'label_values(neutrino_requests_total{model!=""}, model)',
                    "includeAll": True,
                    "multi": True,
                    "allValue": ".*",
                    "refresh": 2,
                    "current": {"text": "All", "value": "$__all"},
                    "hide": 0,
                },
            ]
        },
        "annotations": {"list": []},
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1], "w", encoding="utf-8") as fh:
        fh.write(render())
