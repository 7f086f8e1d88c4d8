"""Kimi K2 served out of the box: the built-in ``kimi-k2`` tokenizer (its rank file shipped
in assets/), no operator files, through a real mock_ie ("kimi-k2-mock:kimi-k2:...") and the
openai SDK. The prompt ids the engine gets are compared with tiktoken's own Encoding over the
shipped file, with the pattern and special tokens Moonshot AI publishes (tokenization_kimi.py
``pat_str``, tokenizer_config.json ``added_tokens_decoder``); tool calls come back through the
``kimi_k2`` parser (the format of Kimi K2's model card and tool-call guidance:
``<|tool_calls_section_begin|>`` ... ``functions.NAME:INDEX`` ...), streamed and not, and the
call's result goes back to the model in the template's ``tool`` turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import tiktoken

from neutrino.text.parsers import kimi_k2 as kimi
from neutrino.text.registry import tokenizer_folder
from neutrino.text.tiktoken_tokenizer import read_tiktoken_ranks
from tests.support.accumulate import accumulate
from tests.support.procs import MockIE, NeutrinoProc, serving
from tests.unit.text.test_kimi_k2 import PUBLISHED_ADDED
from tests.unit.text.test_local_files import KIMI_PATTERN_PARTS

MODEL = "kimi-k2-mock"  # the kimi-k2 family by name
HELLO = "Hello! 你好，我是 Kimi。 Here is code: `def f(x): return x ** 2` 🎉"  # noqa: RUF001
CALLS = (
    f"Checking.{kimi.SECTION_BEGIN}"
    f'{kimi.CALL_BEGIN}functions.get_weather:0{kimi.ARG_BEGIN}{{"city": "北京"}}{kimi.CALL_END}'
    f"{kimi.SECTION_END}"
)
ANSWER = "It is sunny in 北京 at 22°C ☀️."
TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
RESULT = '{"city": "北京", "sky": "clear-sunny", "temp_c": 22}'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NeutrinoProc, MockIE]]:
    work: Path = tmp_path_factory.mktemp("kimi-k2")
    rules = [
        {"match": "clear-sunny", "reply": ANSWER},  # the tool's result is in the prompt
        {"match": "weather", "reply": CALLS},
        {"match": "hello", "reply": HELLO},
    ]
    script = work / "script.json"
    script.write_text(json.dumps({"rules": rules}))
    mock = MockIE(work, "--script", str(script), "--model", f"{MODEL}:kimi-k2:131072").start()
    with serving(mock, NeutrinoProc(work, "--engine", mock.socket)) as started:
        yield started, mock


@pytest.fixture(scope="module")
def oracle() -> tiktoken.Encoding:
    folder = tokenizer_folder("kimi-k2")
    assert folder is not None
    named = {i: text for i, text, _ in PUBLISHED_ADDED}
    specials = {named.get(i, f"<|reserved_token_{i}|>"): i for i in range(163584, 163840)}
    return tiktoken.Encoding(
        "kimi-k2-published",
        pat_str="|".join(KIMI_PATTERN_PARTS),
        mergeable_ranks=read_tiktoken_ranks(folder / "tiktoken.model"),
        special_tokens=specials,
    )


def _client(neutrino: NeutrinoProc) -> openai.OpenAI:
    return openai.OpenAI(base_url=neutrino.base_url + "/v1", api_key="x", max_retries=0)


def _last_prompt(mock: MockIE, before: int, oracle: tiktoken.Encoding) -> str:
    """The prompt the engine got, as text; its ids are the published tokenizer's."""
    ids = mock.wait_event("query", before + 1)[before]["prompt_ids"]
    text = oracle.decode(ids)
    assert ids == oracle.encode(text, allowed_special="all")
    return text


def test_chat_without_operator_files(
    server: tuple[NeutrinoProc, MockIE], oracle: tiktoken.Encoding
) -> None:
    neutrino, mock = server
    client = _client(neutrino)
    messages: Any = [{"role": "user", "content": "hello 你好 👋 getElementById"}]
    before = len(mock.events("query"))
    r = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=200)
    assert (r.choices[0].message.content, r.choices[0].finish_reason) == (HELLO, "stop")
    prompt = _last_prompt(mock, before, oracle)
    assert prompt == (
        "<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|>"
        "<|im_user|>user<|im_middle|>hello 你好 👋 getElementById<|im_end|>"
        "<|im_assistant|>assistant<|im_middle|>"
    )
    ids = oracle.encode(prompt, allowed_special="all")
    assert [ids[0], ids[2], ids[-1]] == [163594, 163601, 163601]
    assert r.usage is not None and r.usage.prompt_tokens == len(ids)
    stream = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=200, stream=True
    )
    assert accumulate(stream).content == HELLO


def _ask(neutrino: NeutrinoProc, messages: Any, stream: bool) -> Any:
    return _client(neutrino).chat.completions.create(
        model=MODEL, messages=messages, tools=TOOLS, max_tokens=300, stream=stream
    )


ASK: Any = [{"role": "user", "content": "What is the weather in 北京?"}]


def test_a_tool_call_round_trip(
    server: tuple[NeutrinoProc, MockIE], oracle: tiktoken.Encoding
) -> None:
    neutrino, mock = server
    before = len(mock.events("query"))
    r = _ask(neutrino, ASK, stream=False)
    message = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls" and message.content == "Checking."
    (call,) = message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "get_weather",
        {"city": "北京"},
    )
    prompt = _last_prompt(mock, before, oracle)
    assert prompt.startswith("<|im_system|>tool_declare<|im_middle|>[{")
    assert '"get_weather"' in prompt and prompt.endswith("<|im_assistant|>assistant<|im_middle|>")

    streamed = accumulate(_ask(neutrino, ASK, stream=True))
    assert streamed.finish_reason == "tool_calls" and streamed.content == "Checking."
    assert streamed.decoded_calls() == [("get_weather", {"city": "北京"})]

    turn = {
        "role": "assistant",
        "content": message.content,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": "get_weather", "arguments": call.function.arguments},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": call.id, "content": RESULT}
    before = len(mock.events("query"))
    final = _ask(neutrino, [*ASK, turn, result], stream=False)
    assert final.choices[0].message.content == ANSWER
    assert final.choices[0].finish_reason == "stop" and not final.choices[0].message.tool_calls
    prompt = _last_prompt(mock, before, oracle)
    assert prompt.endswith(
        "<|im_user|>user<|im_middle|>What is the weather in 北京?<|im_end|>"
        "<|im_assistant|>assistant<|im_middle|>Checking.<|im_end|>"
        f"<|im_system|>tool<|im_middle|>{RESULT}<|im_end|>"
        "<|im_assistant|>assistant<|im_middle|>"
    )
    again = accumulate(_ask(neutrino, [*ASK, turn, result], stream=True))
    assert (again.content, again.calls) == (ANSWER, [])
