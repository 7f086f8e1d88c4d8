"""Guided modes as llama.cpp grammars: each grammar is parsed by llama.cpp itself (a
sampler built over the real SmolLM2 vocabulary), refusals name what cannot be honoured."""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

import pytest

from neutrino.engine.messages import Guided, GuidedMode

llama_cpp = pytest.importorskip("llama_cpp", reason="the llamacpp extra is not installed")
from neutrino.engines.llamacpp import guided  # noqa: E402

GGUF = Path(sys.prefix) / "share" / "neutrino" / "gguf" / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="module")
def vocab() -> object:
    if not GGUF.is_file():
        pytest.skip(f"{GGUF} is missing (make install)")
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(GGUF).encode(), params)
    assert model
    yield llama_cpp.llama_model_get_vocab(model)
    llama_cpp.llama_model_free(model)


SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string"}}},
    "required": ["a"],
}


SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string"}}},
    "required": ["a"],
}


def _parses(vocab: object, grammar: str) -> bool:
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


@pytest.mark.parametrize(
    "g",
    [
        Guided(GuidedMode.JSON_OBJECT),
        Guided(GuidedMode.JSON_SCHEMA, json.dumps(SCHEMA)),
        Guided(GuidedMode.CHOICE, choices=["yes", 'say "no"', "back\\slash", "tab\there", "é"]),
        Guided(GuidedMode.REGEX, pattern=r"[0-9]{3}-[a-z]+(x|y)?"),
        Guided(GuidedMode.REGEX, pattern=r"^\d+\.\d{2}$"),
        Guided(GuidedMode.GRAMMAR, pattern='root ::= "a" | "b"'),
    ],
)
def test_each_mode_is_a_grammar_llama_cpp_parses(vocab: object, g: Guided) -> None:
    grammar = guided.grammar(g)
    assert grammar is not None and _parses(vocab, grammar), grammar


def test_no_constraint_is_no_grammar() -> None:
    assert guided.grammar(None) is None
    assert guided.grammar(Guided()) is None


def test_choice_literals_are_escaped() -> None:
    assert guided.literal('a"b\\c\nd\x01') == '"a\\"b\\\\c\\nd\\x01"'


@pytest.mark.parametrize(
    "pattern",
    [r"(?=a)a", r"(?!b)a", r"(?<=a)b", r"(a)\1", r"(?P<x>a)(?P=x)", r"a\bb", r"(?i)a", r"a^b"],
)
def test_what_no_grammar_expresses_is_unsupported(pattern: str) -> None:
    with pytest.raises(guided.Unsupported):
        guided.grammar(Guided(GuidedMode.REGEX, pattern=pattern))


@pytest.mark.parametrize(
    "g",
    [
        Guided(GuidedMode.REGEX, pattern="(unclosed"),
        Guided(GuidedMode.JSON_SCHEMA, "{not json"),
        Guided(GuidedMode.JSON_SCHEMA, "[1, 2]"),
        Guided(GuidedMode.CHOICE, choices=[]),
        Guided(GuidedMode.GRAMMAR, pattern='start ::= "a"'),
    ],
)
def test_what_does_not_parse_is_invalid(g: Guided) -> None:
    with pytest.raises(guided.Invalid):
        guided.grammar(g)


def test_a_schema_nested_too_deeply_is_refused_not_a_crash() -> None:
    n = 5000
    schema = '{"type": "object", "properties": {"a": ' * n + '{"type": "string"}' + "}}" * n
    with pytest.raises(guided.Unsupported, match="nested too deeply"):
        guided.grammar(Guided(GuidedMode.JSON_SCHEMA, schema))


def test_a_regex_nested_too_deeply_is_refused_not_a_crash() -> None:
    with pytest.raises((guided.Unsupported, guided.Invalid)):
        guided.grammar(Guided(GuidedMode.REGEX, pattern="(" * 3000 + "a" + ")" * 3000))


@pytest.mark.parametrize(
    ("pattern", "language"),
    [
        (r"^\d+\.\d{2}$", ["0.25", "123.00"]),
        (r"[0-9]{3}-[a-z]+(x|y)?", ["123-abc", "000-zx"]),
        (r"a|b|", ["a", "b", ""]),
        (r"[^\d]\W.", ["a!z", "x b"]),
        (r"(ab){2,3}?c*", ["ababc", "abababcc", "abab"]),
        (r"[\]\-^]+", ["]-^"]),
    ],
)
def test_regex_grammars_take_what_the_pattern_matches(
    vocab: object, pattern: str, language: list[str]
) -> None:
    """Each grammar parses in llama.cpp, whose grammar sampler then takes each string the
    pattern matches whole, token by token, and allows the end after it; it refuses a
    string the pattern does not match."""
    import re

    grammar = guided.grammar(Guided(GuidedMode.REGEX, pattern=pattern))
    assert grammar is not None and _parses(vocab, grammar), grammar
    for text in language:
        assert re.fullmatch(pattern, text)
        assert _accepts(vocab, grammar, text), (grammar, text)
    assert not _accepts(vocab, grammar, language[0] + "\u00e9\u00e9")


def _allowed(sampler: object, token: int) -> bool:
    data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
    arr = llama_cpp.llama_token_data_array(data, 1, -1, False)
    llama_cpp.llama_sampler_apply(sampler, ctypes.byref(arr))
    return bool(data[0].logit != float("-inf"))


def _accepts(vocab: object, grammar: str, text: str) -> bool:
    """Whether llama.cpp's grammar sampler takes ``text`` (as SmolLM2's tokens) whole."""
    raw = text.encode()
    buf = (llama_cpp.llama_token * (len(raw) + 8))()
    n = llama_cpp.llama_tokenize(vocab, raw, len(raw), buf, len(buf), False, False)
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    try:
        for token in buf[:n]:
            if not _allowed(sampler, token):
                return False
            llama_cpp.llama_sampler_accept(sampler, token)
        return _allowed(sampler, 2)  # <|im_end|>: the end of generation, once complete
    finally:
        llama_cpp.llama_sampler_free(sampler)
