"""Kimi's tiktoken tokenizer from a model folder (Kimi K2 and its fine-tunes).

Moonshot AI publishes no ``tokenizer.json`` for Kimi K2: the folder holds ``tiktoken.model``
(base64 token, rank per line), ``tokenizer_config.json`` (whose ``auto_map`` names
``tokenization_kimi.TikTokenTokenizer``) and ``tokenization_kimi.py``, the class that
tokenizes. A rank file has no pre-tokenisation pattern of its own, so the pattern is read
from that class's ``pat_str`` (and the number of reserved ids from its
``num_reserved_special_tokens``) by parsing the file, never by running it. The class lays the
special tokens out after the ranks, ``num_reserved_special_tokens`` of them, named by
``added_tokens_decoder`` and ``<|reserved_token_{id}|>`` where it names none; special-token
strings in the text become their ids. A folder whose ``auto_map`` names another class is
refused: its pattern and layout are unknown here.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

from neutrino.text.errors import TokenizerError
from neutrino.text.tiktoken_tokenizer import TiktokenTokenizer, read_tiktoken_ranks
from neutrino.text.tokenizer_config import (
    MAX_SPECIAL_IDS,
    LocalTokenizer,
    added_tokens,
    token_content,
)

__all__ = ["KIMI_CLASS", "kimi_tokenizer", "read_class_constants"]

KIMI_CLASS = "tokenization_kimi.TikTokenTokenizer"


def kimi_tokenizer(
    name: str, folder: Path, ranks_path: Path, config: Mapping[str, object]
) -> LocalTokenizer:
    """The Kimi tokenizer in ``folder`` (``ranks_path`` is its tiktoken.model)."""
    if KIMI_CLASS not in _auto_tokenizer(config):
        raise TokenizerError(
            f"{ranks_path}: a tiktoken rank file carries no pre-tokenisation pattern, and "
            f"{folder / 'tokenizer_config.json'} names no {KIMI_CLASS} to read Kimi's from; "
            "refusing to guess one"
        )
    module, cls = KIMI_CLASS.split(".")
    source = folder / f"{module}.py"
    constants = read_class_constants(source, cls)
    pattern = constants.get("pat_str")
    reserved = constants.get("num_reserved_special_tokens")
    if not isinstance(pattern, str) or not isinstance(reserved, int) or isinstance(reserved, bool):
        raise TokenizerError(
            f"{source}: {cls} defines no literal pat_str and num_reserved_special_tokens"
        )
    if not 0 <= reserved <= MAX_SPECIAL_IDS:
        raise TokenizerError(f"{source}: implausible num_reserved_special_tokens {reserved}")
    ranks = read_tiktoken_ranks(ranks_path)
    base = len(ranks)
    if sorted(ranks.values()) != list(range(base)):
        raise TokenizerError(f"{ranks_path}: ranks are not 0..{base - 1}")
    where = folder / "tokenizer_config.json"
    declared = dict(added_tokens(config, where))
    outside = [i for i in declared if not base <= i < base + reserved]
    if outside:
        raise TokenizerError(f"{where}: added token id {outside[0]} is outside {cls}'s range")
    specials = {
        (declared[i].content if i in declared else f"<|reserved_token_{i}|>"): i
        for i in range(base, base + reserved)
    }
    if len(specials) != reserved:
        raise TokenizerError(f"{where}: an added token is named twice")
    bos, eos = token_content(config.get("bos_token")), token_content(config.get("eos_token"))
    for text in (bos, eos):
        if text is not None and text not in specials:
            raise TokenizerError(f"{where}: names the token {text!r}, which is not a special one")
    add_bos = config.get("add_bos_token")
    tokenizer = TiktokenTokenizer(
        name,
        mergeable_ranks=ranks,
        pat_str=pattern,
        special_tokens=specials,
        non_special=[t.content for t in declared.values() if not t.special],
        lstrip=[t.content for t in declared.values() if t.lstrip],
        rstrip=[t.content for t in declared.values() if t.rstrip],
    )
    return LocalTokenizer(
        tokenizer,
        bos_token=bos,
        eos_token=eos,
        add_bos_token=add_bos if isinstance(add_bos, bool) else None,
    )


def _auto_tokenizer(config: Mapping[str, object]) -> list[str]:
    auto_map = config.get("auto_map")
    entry = auto_map.get("AutoTokenizer") if isinstance(auto_map, dict) else None
    names = entry if isinstance(entry, list) else [entry]
    # A hub reference ("owner/repo--module.Class") names the same file in that repository.
    return [n.rpartition("--")[2] for n in names if isinstance(n, str)]


def read_class_constants(path: Path, cls: str) -> dict[str, object]:
    """Class attributes of ``cls`` in the Python file ``path`` assigned a literal, or a
    ``"sep".join([literals])``, evaluated from the syntax tree (the file is not run)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError) as e:
        raise TokenizerError(f"{path}: cannot read {cls} from it ({e})") from e
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            out: dict[str, object] = {}
            for stmt in node.body:
                target, value = _assignment(stmt)
                if target is None or value is None:
                    continue
                try:
                    out[target] = _literal(value)
                except ValueError:
                    continue
            return out
    raise TokenizerError(f"{path}: defines no class {cls}")


def _assignment(stmt: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
        return (target.id if isinstance(target, ast.Name) else None), stmt.value
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return stmt.target.id, stmt.value
    return None, None


def _literal(node: ast.expr) -> object:
    call = node
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "join"
        and isinstance(call.func.value, ast.Constant)
        and isinstance(call.func.value.value, str)
        and len(call.args) == 1
        and not call.keywords
    ):
        parts = ast.literal_eval(call.args[0])
        if not isinstance(parts, list | tuple) or not all(isinstance(p, str) for p in parts):
            raise ValueError("not a join of strings")
        return call.func.value.value.join(parts)
    return ast.literal_eval(node)
