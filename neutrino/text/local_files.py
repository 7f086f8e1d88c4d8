"""Tokenizers read from an operator's own model files (``[model] tokenizers`` in the config).

A path may be

* a Hugging Face model folder: its ``tokenizer.json``, with ``tokenizer_config.json`` applied
  the way transformers applies it when it loads the folder: every ``added_tokens_decoder``
  entry is (re)added with its flags (``special``, ``lstrip``, ``rstrip``, ``normalized``,
  ``single_word``) and must land on its id; ``bos_token``, ``eos_token``, ``unk_token``,
  ``pad_token`` and ``additional_special_tokens`` that are not added tokens yet become special
  added tokens; ``bos_token``, ``eos_token`` and ``add_bos_token`` are handed on to the model's
  family (template variables, stop token, completion BOS);
* a ``tokenizer.json`` file by itself;
* a Mistral ``tekken.json`` (or a folder holding one and no ``tokenizer.json``), read as
  mistral-common reads it: the file's own ``special_tokens`` list, or mistral-common's
  default control tokens for files without one (up to v7), padded with ``<SPECIAL_{id}>``;
* a folder with Kimi's ``tiktoken.model`` (see :mod:`neutrino.text.kimi_files`).

A tiktoken rank file holds no pre-tokenisation pattern, so any other one is refused here
rather than given a guessed pattern (``[model] tiktoken`` serves one with a pattern the
operator names: :mod:`neutrino.text.tiktoken_files`). Nothing is downloaded and nothing in
the folder is executed.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tokenizers
from tokenizers import AddedToken

from neutrino.text.errors import TokenizerError
from neutrino.text.hf_tiktoken import tokenizer_json
from neutrino.text.tiktoken_tokenizer import TiktokenTokenizer
from neutrino.text.tokenizer_config import (
    MAX_SPECIAL_IDS,
    LocalTokenizer,
    added_tokens,
    named_specials,
    token_content,
)
from neutrino.text.vocabularies import _TEKKEN_CONTROL

__all__ = ["LocalTokenizer", "load_local_tokenizer", "read_chat_template"]

_TIKTOKEN_LINE = re.compile(rb"[A-Za-z0-9+/=]+ \d+\r?\n")


def load_local_tokenizer(name: str, path: str | os.PathLike[str]) -> LocalTokenizer:
    """The tokenizer at ``path`` (see the module docstring), named ``name``.

    Raises :class:`TokenizerError` with a message that names ``path``.
    """
    where = Path(path).expanduser()
    try:
        if where.is_dir():
            return _from_folder(name, where)
        return _from_file(name, where)
    except TokenizerError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as e:  # unreadable or malformed files
        raise TokenizerError(f"{where}: cannot load a tokenizer: {e}") from e


def read_chat_template(path: str | os.PathLike[str]) -> str:
    """A chat template file's text, exactly as written (UTF-8)."""
    with open(Path(path).expanduser(), encoding="utf-8", newline="") as fh:
        return fh.read()


def _from_folder(name: str, folder: Path) -> LocalTokenizer:
    config_path = folder / "tokenizer_config.json"
    config = _read_json(config_path) if config_path.is_file() else {}
    if not isinstance(config, dict):
        raise TokenizerError(f"{config_path}: not a JSON object")
    if (folder / "tokenizer.json").is_file():
        return _hugging_face(name, folder / "tokenizer.json", config, config_path)
    if (folder / "tekken.json").is_file():
        tekken = folder / "tekken.json"
        return LocalTokenizer(_tekken(name, tekken, _read_json(tekken)))
    ranks = _tiktoken_file(folder)
    if ranks is not None:
        from neutrino.text.kimi_files import kimi_tokenizer

        return kimi_tokenizer(name, folder, ranks, config)
    raise TokenizerError(
        f"{folder}: no tokenizer.json, tekken.json or tiktoken.model in this folder"
    )


def _from_file(name: str, path: Path) -> LocalTokenizer:
    with open(path, "rb") as fh:
        head = fh.read(256)
    if _TIKTOKEN_LINE.match(head):
        raise TokenizerError(
            f"{path}: a tiktoken rank file carries no pre-tokenisation pattern; configure it "
            "under [model] tiktoken with its pattern and special tokens, or give the model's "
            "folder (with its tokenizer.json, or Kimi's tiktoken.model and "
            "tokenization_kimi.py) instead"
        )
    doc = _read_json(path)
    if isinstance(doc, dict) and "model" in doc:
        return _hugging_face(name, path, {}, None)
    if isinstance(doc, dict) and "config" in doc and "vocab" in doc:
        return LocalTokenizer(_tekken(name, path, doc))
    raise TokenizerError(f"{path}: neither a tokenizer.json nor a Mistral tekken.json")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:  # also UnicodeDecodeError
        raise TokenizerError(f"{path}: not a JSON file ({e})") from e


def _tiktoken_file(folder: Path) -> Path | None:
    named = folder / "tiktoken.model"
    if named.is_file():
        return named
    found = sorted(folder.glob("*.tiktoken"))
    return found[0] if found else None


# --- Hugging Face tokenizer.json (+ tokenizer_config.json) -----------------------------------


def _hugging_face(
    name: str, path: Path, config: Mapping[str, object], config_path: Path | None
) -> LocalTokenizer:
    try:
        tk = tokenizers.Tokenizer.from_file(os.fspath(path))
    except Exception as e:  # the library raises plain Exceptions for malformed files
        raise TokenizerError(
            f"{path}: not a tokenizer.json the tokenizers library reads: {e}"
        ) from e
    where = config_path or path
    declared = added_tokens(config, config_path)
    known = {tok.content: (int(i), tok) for i, tok in tk.get_added_tokens_decoder().items()}
    changed = [tok for i, tok in declared if known.get(tok.content) != (i, tok)]
    if changed:
        tk.add_tokens(changed)  # as transformers does: a token already there gets these flags
    for token_id, tok in declared:
        if tk.token_to_id(tok.content) != token_id:
            raise TokenizerError(f"{where}: added token {tok.content!r} is not id {token_id}")
    bos, eos = token_content(config.get("bos_token")), token_content(config.get("eos_token"))
    added = {tok.content for tok in tk.get_added_tokens_decoder().values()}
    promote: list[str] = []  # vocabulary tokens the config names special, as transformers does
    for text in dict.fromkeys(named_specials(config)):
        if text in added:
            continue
        if tk.token_to_id(text) is not None:
            promote.append(text)
        elif text in (bos, eos):
            raise TokenizerError(f"{where}: names the token {text!r}, which is not in {path.name}")
        # An unk/pad/additional token the vocabulary lacks is left out: transformers would
        # give it a new id past the model's vocabulary.
    if promote:
        tk.add_tokens([AddedToken(text, special=True, normalized=False) for text in promote])
    try:
        # tiktoken where the file is one proven identical to the library (a fine-tune's
        # copy of its base model's tokenizer), else the library.
        tokenizer = tokenizer_json(name, _read_json(path), tk)
    except TokenizerError as e:  # a kind of tokenizer.json that is not read here
        raise TokenizerError(f"{path}: {e}") from e
    add_bos = config.get("add_bos_token")
    return LocalTokenizer(
        tokenizer,
        bos_token=bos,
        eos_token=eos,
        add_bos_token=add_bos if isinstance(add_bos, bool) else None,
    )


# --- Mistral tekken.json ---------------------------------------------------------------------


def _tekken(name: str, path: Path, doc: Any) -> TiktokenTokenizer:
    try:
        config = doc["config"]
        pattern = str(config["pattern"])
        num_special = int(config["default_num_special_tokens"])
        inner = int(config["default_vocab_size"]) - num_special
        vocab = doc["vocab"]
        listed = doc.get("special_tokens")
        version = str(config.get("version", ""))
    except (KeyError, TypeError, ValueError) as e:
        raise TokenizerError(
            f"{path}: not a Mistral tekken.json ({e!r} missing or malformed)"
        ) from e
    if not 0 <= num_special <= MAX_SPECIAL_IDS or inner < 0:
        raise TokenizerError(f"{path}: implausible default_num_special_tokens {num_special}")
    if listed is None:
        if not re.fullmatch(r"v[1-7]", version):
            raise TokenizerError(
                f"{path}: a {version or 'unversioned'} file lists no special_tokens"
            )
        names = list(_TEKKEN_CONTROL)
    else:
        names = [str(entry["token_str"]) for entry in sorted(listed, key=lambda e: e["rank"])]
        if [int(e["rank"]) for e in sorted(listed, key=lambda e: e["rank"])] != list(
            range(len(names))
        ):
            raise TokenizerError(f"{path}: special_tokens ranks are not 0..{len(names) - 1}")
    if len(names) > num_special or len(set(names)) != len(names):
        raise TokenizerError(f"{path}: special_tokens do not fit default_num_special_tokens")
    names += [f"<SPECIAL_{i}>" for i in range(len(names), num_special)]
    ranks: dict[bytes, int] = {}
    for entry in vocab[:inner]:
        ranks[base64.b64decode(entry["token_bytes"])] = num_special + int(entry["rank"])
    if len(ranks) != inner or sorted(ranks.values()) != list(
        range(num_special, num_special + inner)
    ):
        raise TokenizerError(f"{path}: malformed Tekken vocabulary")
    return TiktokenTokenizer(
        name,
        mergeable_ranks=ranks,
        pat_str=pattern,
        special_tokens={t: i for i, t in enumerate(names)},
    )
