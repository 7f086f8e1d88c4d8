"""Managed engines' configuration and command lines (``[[engines]] command``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from neutrino.config import ConfigError, EngineConfig, from_mapping, load_file
from neutrino.engine.managed import ManagedEngines, command_argv, mock_engine, socket_path

REPO = Path(__file__).parents[3]


def test_a_command_is_a_managed_engine_with_its_options() -> None:
    cfg = from_mapping(
        {
            "engines": [
                {
                    "name": "llama",
                    "command": ["python", "-m", "x"],
                    "env": {"A": "1"},
                    "cwd": "/srv",
                    "ready_timeout_s": 5,
                    "stop_timeout_s": 2.5,
                },
                {"socket": "/run/other.sock"},
            ]
        }
    )
    managed, plain = cfg.engines
    assert managed.managed and not plain.managed
    assert managed.command == ("python", "-m", "x") and dict(managed.env) == {"A": "1"}
    assert (managed.cwd, managed.ready_timeout_s, managed.stop_timeout_s) == ("/srv", 5.0, 2.5)
    assert managed.socket == ""  # Neutrino's private one, given at start
    assert not cfg.embedded_mock


@pytest.mark.parametrize(
    ("engines", "message"),
    [
        ([{"command": []}], r"\[engines\]\[0\]\.command must not be empty"),
        ([{"command": "python -m x"}], r"\[engines\]\[0\]\.command must be a list of strings"),
        ([{"command": ["x"], "ready_timeout_s": 0}], r"ready_timeout_s must be > 0"),
        ([{"command": ["x"], "env": {"A": 1}}], r"\.env must be a table of strings"),
        ([{"name": "a", "command": ["x"]}, {"name": "a", "socket": "/s"}], "two engines are named"),
        ([{"name": "a"}], "needs a socket path .* or a command"),
    ],
)
def test_bad_managed_engines_are_refused(engines: list[object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_mapping({"engines": engines})


def test_python_is_this_interpreter_and_the_socket_is_given() -> None:
    appended = command_argv(EngineConfig(command=("python", "-m", "e", "--x")), "/s.sock")
    assert appended == [sys.executable, "-m", "e", "--x", "--socket", "/s.sock"]
    placed = command_argv(EngineConfig(command=("/bin/e", "--listen={socket}")), "/s.sock")
    assert placed == ["/bin/e", "--listen=/s.sock"]


def test_sockets_are_private_unless_configured(tmp_path: Path) -> None:
    assert socket_path(EngineConfig(socket="/run/e.sock", command=("e",)), tmp_path) == (
        "/run/e.sock"
    )
    odd = socket_path(EngineConfig(name="a/b c", command=("e",)), tmp_path)
    assert odd == str(tmp_path / "a_b_c.sock")


def test_a_kept_process_keeps_its_socket_and_a_changed_one_is_new(tmp_path: Path) -> None:
    fleet = ManagedEngines()
    try:
        (first,) = fleet.resolve((EngineConfig(name="e", command=("python", "-m", "x")),))
        assert first.socket.startswith(str(fleet.folder))
        from neutrino.engine.managed import ManagedEngine

        fleet.engines["e"] = ManagedEngine(first, fleet.folder)
        (same,) = fleet.resolve((EngineConfig(name="e", command=("python", "-m", "x")),))
        assert same.socket == first.socket and same.same_process(first)
        (changed,) = fleet.resolve((EngineConfig(name="e", command=("python", "-m", "y")),))
        assert not changed.same_process(first)
        assert changed.socket != first.socket  # it starts while the old one still serves
    finally:
        fleet.remove_folder()


def test_the_embedded_mock_is_a_managed_engine() -> None:
    cfg = from_mapping({"mock": {"models": ["m1"], "capacity": 3}})
    mock = mock_engine(cfg.mock)
    assert mock.managed and mock.name == "embedded-mock"
    assert mock.command[:3] == (sys.executable, "-m", "mocks.mock_ie")
    assert "--model" in mock.command and "m1" in mock.command


def test_make_run_real_config_loads() -> None:
    cfg = load_file(REPO / "examples" / "llamacpp.toml")
    (engine,) = cfg.engines
    assert engine.managed and engine.command[:3] == ("python", "-m", "neutrino.engines.llamacpp")
    assert "smollm2-135m-instruct" in engine.command
    gguf = engine.command[engine.command.index("--gguf") + 1]
    assert gguf == ".venv/share/neutrino/gguf/SmolLM2-135M-Instruct.Q4_1.gguf"  # make install's
