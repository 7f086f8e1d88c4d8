"""Guided decoding as llama.cpp grammars (GBNF), one per mode of the engine protocol.

- json object: any JSON object (llama-cpp-python's JSON grammar);
- json schema: llama.cpp's schema-to-grammar converter (shipped in llama-cpp-python);
- choice: one of the given strings, exactly;
- regex: Python's reading of the pattern written as a grammar (``regex_gbnf``; the answer
  matches it whole); what a grammar cannot express (look-arounds, back-references,
  conditionals, word boundaries, inline flags) is refused;
- grammar: a GBNF grammar given as it is (its root rule ``root``).

What cannot be honoured is an :class:`Unsupported` (the engine answers ``unsupported``);
a schema or pattern that does not parse is an :class:`Invalid`.
"""

from __future__ import annotations

import json
from typing import Any

from neutrino.engine.messages import Guided, GuidedMode
from neutrino.text.regex_gbnf import RegexUnsupported, literal, regex_grammar

__all__ = ["Invalid", "Unsupported", "grammar", "literal"]

MAX_GRAMMAR_CHARS = 1 << 20  # a converted schema's grammar, bounded


class Unsupported(ValueError):
    """A guided mode or feature this engine cannot decode under."""


class Invalid(ValueError):
    """A schema, pattern or grammar that does not parse."""


def grammar(guided: Guided | None) -> str | None:
    """The GBNF grammar for ``guided`` (None: unconstrained)."""
    if guided is None or guided.mode is GuidedMode.NONE:
        return None
    mode = guided.mode
    if mode is GuidedMode.JSON_OBJECT:
        from llama_cpp.llama_grammar import JSON_GBNF

        return str(JSON_GBNF)
    if mode is GuidedMode.JSON_SCHEMA:
        return _bounded(_schema(guided.json_schema))
    if mode is GuidedMode.CHOICE:
        if not guided.choices:
            raise Invalid("choice needs at least one string")
        return "root ::= " + " | ".join(literal(c) for c in guided.choices) + "\n"
    if mode is GuidedMode.REGEX:
        return _bounded(_regex(guided.pattern))
    if mode is GuidedMode.GRAMMAR:
        if "root" not in guided.pattern:
            raise Invalid("a GBNF grammar needs a root rule")
        return guided.pattern
    raise Unsupported(f"guided mode {mode.name.lower()} is not supported")


def _converter(raw_pattern: bool) -> Any:
    """llama.cpp's schema-to-grammar converter (in llama-cpp-python, untyped)."""
    from llama_cpp import llama_grammar

    converter: Any = llama_grammar.SchemaConverter
    return converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=raw_pattern)


def _schema(text: str) -> str:
    try:
        schema: Any = json.loads(text)
    except ValueError as exc:
        raise Invalid(f"the JSON schema does not parse: {exc}") from None
    except RecursionError:
        raise Unsupported("the JSON schema is nested too deeply") from None
    if not isinstance(schema, dict | bool):
        raise Invalid("a JSON schema is an object")
    conv = _converter(raw_pattern=False)
    try:
        schema = conv.resolve_refs(schema, "request")
        conv.visit(schema, "")
    except RecursionError:
        raise Unsupported("the JSON schema is nested too deeply") from None
    except (ValueError, KeyError, TypeError, AssertionError) as exc:
        raise Unsupported(f"the JSON schema cannot be decoded under: {exc}") from None
    _refuse(conv, "the JSON schema cannot be decoded under")
    return str(conv.format_grammar())


def _regex(pattern: str) -> str:
    try:
        return regex_grammar(pattern)
    except RegexUnsupported as exc:
        raise Unsupported(str(exc)) from None
    except ValueError as exc:
        raise Invalid(str(exc)) from None


def _refuse(conv: Any, why: str) -> None:
    """The converter's own complaints (versions that collect them), as a refusal."""
    errors = getattr(conv, "_errors", None)
    if errors:
        raise Unsupported(f"{why}: {errors[0]}")


def _bounded(text: str) -> str:
    if len(text) > MAX_GRAMMAR_CHARS:
        raise Unsupported("the constraint's grammar is too large")
    return text
