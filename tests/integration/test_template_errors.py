"""End to end: a request whose none a model's chat template would iterate gets a 400 naming it.

transformers (jinja2) fails on such a template with "'NoneType' object is not iterable";
Neutrino fails too (tests/unit/text/test_template_fidelity.py compares both renderers), and the
client is told which of its fields the template could not render, over real HTTP, from a real
Neutrino in front of mock_ie. The model serves Hermes 3's published tool_use template
(NousResearch/Hermes-3-Llama-3.1-8B), given as an operator's chat template file: it loops over
``tools`` and over each tool's ``parameters.properties``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from neutrino.text.templates import load_families
from tests.support.procs import MockIE, NeutrinoProc, serving

MODEL = "hermes-mock"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NeutrinoProc]:
    work: Path = tmp_path_factory.mktemp("template_errors")
    template = work / "hermes3-tool-use.jinja"
    template.write_text(load_families()["hermes3"].template, encoding="utf-8")
    config = f'[model]\nchat_templates = {{ "{MODEL}" = "{template}" }}\n'
    mock = MockIE(work, "--model", f"{MODEL}:qwen2:32768")
    with serving(mock.start(), NeutrinoProc(work, "--engine", mock.socket, config=config)) as s:
        yield s


def _tool(properties: Any) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties}
    function = {"name": "f", "description": "F.", "parameters": parameters}
    return {"type": "function", "function": function}


def _post(server: NeutrinoProc, body: dict[str, Any]) -> tuple[int, Any]:
    messages = [{"role": "user", "content": "hi"}]
    full = {"model": MODEL, "messages": messages, "max_tokens": 4, **body}
    return server.post_json("/v1/chat/completions", json.dumps(full).encode())


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "tools"),
        ({"tools": [_tool(None)]}, "tools[0].function.parameters.properties"),
        (
            {"tools": [_tool({"city": {"type": "string", "description": "City."}}), _tool(None)]},
            "tools[1].function.parameters.properties",
        ),
    ],
)
def test_a_none_the_template_iterates_is_a_400_naming_it(
    server: NeutrinoProc, body: dict[str, Any], param: str
) -> None:
    status, reply = _post(server, body)
    assert status == 400, reply
    error = reply["error"]
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(f"{param} must be given, not null")


def test_the_same_model_serves_a_request_it_can_render(server: NeutrinoProc) -> None:
    city = {"city": {"type": "string", "description": "City."}}
    status, reply = _post(server, {"tools": [_tool(city)]})
    assert status == 200, reply
    assert reply["usage"]["prompt_tokens"] > 50


def test_the_openai_sdk_sees_the_param(server: NeutrinoProc) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4, stream=True
        )
    assert info.value.param == "tools"
