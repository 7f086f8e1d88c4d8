"""[[nodes]], [[catalogue]] and [fleet]: typed and checked at load, each error naming its key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neutrino.config import ConfigError, from_mapping, load


def _token(tmp_path: Path) -> str:
    path = tmp_path / "token"
    path.write_text("node-secret\n")
    return str(path)


def _fleet(tmp_path: Path, **entry: Any) -> dict[str, Any]:
    return {
        "nodes": [
            {"name": "a", "endpoint": "http://10.0.0.1:51070", "token_file": _token(tmp_path)}
        ],
        "catalogue": [{"id": "m", "file": "m.gguf", "memory_mb": 400, **entry}],
    }


def test_a_fleet_loads(tmp_path: Path) -> None:
    cfg = from_mapping(
        {**_fleet(tmp_path, pinned_on=["a"], replicas={"min": 1, "max": 3}), "fleet": {"poll_s": 1}}
    )
    (node,) = cfg.nodes
    assert node.token == "node-secret" and "node-secret" not in repr(cfg)
    (entry,) = cfg.catalogue
    assert entry.harness == "llamacpp" and entry.replicas.min == 1 and entry.replicas.max == 3
    assert cfg.fleet.poll_s == 1.0 and cfg.has_fleet and not cfg.embedded_mock
    replicas = from_mapping(_fleet(tmp_path, replicas={"min": 2})).catalogue[0].replicas
    assert (replicas.min, replicas.max) == (2, 2)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"memory_mb": 0}, r"needs memory_mb or vram_mb"),
        ({"vram_mb": 100}, r"give memory_mb \(a CPU model\) or vram_mb"),
        ({"file": "../etc/x"}, r"\.file must be a path inside the node's models folder"),
        ({"id": "bad id"}, r"\.id must be letters"),
        ({"colour": 1}, r"unknown key \[catalogue\]\[0\]\.colour"),
        ({"replicas": {"min": 3, "max": 2}}, r"replicas\.max must be at least"),
        ({"replicas": {"most": 1}}, r"unknown key \[catalogue\]\[0\]\.replicas\.most"),
        ({"pinned_on": ["z"]}, r"pinned_on names no node 'z'"),
        ({"slots": 0}, r"\.slots must be >= 1"),
    ],
)
def test_bad_catalogue_entries_are_refused(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        from_mapping(_fleet(tmp_path, **change))


def test_bad_nodes_and_fleet_are_refused(tmp_path: Path) -> None:
    token = _token(tmp_path)
    cases: list[tuple[dict[str, Any], str]] = [
        (
            {"nodes": [{"name": "a", "endpoint": "10.0.0.1:1", "token_file": token}]},
            "endpoint must be",
        ),
        ({"nodes": [{"name": "a", "endpoint": "http://h:1"}]}, "token_file must name"),
        (
            {"nodes": [{"name": "a", "endpoint": "http://h:1", "token_file": "/no/file"}]},
            "cannot read",
        ),
        (
            {"nodes": [{"name": "a", "endpoint": "http://h:1", "token_file": token}] * 2},
            "two nodes",
        ),
        ({"catalogue": [{"id": "m", "file": "m", "memory_mb": 1}]}, "needs node agents"),
        ({"fleet": {"dns": ["agents:51070"]}}, r"dns need \[fleet\]\.token_file"),
        ({"fleet": {"poll_s": 0}}, r"\[fleet\]\.poll_s must be > 0"),
        ({"fleet": {"nope": 1}}, r"unknown key \[fleet\]\.nope"),
    ]
    for data, message in cases:
        with pytest.raises(ConfigError, match=message):
            from_mapping(data)


def test_the_control_plane_runs_in_one_process(tmp_path: Path) -> None:
    config = tmp_path / "n.toml"
    config.write_text(
        f'[[nodes]]\nname = "a"\nendpoint = "http://h:1"\ntoken_file = "{_token(tmp_path)}"\n'
    )
    with pytest.raises(ConfigError, match=r"\[server\]\.workers must be 1"):
        load(["--config", str(config), "--workers", "2"], environ={})
