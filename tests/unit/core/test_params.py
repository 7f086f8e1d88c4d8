"""neutrino.frontends.params: a chat body's parameter paths as a client's request names them."""

from __future__ import annotations

import pytest

from neutrino.errors import ErrorKind, NeutrinoError, bad_request
from neutrino.frontends.params import Origin, Renames, rename_path, renamed

# Chat messages 0..3 came from: the system prompt, messages[0] (a string), messages[1]'s
# tool result (block 0) and messages[1]'s other blocks (1 and 3; block 2 was a tool result).
ORIGINS = [
    Origin("system", parts_at=""),
    Origin("messages[0]"),
    Origin("messages[1]", [0]),
    Origin("messages[1]", [1, 3]),
]
TERMS = Renames(
    messages=ORIGINS,
    fields={
        "response_format": "text.format",
        "response_format.json_schema.schema": "text.format.schema",
        "max_completion_tokens": "max_output_tokens",
    },
)
PROTO = Renames(
    fields={"messages": "chat.messages", "tools": "chat.tools"},
    inner=(
        (".function.parameters", ".parameters_json"),
        (".function.", "."),
        (".content[", ".parts["),
    ),
)


@pytest.mark.parametrize(
    ("path", "want"),
    [
        ("messages[0]", "system"),
        ("messages[0].content[2]", "system[2]"),
        ("messages[1]", "messages[0]"),
        ("messages[1].content", "messages[0].content"),
        ("messages[1].content[4].text", "messages[0].content[4].text"),
        ("messages[2].content", "messages[1].content"),
        ("messages[3].content[1]", "messages[1].content[3]"),
        ("messages[3].content[1].image_url.url", "messages[1].content[3].image_url.url"),
        ("messages[3].content[7]", "messages[1].content[7]"),  # past the map: as it is
        ("messages[4].role", "messages[4].role"),  # no such origin: as it is
        ("messages", "messages"),
        ("response_format", "text.format"),
        ("response_format.type", "text.format.type"),
        ("response_format.json_schema.schema", "text.format.schema"),  # the longest key
        ("response_format.json_schema.schema.x", "text.format.schema.x"),
        ("response_formats", "response_formats"),  # keys are whole names
        ("max_completion_tokens", "max_output_tokens"),
        ("max_tokens", "max_tokens"),
        ("", ""),
    ],
)
def test_paths_in_the_clients_terms(path: str, want: str) -> None:
    assert rename_path(path, TERMS) == want


@pytest.mark.parametrize(
    ("path", "want"),
    [
        ("messages", "chat.messages"),
        ("messages[0].content[1]", "chat.messages[0].parts[1]"),
        ("messages[0].content", "chat.messages[0].content"),
        (
            "messages[2].tool_calls[0].function.arguments",
            "chat.messages[2].tool_calls[0].arguments",
        ),
        ("tools[3].function.parameters", "chat.tools[3].parameters_json"),
        ("tools[3]", "chat.tools[3]"),
        ("toolset.function.x", "toolset.function.x"),  # inner names only after a renamed head
        ("n", "n"),
    ],
)
def test_inner_names_follow_a_renamed_head(path: str, want: str) -> None:
    assert rename_path(path, PROTO) == want


def test_an_error_with_nothing_to_rename_is_itself() -> None:
    for err in (
        bad_request("n must be at most 4", "n"),
        bad_request("the request body must be a JSON object"),
    ):
        assert renamed(err, TERMS, in_message=True) is err
        assert renamed(err, PROTO) is err


def test_the_param_only_by_default() -> None:
    err = NeutrinoError(
        ErrorKind.UNSUPPORTED,
        "messages[0].content[1]: no",
        param="messages[0].content[1]",
        code="c",
    )
    got = renamed(err, PROTO)
    assert (got.param, got.message) == ("chat.messages[0].parts[1]", err.message)
    assert (got.kind, got.code) == (ErrorKind.UNSUPPORTED, "c")


def test_in_message_renames_every_path_the_message_names() -> None:
    err = bad_request(
        "messages[3].content[1] and messages[1] disagree; response_format.json_schema "
        "needs a name ('response_format' in max_completion_tokens_x is no path)",
        "messages[3].content[1]",
    )
    got = renamed(err, TERMS, in_message=True)
    assert got.param == "messages[1].content[3]"
    assert got.message == (
        "messages[1].content[3] and messages[0] disagree; text.format.json_schema "
        "needs a name ('text.format' in max_completion_tokens_x is no path)"
    )
    assert got.kind is ErrorKind.BAD_REQUEST


def test_name_param_prefixes_a_message_that_does_not_name_it() -> None:
    err = bad_request("the JSON schema is invalid", "response_format.json_schema.schema")
    got = renamed(err, TERMS, name_param=True)
    assert got.message == "text.format.schema: the JSON schema is invalid"
    named = bad_request("max_tokens must be an integer", "max_tokens")
    assert renamed(named, TERMS, name_param=True) is named
    unnamed = bad_request("must be an integer", "max_tokens")  # not renamed, still named
    assert renamed(unnamed, TERMS, name_param=True).message == "max_tokens: must be an integer"
    no_param = bad_request("the request body must be a JSON object")
    assert renamed(no_param, TERMS, name_param=True) is no_param
