"""A model folder's files as neutrino.text.model_folder reads them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neutrino.text.model_folder import ModelFolderError, read_model_folder


def _folder(tmp_path: Path, **files: object) -> Path:
    (tmp_path / "tokenizer.json").write_text("{}")
    for name, doc in files.items():
        path = tmp_path / name.replace("__", ".")
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return tmp_path


def test_every_file_is_read(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        tokenizer_config__json={"chat_template": [{"name": "tool_use", "template": "T"},
                                                   {"name": "default", "template": "D"}]},
        generation_config__json={"eos_token_id": [2, 7], "temperature": 0.3, "top_k": 0,
                                 "do_sample": True},
        config__json={"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
                      "max_position_embeddings": 4096},
    )  # fmt: skip
    got = read_model_folder(folder)
    assert (got.chat_template, got.template_from) == ("D", "tokenizer_config.json")
    assert got.eos_token_ids == (2, 7) and got.defaults == {"temperature": 0.3, "top_k": -1}
    assert (got.model_type, got.architectures, got.context_length) == (
        "qwen2", ("Qwen2ForCausalLM",), 4096)  # fmt: skip
    assert got.sources() == {"tokenizer": "tokenizer.json",
                             "chat_template": "tokenizer_config.json",
                             "generation": "generation_config.json",
                             "model_type": "config.json"}  # fmt: skip


def test_the_template_files_in_their_order(tmp_path: Path) -> None:
    folder = _folder(tmp_path, chat_template__jinja="J", chat_template__json={"chat_template": "C"})
    got = read_model_folder(folder)
    assert (got.chat_template, got.template_from) == ("J", "chat_template.jinja")
    (folder / "chat_template.jinja").unlink()
    assert read_model_folder(folder).chat_template == "C"
    (folder / "chat_template.json").unlink()
    bare = read_model_folder(folder)
    assert bare.chat_template is None and bare.defaults == {} and bare.eos_token_ids == ()
    assert bare.sources() == {"tokenizer": "tokenizer.json"}


def test_a_single_eos_id(tmp_path: Path) -> None:
    got = read_model_folder(_folder(tmp_path, generation_config__json={"eos_token_id": 5}))
    assert got.eos_token_ids == (5,)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"generation_config__json": {"temperature": 9}}, "generation_config.json: temperature"),
        ({"generation_config__json": {"eos_token_id": "x"}}, "eos_token_id"),
        ({"config__json": "not json"}, "config.json: not a JSON file"),
        ({"config__json": [1]}, "config.json: not a JSON object"),
    ],
)
def test_bad_files_are_named(tmp_path: Path, files: dict[str, object], message: str) -> None:
    with pytest.raises(ModelFolderError, match=message):
        read_model_folder(_folder(tmp_path, **files))


def test_a_folder_without_a_tokenizer_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelFolderError, match=r"no tokenizer\.json"):
        read_model_folder(tmp_path)
    with pytest.raises(ModelFolderError, match="not a folder"):
        read_model_folder(tmp_path / "missing")
