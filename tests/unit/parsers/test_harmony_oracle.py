"""gpt-oss against OpenAI's own harmony library (``openai-harmony``), as an oracle.

The library is pointed at a local ``o200k_base.tiktoken`` written from the vocabulary we
ship (``TIKTOKEN_ENCODINGS_BASE``), so nothing is downloaded. Checked against it:

* our o200k vocabulary is byte for byte OpenAI's published file (its SHA-256);
* our token ids equal the library's;
* our rendering of the published gpt-oss chat template equals the library's renderer
  for system, developer instructions, tools and reasoning effort;
* our harmony parser reads completions as the library does: analysis is reasoning,
  ``functions.*`` recipients are tool calls, final/commentary text is content; token
  by token and whole.

Where the published template and the library differ, the tests pin the difference: the
template leaves a blank line after developer instructions that no tools follow. History
with earlier tool calls is not compared: the published template renders a call's
content type as `` json`` and a tool result through ``tojson``, where the library keeps
``<|constrain|>json`` and the raw text; our renderer follows the published template.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from openai_harmony import (
    Conversation,
    DeveloperContent,
    HarmonyEncoding,
    HarmonyEncodingName,
    Message,
    ReasoningEffort,
    Role,
    SystemContent,
    ToolDescription,
    load_harmony_encoding,
)

from neutrino.text.detokenizer import Detokenizer
from neutrino.text.families import load_families
from neutrino.text.parsers import tool_parser
from neutrino.text.registry import load_tokenizer
from neutrino.text.templates import ChatTemplate
from neutrino.text.tiktoken_tokenizer import TiktokenTokenizer

from .support import merge

# tiktoken's published SHA-256 of https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
FROZEN = datetime(2026, 11, 22, 9, 30)
PARAMS = {
    "type": "object",
    "properties": {
        "location": {"type": "string", "description": "City and country"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["location"],
}
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Current weather", "parameters": PARAMS},
    },
    {"type": "function", "function": {"name": "get_time", "description": "Local time"}},
]


@pytest.fixture(scope="module")
def tokenizer() -> TiktokenTokenizer:
    tok = load_tokenizer("o200k-harmony")
    assert isinstance(tok, TiktokenTokenizer)
    return tok


@pytest.fixture(scope="module")
def o200k_file(tokenizer: TiktokenTokenizer, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    ranks: dict[bytes, int] = tokenizer._enc._mergeable_ranks
    data = b"".join(
        base64.b64encode(piece) + b" %d\n" % rank
        for piece, rank in sorted(ranks.items(), key=lambda kv: kv[1])
    )
    folder = tmp_path_factory.mktemp("encodings")
    (folder / "o200k_base.tiktoken").write_bytes(data)
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(folder)
    return data


@pytest.fixture(scope="module")
def harmony(o200k_file: bytes) -> Iterator[HarmonyEncoding]:
    try:
        yield load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    finally:
        os.environ.pop("TIKTOKEN_ENCODINGS_BASE", None)


def test_o200k_vocabulary_is_openais(o200k_file: bytes) -> None:
    assert hashlib.sha256(o200k_file).hexdigest() == O200K_SHA256


TEXTS = [
    "Hello, world! Grüße, 你好, emoji 😀👍🏽",
    "<|start|>assistant<|channel|>analysis<|message|>think<|end|>",
    '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"a":1}<|call|>',
    "  spaced   text\n\n\ttabs  ",
]


@pytest.mark.parametrize("text", TEXTS)
def test_token_ids_match(tokenizer: TiktokenTokenizer, harmony: HarmonyEncoding, text: str) -> None:
    expected = harmony.encode(text, allowed_special="all")
    assert tokenizer.encode(text) == expected
    assert tokenizer.encode_prompt(text) == expected
    assert tokenizer.decode(expected, skip_special=False) == text


_EFFORT = {
    "low": ReasoningEffort.LOW,
    "medium": ReasoningEffort.MEDIUM,
    "high": ReasoningEffort.HIGH,
}


@pytest.mark.parametrize("effort", ["low", "medium", "high"])
@pytest.mark.parametrize("with_tools", [False, True])
@pytest.mark.parametrize("instructions", [None, "Answer in one sentence."])
def test_prompt_matches_harmony_renderer(
    harmony: HarmonyEncoding, effort: str, with_tools: bool, instructions: str | None
) -> None:
    template = ChatTemplate(load_families()["gpt-oss"], clock=lambda: FROZEN)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Paris?"}]
    if instructions:
        messages.insert(0, {"role": "system", "content": instructions})
    ours = template.render(
        messages,
        add_generation_prompt=True,
        tools=TOOLS if with_tools else None,
        reasoning_effort=effort,
    )

    system = (
        SystemContent.new()
        .with_reasoning_effort(_EFFORT[effort])
        .with_conversation_start_date(FROZEN.strftime("%Y-%m-%d"))
    )
    convo = [Message.from_role_and_content(Role.SYSTEM, system)]
    if instructions or with_tools:
        dev = DeveloperContent.new()
        if instructions:
            dev = dev.with_instructions(instructions)
        if with_tools:
            dev = dev.with_function_tools(
                [
                    ToolDescription.new(
                        t["function"]["name"],
                        t["function"]["description"],
                        parameters=t["function"].get("parameters"),
                    )
                    for t in TOOLS
                ]
            )
        convo.append(Message.from_role_and_content(Role.DEVELOPER, dev))
    convo.append(Message.from_role_and_content(Role.USER, "Weather in Paris?"))
    tokens = harmony.render_conversation_for_completion(
        Conversation.from_messages(convo), Role.ASSISTANT
    )
    theirs = harmony.decode(tokens)
    if instructions and not with_tools:
        # The published template ends the instructions with a blank line even when no
        # tools follow; the library does not.
        theirs = theirs.replace(f"{instructions}<|end|>", f"{instructions}\n\n<|end|>")
    assert ours == theirs


def _assistant(text: str, channel: str, recipient: str | None = None) -> Message:
    msg = Message.from_role_and_content(Role.ASSISTANT, text).with_channel(channel)
    if recipient is not None:
        msg = msg.with_recipient(recipient).with_content_type("<|constrain|>json")
    return msg


COMPLETIONS: list[tuple[str, list[Message]]] = [
    (
        "reason-then-answer",
        [_assistant("User wants a fact. Easy.", "analysis"), _assistant("Paris.", "final")],
    ),
    (
        "reason-then-call",
        [
            _assistant("Need the weather tool.", "analysis"),
            _assistant(
                '{"location":"Paris, FR","unit":"celsius"}', "commentary", "functions.get_weather"
            ),
        ],
    ),
    (
        "preamble-then-two-calls",
        [
            _assistant("Two lookups.", "analysis"),
            _assistant("Checking both for you.", "commentary"),
            _assistant('{"location":"Paris"}', "commentary", "functions.get_weather"),
            _assistant("{}", "commentary", "functions.get_time"),
        ],
    ),
    ("answer-only", [_assistant("Bonjour! Ça va? 👋", "final")]),
]


def _completion_tokens(harmony: HarmonyEncoding, messages: list[Message]) -> list[int]:
    """The tokens a model would emit after ``<|start|>assistant`` for ``messages``."""
    tokens: list[int] = []
    for m in messages:
        tokens += harmony.render(m)
    prefix = harmony.encode("<|start|>assistant", allowed_special="all")
    assert tokens[: len(prefix)] == prefix
    tokens = tokens[len(prefix) :]
    # The last message ends the turn: <|call|> after a call, <|return|> after an answer.
    end = "<|call|>" if messages[-1].recipient else "<|return|>"
    tokens[-1] = harmony.encode(end, allowed_special="all")[0]
    return tokens


def _expected(messages: list[Message]) -> tuple[str, str, list[tuple[str, Any]]]:
    reasoning, content, calls = "", "", []
    for m in messages:
        text = "".join(c.text for c in m.content)
        if m.recipient and m.recipient.startswith("functions."):
            calls.append((m.recipient.removeprefix("functions."), json.loads(text)))
        elif m.channel == "analysis":
            reasoning += text
        else:
            content += text
    return reasoning, content, calls


@pytest.mark.parametrize(("name", "messages"), COMPLETIONS, ids=[c[0] for c in COMPLETIONS])
@pytest.mark.parametrize("chunking", ["whole", "per-token"])
def test_parse_matches_harmony(
    tokenizer: TiktokenTokenizer,
    harmony: HarmonyEncoding,
    name: str,
    messages: list[Message],
    chunking: str,
) -> None:
    tokens = _completion_tokens(harmony, messages)
    # The library's own reading of the completion is what we build the expectation from.
    parsed = harmony.parse_messages_from_completion_tokens(tokens, Role.ASSISTANT)
    assert [(m.channel, m.recipient) for m in parsed] == [
        (m.channel, m.recipient) for m in messages
    ]
    want_reasoning, want_content, want_calls = _expected(parsed)

    if chunking == "whole":
        chunks = [tokenizer.decode(tokens, skip_special=False)]
    else:
        detok = Detokenizer(tokenizer, skip_special=False)  # as the pipeline streams
        chunks = [detok.feed([t]) for t in tokens] + [detok.finish()]
    parser = tool_parser("harmony")(tools=TOOLS)
    deltas = [parser.feed(c) for c in chunks]
    deltas.append(parser.finish())
    content, reasoning, streamed = merge(deltas)
    assert reasoning == want_reasoning
    assert content.strip() == want_content
    assert [(c.name, json.loads(c.arguments)) for c in parser.calls] == want_calls
    assert [(n, json.loads(a)) for _, n, a in streamed] == want_calls
