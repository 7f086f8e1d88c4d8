from __future__ import annotations

from pathlib import Path

import pytest

from neutrino.config import ConfigError, from_mapping, load


def test_defaults_start_the_embedded_mock() -> None:
    cfg = load([], environ={})
    assert cfg.embedded_mock
    assert (cfg.server.http_host, cfg.server.http_port) == ("127.0.0.1", 51055)
    assert cfg.limits.request_timeout_s == 120.0


def test_toml_file_and_flags(tmp_path: Path) -> None:
    path = tmp_path / "n.toml"
    path.write_text(
        """
[server]
http_port = 6000
[limits]
request_timeout_s = 5
max_queue = 7
[[engines]]
socket = "/run/engine.sock"
connections = 3
[model.families]
my-model = "llama3"
"""
    )
    cfg = load(["--config", str(path), "--http-address", "0.0.0.0:7000"], environ={})
    assert cfg.server.http_port == 7000 and cfg.server.http_host == "0.0.0.0"
    assert cfg.limits.request_timeout_s == 5.0 and cfg.limits.max_queue == 7
    assert cfg.engines[0].socket == "/run/engine.sock" and cfg.engines[0].connections == 3
    assert not cfg.embedded_mock
    assert cfg.model.families == {"my-model": "llama3"}
    env_cfg = load([], environ={"NEUTRINO_CFG": str(path)})
    assert env_cfg.server.http_port == 6000


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"nope": {}}, r"unknown section \[nope\] \(known: engines, server, "),
        ({"server": {"http_port": "x"}}, r"\[server\].http_port must be an integer, got 'x'"),
        ({"server": {"colour": 1}}, r"unknown key \[server\].colour \(known: http_host, "),
        ({"limits": 3}, r"\[limits\] must be a table, got 3"),
        ({"engines": {"socket": "/s"}}, r"\[\[engines\]\] must be an array of tables"),
        ({"engines": ["/s"]}, r"\[engines\]\[0\] must be a table, got '/s'"),
        ({"engines": [{"name": "a"}]}, r"\[engines\]\[0\] needs a socket path"),
        ({"engines": [{"socket": ""}]}, r"\[engines\]\[0\].socket must not be empty"),
        (
            {"engines": [{"address": "127.0.0.1:7000"}]},
            r"\[engines\]\[0\]: address and token_file go together",
        ),
        (
            {"engines": [{"address": "nope", "token_file": "/t"}]},
            r"\[engines\]\[0\].address must be HOST:PORT",
        ),
        (
            {"engines": [{"address": "127.0.0.1:7000", "token_file": "/no/such/token"}]},
            r"\[engines\]\[0\].token_file: cannot read '/no/such/token': no such file",
        ),
        (
            {"engines": [{"address": "127.0.0.1:7000", "socket": "/s", "token_file": "/t"}]},
            r"an engine on TCP \(address\) takes no socket or command",
        ),
        ({"engines": [{"socket": 5}]}, r"\[engines\]\[0\].socket must be a string, got 5"),
        ({"engines": [{"socket": "/s", "name": 5}]}, r"\[engines\]\[0\].name must be a string"),
        (
            {"engines": [{"socket": "/s"}, {"socket": "/t", "connections": "two"}]},
            r"^\[engines\]\[1\].connections must be an integer, got 'two'$",
        ),
        (
            {"engines": [{"socket": "/s", "connections": 2.5}]},
            r"\[engines\]\[0\].connections must be an integer, got 2.5",
        ),
        (
            {"engines": [{"socket": "/s", "connections": 0}]},
            r"\[engines\]\[0\].connections must be >= 1 and <= 1024, got 0",
        ),
        (
            {"engines": [{"socket": "/s", "conections": 3}]},
            r"unknown key \[engines\]\[0\].conections \(known: socket, name, connections, ",
        ),
    ],
)
def test_bad_config_is_refused_clearly(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_mapping(data)


# Every value with a rule beyond its type: one value refused, with the message's tail.
@pytest.mark.parametrize(
    ("section", "key", "value", "message"),
    [
        ("server", "http_host", "", "must not be empty, got ''"),
        ("server", "http_port", -1, "must be >= 0 and <= 65535, got -1"),
        ("server", "http_port", 65536, "must be >= 0 and <= 65535, got 65536"),
        ("server", "log_level", "loud", "must be one of debug, info, warning, error, got 'loud'"),
        ("server", "uvloop", "yes", "must be true or false, got 'yes'"),
        ("model", "default_family", "", "must not be empty, got ''"),
        ("tokenizer", "offload_chars", -1, "must be >= 0, got -1"),
        ("mock", "ttft_ms", -1, "must be >= 0, got -1.0"),
        ("mock", "itl_ms", float("inf"), "must be a finite number, got inf"),
        ("mock", "capacity", 0, "must be >= 1 and <= 4294967295, got 0"),
        ("mock", "models", "qwen", "must be a list of strings, got 'qwen'"),
        ("mock", "extra_args", [1], "must be a list of strings, got [1]"),
        ("limits", "max_body_bytes", 0, "must be >= 1, got 0"),
        ("limits", "max_queue", -1, "must be >= 0, got -1"),
        ("limits", "max_inflight", -1, "must be >= 0, got -1"),
        ("limits", "request_timeout_s", -5, "must be > 0 and <= 4294967, got -5.0"),
        ("limits", "request_timeout_s", 0, "must be > 0 and <= 4294967, got 0.0"),
        ("limits", "request_timeout_s", 5e6, "must be > 0 and <= 4294967, got 5000000.0"),
        ("limits", "request_timeout_s", float("nan"), "must be a finite number, got nan"),
        ("limits", "request_timeout_s", "120", "must be a number, got '120'"),
        ("limits", "request_timeout_s", True, "must be a number, got True"),
        ("limits", "stream_buffer_bytes", 0, "must be >= 1, got 0"),
        ("limits", "history_size", 0, "must be >= 1, got 0"),
        ("limits", "max_n", 0, "must be >= 1, got 0"),
        ("limits", "max_n", True, "must be an integer, got True"),
        ("limits", "max_stop_sequences", 0, "must be >= 1, got 0"),
        ("limits", "max_stop_chars", -3, "must be >= 1, got -3"),
        ("engine_link", "connect_timeout_s", 0, "must be > 0, got 0.0"),
        ("engine_link", "heartbeat_interval_s", -1, "must be >= 0, got -1.0"),
        ("engine_link", "heartbeat_timeout_s", 0, "must be > 0, got 0.0"),
        ("engine_link", "backoff_initial_s", 0, "must be > 0, got 0.0"),
        ("engine_link", "backoff_max_s", -2, "must be > 0, got -2.0"),
        ("http", "sse_keepalive_s", 0, "must be > 0, got 0.0"),
        ("http", "reasoning_field", "", "must not be empty, got ''"),
        ("http", "fast_path", 1, "must be true or false, got 1"),
        (
            "grpc",
            "address",
            "nonsense",
            "must be HOST:PORT with a port from 0 to 65535, got 'nonsense'",
        ),
        (
            "grpc",
            "address",
            "h:70000",
            "must be HOST:PORT with a port from 0 to 65535, got 'h:70000'",
        ),
        ("grpc", "max_message_bytes", 0, "must be >= 1 and <= 2147483647, got 0"),
        ("grpc", "max_message_bytes", 2**31, "must be >= 1 and <= 2147483647, got 2147483648"),
        ("grpc", "health_interval_s", 0, "must be > 0, got 0.0"),
        ("shutdown", "grace_s", -1, "must be >= 0, got -1.0"),
    ],
)
def test_every_value_is_checked_when_loaded(
    section: str, key: str, value: object, message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        from_mapping({section: {key: value}})
    assert str(err.value) == f"[{section}].{key} {message}"


def test_documented_zeros_and_edges_are_accepted() -> None:
    cfg = from_mapping(
        {
            "server": {"http_port": 0, "log_level": "DEBUG"},
            "tokenizer": {"offload_chars": 0},
            "limits": {"max_inflight": 0, "max_queue": 0, "request_timeout_s": 4294967},
            "engine_link": {"heartbeat_interval_s": 0},
            "grpc": {"address": "[::1]:0", "max_message_bytes": 2**31 - 1},
            "shutdown": {"grace_s": 0},
            "mock": {"ttft_ms": 0, "itl_ms": 1},
        }
    )
    assert cfg.limits.max_inflight == 0 and cfg.limits.request_timeout_s == 4294967.0
    assert isinstance(cfg.mock.itl_ms, float) and cfg.engine_link.heartbeat_interval_s == 0.0


def test_values_that_must_agree() -> None:
    with pytest.raises(ConfigError, match=r"backoff_max_s \(0.5\) must be >= .*backoff_initial_s"):
        from_mapping({"engine_link": {"backoff_initial_s": 1, "backoff_max_s": 0.5}})
    assert from_mapping({"engine_link": {"backoff_initial_s": 1, "backoff_max_s": 1}})


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--request-timeout", "-5"], "--request-timeout must be > 0 and <= 4294967, got -5.0"),
        (["--request-timeout", "0"], "--request-timeout must be > 0 and <= 4294967, got 0.0"),
        (["--request-timeout", "nan"], "--request-timeout must be a finite number, got nan"),
        (
            ["--request-timeout", "soon"],
            "argument --request-timeout: invalid float value: 'soon' (see neutrino --help)",
        ),
        (["--mock-itl-ms", "-1"], "--mock-itl-ms must be >= 0, got -1.0"),
        (["--mock-ttft-ms", "inf"], "--mock-ttft-ms must be a finite number, got inf"),
        (["--http-address", "127.0.0.1"], "--http-address must be HOST:PORT with a port from 0"),
        (["--http-address", ""], "--http-address must be HOST:PORT"),
        (["--http-address", "h:65536"], "--http-address must be HOST:PORT"),
        (["--grpc-address", "h:x"], "--grpc-address must be HOST:PORT"),
        (["--engine", ""], "--engine must not be empty, got ''"),
        (["--log-level", "loud"], "argument --log-level: invalid choice: 'loud'"),
        (["--colour"], "unrecognized arguments: --colour (see neutrino --help)"),
    ],
)
def test_bad_flags_are_refused_clearly(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(argv, environ={})
    assert str(err.value).startswith(message)


def test_flags_are_checked_after_the_file(tmp_path: Path) -> None:
    path = tmp_path / "n.toml"
    path.write_text("[limits]\nrequest_timeout_s = 30\n")
    cfg = load(["--config", str(path), "--request-timeout", "7"], environ={})
    assert cfg.limits.request_timeout_s == 7.0
    path.write_text("[limits]\nrequest_timeout_s = -1\n")
    with pytest.raises(ConfigError) as err:
        load(["--config", str(path), "--request-timeout", "7"], environ={})
    assert (
        str(err.value) == f"{path}: [limits].request_timeout_s must be > 0 and <= 4294967, got -1.0"
    )


def test_config_is_frozen() -> None:
    cfg = load([], environ={})
    with pytest.raises(AttributeError):
        cfg.server.http_port = 1  # type: ignore[misc]


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    with pytest.raises(ConfigError) as err:
        load(["--config", str(missing)], environ={})
    assert (
        str(err.value) == f"cannot read config file {missing} (--config): no such file or directory"
    )
    with pytest.raises(ConfigError) as err:
        load([], environ={"NEUTRINO_CFG": str(missing)})
    assert str(err.value) == (
        f"cannot read config file {missing} (NEUTRINO_CFG): no such file or directory"
    )
    with pytest.raises(ConfigError, match=r"cannot read config file .*: is a directory"):
        load(["--config", str(tmp_path)], environ={})
    bad = tmp_path / "bad.toml"
    bad.write_text("[server\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load(["--config", str(bad)], environ={})
    bad.write_bytes(b"[server]\nhttp_host = '\xff'\n")
    with pytest.raises(ConfigError, match=r"invalid TOML in .*bad.toml: not UTF-8"):
        load(["--config", str(bad)], environ={})


def test_parser_overrides_are_read_and_checked() -> None:
    from neutrino.pipeline.models import ModelTexts

    cfg = from_mapping(
        {"model": {"tool_parsers": {"m": "pythonic"}, "reasoning_parsers": {"m": "none"}}}
    )
    assert cfg.model.tool_parsers == {"m": "pythonic"}
    texts = ModelTexts(cfg.model)
    family = texts._with_parsers("m", texts._families["qwen3"])
    assert (family.tool_parser, family.reasoning_parser) == ("pythonic", None)
    assert texts._with_parsers("other", texts._families["qwen3"]).reasoning_parser == "think"
    bad = from_mapping({"model": {"tool_parsers": {"m": "bogus"}}})
    with pytest.raises(ValueError, match="unknown tool parser 'bogus'"):
        ModelTexts(bad.model)


def test_unknown_parser_is_a_clean_startup_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    cfg = tmp_path / "bad.toml"
    cfg.write_text('[model]\ntool_parsers = { "x" = "bogus" }\n')
    run = subprocess.run(
        [sys.executable, "-m", "neutrino", "--config", str(cfg), "--engine", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "unknown tool parser 'bogus'" in run.stderr and "Traceback" not in run.stderr


def test_local_tokenizer_and_template_paths_are_checked(tmp_path: Path) -> None:
    template = tmp_path / "chat.jinja"
    template.write_text("{{ messages }}")
    model = {"tokenizers": {"m": str(tmp_path)}, "chat_templates": {"m": str(template)}}
    cfg = from_mapping({"model": model})
    assert cfg.model.tokenizers == {"m": str(tmp_path)}
    assert cfg.model.chat_templates == {"m": str(template)}
    missing = str(tmp_path / "nope")
    for bad, message in (
        ({"tokenizers": {"m": missing}}, r"model.tokenizers: 'm': no such file or folder .*nope"),
        ({"tokenizers": {"m": ""}}, "model.tokenizers: 'm': no such file or folder"),
        ({"chat_templates": {"m": missing}}, r"model.chat_templates: 'm': no such file .*nope"),
        ({"chat_templates": {"m": str(tmp_path)}}, "model.chat_templates: 'm': no such file"),
        ({"tokenizers": "/models/m"}, r"\[model\].tokenizers must be a table of strings"),
        ({"tokenizers": {"m": 3}}, r"\[model\].tokenizers must be a table of strings"),
        ({"chat_templates": ["t.jinja"]}, r"\[model\].chat_templates must be a table of"),
    ):
        with pytest.raises(ConfigError, match=message):
            from_mapping({"model": bad})


def test_missing_tokenizer_path_is_a_clean_startup_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    cfg = tmp_path / "bad.toml"
    cfg.write_text(f'[model]\ntokenizers = {{ "x" = "{tmp_path / "gone"}" }}\n')
    run = subprocess.run(
        [sys.executable, "-m", "neutrino", "--config", str(cfg), "--engine", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert f"model.tokenizers: 'x': no such file or folder '{tmp_path / 'gone'}'" in run.stderr
