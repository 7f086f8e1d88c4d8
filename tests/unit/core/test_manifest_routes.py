"""Manifest routes: the ``[[routes]]`` tables and the mapping of a router's answer to a
model (``config/routes.py``, ``pipeline/routes.py``)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from neutrino.config import ConfigError, from_mapping
from neutrino.config.routes import RouteConfig
from neutrino.engine.messages import GuidedMode
from neutrino.pipeline.chat import Message
from neutrino.pipeline.request import ChatPrompt, GenerateRequest
from neutrino.pipeline.routes import Hop, Routes

ROUTE: dict[str, Any] = {
    "name": "auto",
    "router": "mini",
    "intents": {"code": "coder", "math": "mathy"},
    "fallback": "chatty",
}


def _route(**changes: Any) -> RouteConfig:
    (route,) = from_mapping({"routes": [{**ROUTE, **changes}]}).routes
    return route


def test_a_route_table_loads_with_its_defaults() -> None:
    route = _route()
    assert route.max_tokens == 8 and route.warm is True
    assert route.models == ("coder", "mathy", "chatty")
    assert "one of: code, math" in route.prompt
    assert _route(instruction="Pick.").prompt == "Pick."


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"intents": {}}, "intents must be a table"),
        ({"fallback": ""}, "fallback must be a non-empty string"),
        ({"max_tokens": 0}, "max_tokens must be an integer from 1 to 256"),
        ({"color": "red"}, "unknown key"),
        ({"router": "auto"}, "may not route to itself"),
        ({"intents": {"x": "auto"}}, "may not route to itself"),
    ],
)
def test_bad_route_tables_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _route(**changes)


def test_routes_may_not_share_a_name_or_route_to_a_route() -> None:
    with pytest.raises(ConfigError, match="used twice"):
        from_mapping({"routes": [ROUTE, ROUTE]})
    other = {**ROUTE, "name": "auto2", "fallback": "auto"}
    with pytest.raises(ConfigError, match="may not route to a route"):
        from_mapping({"routes": [ROUTE, other]})
    with pytest.raises(ConfigError, match="needs router"):
        from_mapping({"routes": [{"name": "x", "intents": {"a": "b"}, "fallback": "b"}]})


@pytest.mark.parametrize(
    ("answer", "hop"),
    [
        ("code", Hop("auto", "code", "coder")),
        (" Math.\n", Hop("auto", "Math", "mathy")),  # case and punctuation forgiven
        ("poetry", Hop("auto", "", "chatty")),
        (None, Hop("auto", "", "chatty")),  # the router failed
    ],
)
def test_an_answer_maps_to_its_model_or_the_fallback(answer: str | None, hop: Hop) -> None:
    assert Routes.hop(_route(), answer) == hop


def test_the_router_request_asks_for_one_of_the_intents() -> None:
    route = _route()
    req = GenerateRequest(
        request_id="chatcmpl-1",
        model="auto",
        prompt=ChatPrompt(
            (
                Message("system", "Be brief."),
                Message("user", "First question"),
                Message("assistant", "An answer"),
                Message("user", "Sort this list"),
            )
        ),
    )
    ask = Routes((route,)).router_request(route, req)
    assert ask.request_id == "chatcmpl-1-route" and ask.model == "mini"
    assert [m.role for m in ask.chat.messages] == ["system", "user"]
    assert ask.chat.messages[1].content == "Sort this list"  # the last user turn only
    guided = ask.output.guided
    assert guided is not None and guided.mode is GuidedMode.CHOICE
    assert guided.choices == ["code", "math"]
    assert ask.sampling.max_tokens == 8 and ask.sampling.temperature == 0.0
    assert Hop("auto", "", "chatty").header() == "auto; intent=-; model=chatty"


def test_the_docs_route_loads_as_written() -> None:
    readme = (Path(__file__).parents[3] / "docs" / "routing.md").read_text()
    at = readme.index("## Manifest routes")
    block = re.search(r"```toml\n(.*?)```", readme[at:], re.S)
    assert block is not None
    (route,) = from_mapping(tomllib.loads(block.group(1))).routes
    assert route.name == "auto" and route.fallback == "qwen2.5-7b" and len(route.intents) == 3
