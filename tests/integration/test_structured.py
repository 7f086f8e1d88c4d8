"""response_format json_object / json_schema: passed to the engine, checked when strict."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import openai
import pytest

from tests.support.procs import MockIE, NeutrinoProc, serving

MODEL = "qwen2.5-mock"
MESSAGES: list[Any] = [{"role": "user", "content": "Weather in Paris as JSON"}]
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "temperature": {"type": "integer", "minimum": -50},
        "sunny": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
    },
    "required": ["city", "temperature", "sunny", "tags"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MockIE, NeutrinoProc]]:
    """A mock that honours guided queries, except for a prompt that says BROKEN: there
    it answers a finished text that is not JSON (an engine ignoring the format)."""
    work = tmp_path_factory.mktemp("structured")
    script = work / "rules.json"
    rule = {"match": "BROKEN", "reply": "Sunny, 21 degrees.", "unguided": True}
    script.write_text(json.dumps({"rules": [rule]}))
    mock = MockIE(work, "--script", str(script)).start()
    with serving(mock, NeutrinoProc(work, "--engine", mock.socket)) as server:
        yield mock, server


@pytest.fixture(scope="module")
def client(stack: tuple[MockIE, NeutrinoProc]) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack[1].base_url + "/v1", api_key="x", max_retries=0)


def schema_format(strict: bool, schema: dict[str, Any] = SCHEMA) -> Any:
    return {
        "type": "json_schema",
        "json_schema": {"name": "weather", "schema": schema, "strict": strict},
    }


def test_json_object(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=200, response_format={"type": "json_object"}
    )
    assert isinstance(json.loads(r.choices[0].message.content or ""), dict)


def test_json_schema_strict_stream_and_not(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=200, response_format=schema_format(True)
    )
    value = json.loads(r.choices[0].message.content or "")
    jsonschema.validate(value, SCHEMA)
    text = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            max_tokens=200,
            response_format=schema_format(True),
            stream=True,
        )
        if c.choices
    )
    assert text == r.choices[0].message.content


def test_a_strict_answer_cut_by_max_tokens_is_a_length_finish(client: openai.OpenAI) -> None:
    """Cut off after 3 tokens the JSON cannot be complete, but the model did not break
    the format: the answer is a 200 with finish_reason "length", streamed or not (a 5xx
    would make the SDK retry three times in vain); the SDK's parse() raises its own
    length error for it."""
    r = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=3, response_format=schema_format(True)
    )
    assert r.choices[0].finish_reason == "length" and r.choices[0].message.content
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            max_tokens=3,
            response_format=schema_format(True),
            stream=True,
        )
    )
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    with pytest.raises(openai.LengthFinishReasonError):
        client.chat.completions.parse(
            model=MODEL, messages=MESSAGES, max_tokens=3, response_format=schema_format(True)
        )


def test_a_finished_answer_that_breaks_a_strict_format_is_an_error(
    client: openai.OpenAI,
) -> None:
    broken: list[Any] = [{"role": "user", "content": "BROKEN weather as JSON"}]
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(
            model=MODEL, messages=broken, max_tokens=50, response_format=schema_format(True)
        )
    assert info.value.status_code == 502
    body: Any = info.value.body
    assert body["code"] == "response_format_violated"
    assert "not valid JSON" in body["message"]
    # Not strict: the text is returned as the engine made it.
    r = client.chat.completions.create(
        model=MODEL, messages=broken, max_tokens=50, response_format=schema_format(False)
    )
    assert r.choices[0].message.content == "Sunny, 21 degrees."
    stream = client.chat.completions.create(
        model=MODEL,
        messages=broken,
        max_tokens=50,
        response_format=schema_format(True),
        stream=True,
    )
    with pytest.raises(openai.APIError) as err:
        for _ in stream:
            pass
    assert "response format" in str(err.value)


@pytest.mark.parametrize(
    ("fmt", "param"),
    [
        ({"type": "xml"}, "response_format"),
        ({"type": "json_schema"}, "response_format.json_schema"),
        (schema_format(True, {"type": "not-a-type"}), "response_format.json_schema.schema"),
    ],
)
def test_bad_response_formats(client: openai.OpenAI, fmt: Any, param: str) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=MESSAGES, response_format=fmt)
    body: Any = info.value.body
    assert body["param"] == param
