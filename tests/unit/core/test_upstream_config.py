"""HTTP upstreams in the configuration (``[[engines]] url = ...``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neutrino.config import ConfigError, from_mapping, load_file


def test_an_upstream_with_its_options() -> None:
    cfg = from_mapping(
        {
            "engines": [
                {
                    "name": "vllm",
                    "url": "http://10.0.0.5:8000/v1",
                    "mode": "passthrough",
                    "models": ["llama-3-8b"],
                    "upstream_names": {"llama-3-8b": "meta-llama/Meta-Llama-3-8B-Instruct"},
                    "capacity": 32,
                    "refresh_s": 5,
                },
                {"url": "https://llama.internal:8443"},
            ]
        }
    )
    relay, tokens = cfg.engines
    assert relay.upstream and not relay.managed
    assert (relay.mode, relay.capacity, relay.refresh_s) == ("passthrough", 32, 5.0)
    assert relay.models == ("llama-3-8b",)
    assert dict(relay.upstream_names) == {"llama-3-8b": "meta-llama/Meta-Llama-3-8B-Instruct"}
    assert (tokens.mode, tokens.name) == ("tokens", "engine1")
    assert not cfg.embedded_mock


def test_the_api_key_is_read_from_the_named_variable_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UPSTREAM_KEY", "sk-secret")
    cfg = from_mapping({"engines": [{"url": "http://h:1/v1", "api_key_env": "UPSTREAM_KEY"}]})
    (up,) = cfg.engines
    assert up.api_key == "sk-secret"
    assert "sk-secret" not in repr(up)  # never printed with the configuration


@pytest.mark.parametrize(
    ("engine", "message"),
    [
        ({"url": "localhost:8000"}, r"\.url must be http://HOST:PORT/PATH"),
        ({"url": "ftp://h:1/v1"}, r"\.url must be http://HOST:PORT/PATH"),
        ({"url": "http://h:1/v1", "mode": "proxy"}, r"\.mode must be one of 'tokens'"),
        ({"url": "http://h:1/v1", "capacity": 0}, r"\.capacity must be >= 1"),
        ({"url": "http://h:1/v1", "socket": "/s"}, "an upstream url takes no socket, command"),
        ({"url": "http://h:1/v1", "api_key_env": "NO_SUCH_VAR_HERE"}, r"\$NO_SUCH_VAR_HERE"),
    ],
)
def test_bad_upstreams_are_refused(engine: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_mapping({"engines": [engine]})


@pytest.mark.parametrize(
    "name", ["upstream-tokens.toml", "upstream-passthrough.toml", "upstream-router.toml"]
)
def test_the_readme_examples_load(name: str) -> None:
    (up,) = load_file(str(Path(__file__).parents[3] / "examples" / name)).engines
    assert up.upstream and up.url == "http://127.0.0.1:8080/v1"
    mode = name.removeprefix("upstream-").removesuffix(".toml")
    assert up.mode == ("tokens" if mode == "router" else mode)
