"""Writes the documentation site's two references from the code, so they cannot drift:

    python tools/docs_reference.py docs/reference

* ``configuration.md``: every section and key the configuration loader accepts
  (``neutrino/config``), with its default and the comment the code gives it, then every
  command-line flag with its help;
* ``metrics.md``: every series ``/metrics`` exports (``neutrino/observability/metrics.py``),
  with its type, labels and help.

``tests/integration/test_docs.py`` checks the committed pages are this script's output,
that they name every key and series, and that a live server's scrape has no other series.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import sys
from collections.abc import Iterator
from dataclasses import MISSING, Field, fields
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from neutrino import config as cfg  # noqa: E402
from neutrino.config import engines, fleet, routes, routing  # noqa: E402
from neutrino.observability import metrics  # noqa: E402

# Keys the [auth] section reads (neutrino/config/keys.py) and what they are: the section has
# no dataclass of its own (it is turned into key tables), so its words are kept here.
AUTH = {
    "api_keys": ("[]", "API keys clients send (`Authorization: Bearer` or `x-api-key`)."),
    "admin_keys": ("[]", "Keys that may also call the admin routes."),
    "api_keys_file": ('""', "A file of keys, one per line (`#` comments)."),
    "keys": ("[]", "`[[auth.keys]]` tables, one key each (below)."),
}
AUTH_TABLE = {
    "key": "The key itself (or `sha256`).",
    "sha256": "The key's SHA-256, 64 hex digits (instead of `key`).",
    "name": "The key's name in logs, history and metrics.",
    "models": "The models it may use (default: every model).",
    "max_concurrency": "Its requests in flight at once (0: no limit of its own).",
    "admin": "Whether it may call the admin routes.",
}


def _comments(cls: type[Any]) -> dict[str, str]:
    """Each field's comment: the comment lines right above it and its trailing one."""
    try:
        lines, _ = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return {}
    src = _dedent(lines)
    tree = ast.parse("".join(src))
    out: dict[str, str] = {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    previous: ast.AnnAssign | None = None
    for node in body:
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            previous = None
            continue
        words: list[str] = []
        i = node.lineno - 2
        while i >= 0 and src[i].strip().startswith("#"):
            words.insert(0, src[i].strip().lstrip("#").strip())
            i -= 1
        for j in range(node.lineno - 1, (node.end_lineno or node.lineno)):
            code = src[j]
            if "#" in code and not code.strip().startswith("#"):
                tail = code.split("#", 1)[1].strip()
                if not tail.startswith(("type:", "fmt:", "noqa")):
                    words.append(tail)
        if not words and previous is not None and previous.end_lineno == node.lineno - 1:
            # A field right under another that has words: one comment for the group.
            assert isinstance(previous.target, ast.Name)
            words = [out.get(previous.target.id, "")]
        out[node.target.id] = " ".join(words)
        previous = node
    return out


def _dedent(lines: list[str]) -> list[str]:
    pad = len(lines[0]) - len(lines[0].lstrip())
    return [line[pad:] if line[:pad].isspace() else line for line in lines]


def _default(f: Field[Any]) -> str:
    if f.default is not MISSING:
        value = f.default
    elif f.default_factory is not MISSING:
        value = f.default_factory()
    else:
        return "(required)"
    return _toml(value)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, tuple | list | frozenset | set):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{}"
            if not value
            else "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
        )
    if value is None:
        return "(unset)"
    return repr(value)


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def _table(rows: list[tuple[str, str, str]]) -> list[str]:
    out = ["| key | default | what |", "|---|---|---|"]
    out += [f"| `{k}` | `{_escape(d)}` | {_escape(w)} |" for k, d, w in rows]
    return out


def _dataclass_rows(
    cls: type[Any], only: dict[str, Any] | None = None
) -> list[tuple[str, str, str]]:
    notes = _comments(cls)
    rows = []
    for f in fields(cls):
        if only is not None and f.name not in only:
            continue
        default = _toml(only[f.name]) if only is not None else _default(f)
        rows.append((f.name, default, notes.get(f.name, "")))
    return rows


def sections() -> Iterator[tuple[str, list[tuple[str, str, str]]]]:
    """(TOML header, rows) for every section and table the loader accepts."""
    for name, cls in cfg._SECTIONS.items():
        yield f"[{name}]", _dataclass_rows(cls)
    yield "[[engines]]", _dataclass_rows(cfg.EngineConfig, engines.ENGINE_KEYS)
    yield "[auth]", [(k, d, w) for k, (d, w) in AUTH.items()]
    yield "[[auth.keys]]", [(k, "", w) for k, w in AUTH_TABLE.items()]
    rows = _dataclass_rows(routing.RoutingConfig)
    yield "[routing]", [r for r in rows if r[0] != "models"]
    yield (
        '[routing.models."NAME"]',
        [(k, "", f"The model's own {k} (as [routing].{k})") for k in routing.MODEL_KEYS],
    )
    yield "[[routes]]", _dataclass_rows(routes.RouteConfig)
    yield "[[nodes]]", [r for r in _dataclass_rows(fleet.NodeEndpoint) if r[0] != "token"]
    rows = _dataclass_rows(fleet.CatalogueEntry)
    replicas = {r[0]: r for r in _dataclass_rows(fleet.Replicas)}
    yield (
        "[[catalogue]]",
        [
            (k, "{ min = 0, max = 1 }", f"min: {replicas['min'][2]}; max: {replicas['max'][2]}")
            if k == "replicas"
            else (k, d, w)
            for k, d, w in rows
        ],
    )
    yield "[fleet]", [r for r in _dataclass_rows(fleet.FleetConfig) if r[0] != "token"]


def configuration() -> str:
    out = [
        "# Configuration reference",
        "",
        "Generated from `neutrino/config` by `tools/docs_reference.py` (do not edit by hand).",
        "Sources, later ones winning: built-in defaults, a TOML file (`--config FILE` or",
        "`NEUTRINO_CFG`), then command-line flags. An unknown section or key is an error",
        "naming it. The [configuration guide](../configuration.md) says how the parts fit.",
        "",
    ]
    for header, rows in sections():
        out += [f"## `{header}`", "", *_table(rows), ""]
    out += ["## Command-line flags", "", "| flag | what |", "|---|---|"]
    for action in cfg.parser()._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        flags = ", ".join(f"`{o}`" for o in action.option_strings)
        out.append(f"| {flags} | {_escape(action.help or '')} |")
    return "\n".join(out) + "\n"


def metric_families() -> list[tuple[str, str, tuple[str, ...], str]]:
    """(name, type, labels, help) of every family /metrics exports."""
    out = []
    for fam in metrics.families({"fleet": {"nodes": {}, "models": {}}}):
        name = fam.name + ("_total" if fam.type == "counter" else "")
        labels = tuple(getattr(fam, "_labelnames", ()))
        out.append((name, fam.type, labels, fam.documentation))
    return out


def metrics_page() -> str:
    out = [
        "# Metrics reference",
        "",
        "Generated from `neutrino/observability/metrics.py` by `tools/docs_reference.py` (do",
        "not edit by hand). Every series `GET /metrics` exports, in Prometheus' text format;",
        "[Metrics, traces and logs](../observability.md) says what the labels hold and how",
        "the values are gathered. Histograms export `_bucket`, `_sum` and `_count`.",
        "",
        "| series | type | labels | what |",
        "|---|---|---|---|",
    ]
    for name, kind, labels, help_text in metric_families():
        shown = ", ".join(f"`{x}`" for x in labels) or "(none)"
        out.append(f"| `{name}` | {kind} | {shown} | {_escape(help_text)} |")
    out += [
        "| `process_*` | | | The process's CPU, memory and open descriptors "
        "(prometheus_client's process collector; one process: workers' merged scrape "
        "leaves them out). |",
    ]
    return "\n".join(out) + "\n"


def pages() -> dict[str, str]:
    return {"configuration.md": configuration(), "metrics.md": metrics_page()}


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in pages().items():
        (folder / name).write_text(text, encoding="utf-8")
