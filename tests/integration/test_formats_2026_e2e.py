"""The 2026 families' formats end to end: for each, mock_ie (scripted to write the format,
markers as text) behind Neutrino with the format's parsers configured on a model, through
the openai SDK: reasoning_content, content and tool_calls as vLLM returns them for the same
output, the stream adding up to the whole answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import openai
import pytest

from neutrino.text.parsers import gemma4 as g4
from neutrino.text.parsers import kimi_k2 as kimi
from neutrino.text.parsers import step3
from tests.support.accumulate import accumulate
from tests.support.procs import MockIE, NeutrinoProc, serving


class Format(NamedTuple):
    tool_parser: str
    reasoning_parser: str
    reply: str
    reasoning: str
    content: str
    calls: list[tuple[str, dict[str, Any]]]


WEATHER = ("get_weather", {"city": "Zürich", "days": 3})
_STEP = (f"{step3.CALLS_BEGIN}{step3.CALL_BEGIN}function{step3.SEP}{step3.INVOKE}\"get_weather\">"
         f'{step3.PARAMETER}"city">Zürich{step3.PARAMETER_END}{step3.PARAMETER}"days">3'
         f"{step3.PARAMETER_END}{step3.INVOKE_END}{step3.CALL_END}{step3.CALLS_END}")  # fmt: skip
_KIMI = (f"{kimi.SECTION_BEGIN}{kimi.CALL_BEGIN}functions.get_weather:0{kimi.ARG_BEGIN}"
         f'{{"city": "Zürich", "days": 3}}{kimi.CALL_END}{kimi.SECTION_END}')  # fmt: skip
FORMATS = {
    "longcat": Format("longcat", "longcat",
                      "<longcat_think>Look it up.</longcat_think>On it.<longcat_tool_call>\n"
                      '{"name": "get_weather", "arguments": {"city": "Zürich", "days": 3}}\n'
                      "</longcat_tool_call>", "Look it up.", "On it.", [WEATHER]),
    "step3": Format("step3", "step3", "<think>Look it up.</think>On it." + _STEP,
                    "Look it up.", "On it.", [WEATHER]),
    "hunyuan": Format("hunyuan_a13b", "hunyuan_a13b",
                      "<think>\nLook it up.\n</think>\n<answer>\n<tool_calls>[{\"name\": "
                      '"get_weather", "arguments": {"city": "Zürich", "days": 3}}]</tool_calls>'
                      "\n</answer>", "\nLook it up.\n", "", [WEATHER]),
    "cohere": Format("cohere_command3", "cohere_command3",
                     "<|START_THINKING|>Look it up.<|END_THINKING|><|START_ACTION|>["
                     '{"tool_call_id": "0", "tool_name": "get_weather", "parameters": '
                     '{"city": "Zürich", "days": 3}}]<|END_ACTION|>', "Look it up.", "", [WEATHER]),
    "olmo3": Format("olmo3", "olmo3",
                    '<think>Look it up.</think>On it.<function_calls>get_weather(city="Zürich", '
                    "days=3)</function_calls>", "Look it up.", "On it.", [WEATHER]),
    "gemma4": Format("gemma4", "gemma4",
                     f"<|channel>thought\nLook it up.<channel|>On it.{g4.CALL_OPEN}call:get_weather"
                     f"{{city:{g4.QUOTE}Zürich{g4.QUOTE},days:3}}{g4.CALL_CLOSE}",
                     "Look it up.", "On it.", [WEATHER]),
    "functiongemma": Format("functiongemma", "none",
                            f"{g4.FG_CALL_OPEN}call:get_weather{{city:{g4.FG_QUOTE}Zürich"
                            f"{g4.FG_QUOTE},days:3}}{g4.FG_CALL_CLOSE}", "", "", [WEATHER]),
    "kimi-thinking": Format("kimi_k2", "kimi_k2", "<think>Look it up.</think>" + _KIMI,
                            "Look it up.", "", [WEATHER]),
}  # fmt: skip
_PROPERTIES = {"city": {"type": "string"}, "days": {"type": "integer"}}
TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": _PROPERTIES},
        },
    }
]
# The served names match no family (the mock and Neutrino tokenize alike, as Qwen 2.5).
MODELS = {name: f"fmt{i}-mock" for i, name in enumerate(sorted(FORMATS))}


# A template that opens LongCat's reasoning block itself, as the Thinking checkpoints' do.
OPENING = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "<|im_start|>assistant\n<longcat_think>\n"
)
OPENED = "opened-mock"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NeutrinoProc]:
    work: Path = tmp_path_factory.mktemp("formats")
    script = work / "script.json"
    rules = [{"match": f"fmt-{name}:", "reply": f.reply} for name, f in FORMATS.items()]
    rules.append({"match": "opened:", "reply": "Cats purr.\n</longcat_think>\nYes."})
    script.write_text(json.dumps({"rules": rules}))
    (work / "opening.jinja").write_text(OPENING)
    models = [arg for name in FORMATS for arg in ("--model", f"{MODELS[name]}:qwen2:32768")]
    models += ["--model", f"{OPENED}:qwen2:32768"]
    tools = ", ".join(f'"{MODELS[n]}" = "{f.tool_parser}"' for n, f in FORMATS.items())
    reasoning = ", ".join(f'"{MODELS[n]}" = "{f.reasoning_parser}"' for n, f in FORMATS.items())
    families = ", ".join(f'"{m}" = "qwen2.5"' for m in MODELS.values())
    config = (f"[model]\nfamilies = {{ {families} }}\ntool_parsers = {{ {tools} }}\n"
              f'reasoning_parsers = {{ {reasoning}, "{OPENED}" = "longcat" }}\n'
              f'chat_templates = {{ "{OPENED}" = "{work / "opening.jinja"}" }}\n')  # fmt: skip
    mock = MockIE(work, "--script", str(script), *models)
    with serving(mock.start(), NeutrinoProc(work, "--engine", mock.socket, config=config)) as s:
        yield s


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_format_whole_and_streamed(server: NeutrinoProc, name: str) -> None:
    want = FORMATS[name]
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    ask: Any = {"model": MODELS[name], "tools": TOOLS, "max_tokens": 400,
                "messages": [{"role": "user", "content": f"fmt-{name}: weather?"}]}  # fmt: skip
    r: Any = client.chat.completions.create(**ask)
    msg = r.choices[0].message
    assert (getattr(msg, "reasoning_content", None) or "") == want.reasoning
    assert (msg.content or "") == want.content
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in msg.tool_calls or ()]
    assert calls == want.calls and r.choices[0].finish_reason == "tool_calls"
    streamed = accumulate(client.chat.completions.create(**ask, stream=True))
    assert (streamed.reasoning, streamed.content) == (want.reasoning, want.content)
    assert [(c.name, json.loads(c.arguments)) for c in streamed.calls] == want.calls
    assert streamed.finish_reason == "tool_calls"


def test_a_block_the_template_opened_is_reasoning(server: NeutrinoProc) -> None:
    """The prompt ends inside <longcat_think>: the answer starts in the reasoning, which
    only its close marker ends (the format's own opening, not <think>, is looked for)."""
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    ask: Any = {"model": OPENED, "messages": [{"role": "user", "content": "opened: cats?"}]}
    msg: Any = client.chat.completions.create(**ask).choices[0].message
    assert (msg.reasoning_content, msg.content) == ("Cats purr.\n", "\nYes.")
    streamed = accumulate(client.chat.completions.create(**ask, stream=True))
    assert (streamed.reasoning, streamed.content) == ("Cats purr.\n", "\nYes.")
