"""response_format json_object / json_schema: passed to the engine, checked when strict."""

from __future__ import annotations

import json
import re
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


# ---------------------------------------------------------------- vLLM's fields


def _chat(client: openai.OpenAI, extra: dict[str, Any], **kw: Any) -> str:
    r = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=100, extra_body=extra, **kw
    )
    assert r.choices[0].finish_reason == "stop"
    return r.choices[0].message.content or ""


@pytest.mark.parametrize("new", [True, False], ids=["structured_outputs", "guided_"])
def test_vllm_constraints_reach_the_engine(client: openai.OpenAI, new: bool) -> None:
    def extra(kind: str, value: Any) -> dict[str, Any]:
        return {"structured_outputs": {kind: value}} if new else {f"guided_{kind}": value}

    assert _chat(client, extra("choice", ["sunny", "cloudy", "rain"])) in {
        "sunny",
        "cloudy",
        "rain",
    }
    pattern = r"\d{2} degrees in [A-Z][a-z]+"
    assert re.fullmatch(pattern, _chat(client, extra("regex", pattern)))
    value = json.loads(_chat(client, extra("json", SCHEMA)))
    jsonschema.validate(value, SCHEMA)
    as_text = json.loads(_chat(client, extra("json", json.dumps(SCHEMA))))
    assert as_text == value
    r = client.completions.create(
        model=MODEL, prompt="Pick one:", max_tokens=20, extra_body=extra("choice", ["a b", "c"])
    )
    assert r.choices[0].text in {"a b", "c"}


def test_json_object_through_structured_outputs(client: openai.OpenAI) -> None:
    text = _chat(client, {"structured_outputs": {"json_object": True}})
    assert isinstance(json.loads(text), dict)


def test_a_constraint_the_engine_cannot_honour_is_refused_not_dropped(
    client: openai.OpenAI,
) -> None:
    for extra in (
        {"guided_grammar": 'root ::= "yes" | "no"'},
        {"structured_outputs": {"grammar": "root ::= 'a'"}},
    ):
        with pytest.raises(openai.BadRequestError) as info:
            _chat(client, extra)
        assert "grammar" in info.value.message


@pytest.mark.parametrize(
    ("extra", "param", "says"),
    [
        ({"guided_regex": "(unclosed"}, "guided_regex", "not a valid regular expression"),
        ({"guided_choice": []}, "guided_choice", "1 to 256"),
        ({"guided_choice": ["a", 3]}, "guided_choice", "strings"),
        ({"guided_json": "{not json"}, "guided_json", "JSON schema"),
        ({"guided_json": {"type": "nope"}}, "guided_json", "schema is invalid"),
        ({"structured_outputs": {}}, "structured_outputs", "exactly one"),
        (
            {"structured_outputs": {"regex": "a", "choice": ["a"]}},
            "structured_outputs",
            "exactly one",
        ),
        (
            {"structured_outputs": {"choice": ["a"], "color": 1}},
            "structured_outputs",
            "not a structured",
        ),
        (
            {"structured_outputs": {"json": SCHEMA, "whitespace_pattern": " "}},
            "structured_outputs.whitespace_pattern",
            "not supported",
        ),
        (
            {"guided_choice": ["a"], "guided_whitespace_pattern": " "},
            "guided_whitespace_pattern",
            "not supported",
        ),
        ({"guided_choice": ["a"], "guided_regex": "a"}, None, "one output constraint"),
        (
            {"guided_choice": ["a"], "response_format": {"type": "json_object"}},
            None,
            "one output constraint",
        ),
    ],
)
def test_bad_vllm_constraints_are_400s(
    client: openai.OpenAI, extra: dict[str, Any], param: str | None, says: str
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        _chat(client, extra)
    body: Any = info.value.body
    assert says in body["message"]
    if param is not None:
        assert body["param"] == param
