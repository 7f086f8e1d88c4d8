"""The node agent's sans-IO parts: /proc parsers, the load body's checks, its flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from neutrino.config import ConfigError
from neutrino.node import hostinfo
from neutrino.node.api import load_spec
from neutrino.node.config import load, parse_size
from neutrino.node.gpu import cuda_version
from neutrino.node.table import NodeError


def test_proc_texts_are_read_as_the_kernel_writes_them() -> None:
    info = hostinfo.meminfo(
        "MemTotal:       24683520 kB\nMemAvailable:   20000000 kB\nHugePages_Total:       0\n"
    )
    assert info == {
        "MemTotal": 24683520 * 1024,
        "MemAvailable": 20000000 * 1024,
        "HugePages_Total": 0,
    }
    assert hostinfo.cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 9654\n") == "AMD EPYC 9654"
    assert hostinfo.cpu_model("Model\t\t: Raspberry Pi 5\n") == "Raspberry Pi 5"
    assert hostinfo.os_name('NAME="Debian"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n') == (
        "Debian GNU/Linux 12 (bookworm)"
    )
    # A command name with spaces and parentheses: the fields follow the last ")".
    stats = [
        (10, "10 (a (b) c) S 1 10 10"),
        (11, "11 (python) S 10 10 10"),
        (12, "12 (x) S 11 1 1"),
        (13, "13 (other) S 1 13 13"),
    ]
    parent_of = hostinfo.parents(stats)
    assert parent_of == {10: 1, 11: 10, 12: 11, 13: 1}
    assert hostinfo.descendants(10, parent_of) == {10, 11, 12}
    assert hostinfo.resident_bytes("Name:\tx\nVmRSS:\t  2048 kB\n") == 2 << 20
    assert hostinfo.resident_bytes("Name:\tzombie\n") == 0


def test_the_process_tree_of_this_process_holds_memory() -> None:
    import os

    trees = hostinfo.process_trees([os.getpid()])
    assert os.getpid() in trees[os.getpid()]
    assert hostinfo.tree_resident_bytes(trees[os.getpid()]) > 10 << 20


def test_sizes_and_cuda_versions() -> None:
    assert parse_size("2G", "x") == 2 << 30 and parse_size("512MiB", "x") == 512 << 20
    assert parse_size("1.5g", "x") == 3 << 29 and parse_size("1048576", "x") == 1 << 20
    with pytest.raises(ConfigError, match="must be a size"):
        parse_size("lots", "--memory-budget")
    assert cuda_version(12040) == "12.4" and cuda_version(13000) == "13.0"


def test_a_load_body_is_checked_field_by_field(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "w.gguf").write_bytes(b"")
    spec, wait, timeout = load_spec(
        {"model": "org/m-1", "harness": "llamacpp", "file": "sub/w.gguf", "devices": [1, 0],
         "vram_mb": 4000, "wait": True},
        str(tmp_path), devices=2,
    )  # fmt: skip
    assert spec.file == tmp_path / "sub" / "w.gguf" and spec.devices == (0, 1)
    assert spec.tensor_parallel == 2 and wait and timeout == 300.0
    bad = [
        ([], "must be a JSON object"),
        ({"model": "m", "harness": "h", "file": "m.gguf", "devices": [0, 0]}, "twice"),
        ({"model": "m", "harness": "h", "file": "m.gguf", "devices": [2]}, "below 2"),
        ({"model": "m", "harness": "h", "file": "m.gguf", "devices": [0], "tensor_parallel": 2},
         "must be the number of devices"),
        ({"model": "m", "harness": "h", "file": "m.gguf", "wait": 1}, "wait must be"),
        ({"model": "m", "harness": "h", "file": "m.gguf", "timeout_s": 0}, "timeout_s"),
        ({"model": "m", "harness": "", "file": "m.gguf"}, "harness must be a string, not empty"),
        ({"model": "m", "harness": "h", "file": "sub/../../x"}, "inside the models folder"),
        ({"model": "m" * 200, "harness": "h", "file": "m.gguf"}, "model must be an id"),
    ]  # fmt: skip
    for body, message in bad:
        with pytest.raises(NodeError, match=message):
            load_spec(body, str(tmp_path), devices=2)


def test_the_agent_flags(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    cfg = load(["--token-file", str(token), "--models-dir", str(tmp_path), "--memory-budget", "1G"])
    assert cfg.host == "127.0.0.1" and cfg.memory_budget == 1 << 30 and cfg.token == "s3cret"
    assert "s3cret" not in repr(cfg)
    env = {"NODE_TOKEN": "from-env"}
    cfg = load(["--token-env", "NODE_TOKEN", "--models-dir", str(tmp_path), "--address",
                "0.0.0.0:7000", "--advertise", "gpu-7"], env)  # fmt: skip
    assert cfg.token == "from-env" and cfg.advertised == "gpu-7" and cfg.port == 7000
    (tmp_path / "node.toml").write_text(
        'threads = 4\n[[harness]]\nname = "sglang"\nkind = "http"\ncommand = ["sglang", "{file}"]\n'
    )
    cfg = load(["--token-env", "NODE_TOKEN", "--models-dir", str(tmp_path), "--config",
                str(tmp_path / "node.toml")], env)  # fmt: skip
    assert cfg.threads == 4 and cfg.commands[0].name == "sglang" and cfg.commands[0].kind == "http"
    for argv, message in [
        (["--models-dir", str(tmp_path)], "every call needs a token"),
        (["--token-env", "NOPE", "--models-dir", str(tmp_path)], r"\$NOPE is not set"),
        (["--token-env", "NODE_TOKEN", "--models-dir", str(tmp_path / "no")], "no such folder"),
        (
            ["--token-env", "NODE_TOKEN", "--models-dir", str(tmp_path), "--address", "x"],
            "HOST:PORT",
        ),
        (
            ["--token-env", "NODE_TOKEN", "--models-dir", str(tmp_path), "--etcd", "etcd:2379"],
            "URL",
        ),
    ]:
        with pytest.raises(ConfigError, match=message):
            load(argv, env)
