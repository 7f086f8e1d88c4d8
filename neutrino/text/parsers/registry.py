"""Parsers by name, imported lazily, and the non-streamed convenience functions."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final

from neutrino.text.parsers.base import CallIds, Delta, ReasoningParser, ToolCall, ToolParser

__all__ = [
    "UnknownParser",
    "parse_reasoning",
    "parse_tools",
    "reasoning_parser",
    "reasoning_parser_names",
    "tool_parser",
    "tool_parser_names",
]

_PKG: Final = "neutrino.text.parsers"

REASONING_PARSERS: Final[Mapping[str, str]] = {
    "think": f"{_PKG}.think:ThinkReasoningParser",
    "deepseek_r1": f"{_PKG}.think:ThinkReasoningParser",
    "qwen3": f"{_PKG}.think:ThinkReasoningParser",
    "harmony": f"{_PKG}.harmony:HarmonyReasoningParser",
    "gpt_oss": f"{_PKG}.harmony:HarmonyReasoningParser",
    "mistral": f"{_PKG}.mistral:MistralReasoningParser",
    "granite": f"{_PKG}.granite:GraniteReasoningParser",
    "minimax_m2": f"{_PKG}.think:ThinkReasoningParser",
    "deepseek_v3": f"{_PKG}.think:ThinkReasoningParser",
    "seed_oss": f"{_PKG}.seed_oss:SeedOssReasoningParser",
    "kimi_k2": f"{_PKG}.kimi_k2:KimiK2ReasoningParser",
    "glm45": f"{_PKG}.think:ThinkReasoningParser",
    "longcat": f"{_PKG}.longcat:LongcatReasoningParser",
    "step3": f"{_PKG}.think:ThinkReasoningParser",
    "hunyuan_a13b": f"{_PKG}.hunyuan:HunyuanReasoningParser",
    "cohere_command3": f"{_PKG}.cohere:CohereCommand3ReasoningParser",
    "cohere_command4": f"{_PKG}.cohere:CohereCommand4ReasoningParser",
    "olmo3": f"{_PKG}.think:ThinkReasoningParser",
    "gemma4": f"{_PKG}.gemma4:Gemma4ReasoningParser",
}

TOOL_PARSERS: Final[Mapping[str, str]] = {
    "hermes": f"{_PKG}.hermes:HermesToolParser",
    "qwen": f"{_PKG}.hermes:HermesToolParser",
    "llama3_json": f"{_PKG}.llama3_json:Llama3JsonToolParser",
    "pythonic": f"{_PKG}.pythonic:PythonicToolParser",
    "llama4_pythonic": f"{_PKG}.pythonic:PythonicToolParser",
    "mistral": f"{_PKG}.mistral:MistralToolParser",
    "deepseek_v3": f"{_PKG}.deepseek:DeepSeekV3ToolParser",
    "deepseek_v31": f"{_PKG}.deepseek:DeepSeekV3ToolParser",
    "kimi_k2": f"{_PKG}.kimi_k2:KimiK2ToolParser",
    "harmony": f"{_PKG}.harmony:HarmonyToolParser",
    "gpt_oss": f"{_PKG}.harmony:HarmonyToolParser",
    "openai": f"{_PKG}.harmony:HarmonyToolParser",
    "granite": f"{_PKG}.granite:GraniteToolParser",
    "llama_nemotron_json": f"{_PKG}.nemotron:NemotronToolParser",
    "nemotron": f"{_PKG}.nemotron:NemotronToolParser",
    "glm45": f"{_PKG}.glm45:Glm45ToolParser",
    "glm4_moe": f"{_PKG}.glm45:Glm45ToolParser",
    "qwen3_coder": f"{_PKG}.qwen3_coder:Qwen3CoderToolParser",
    "qwen3_xml": f"{_PKG}.qwen3_coder:Qwen3CoderToolParser",
    "minimax_m2": f"{_PKG}.minimax_m2:MinimaxM2ToolParser",
    "deepseek_v32": f"{_PKG}.dsml:DeepSeekV32ToolParser",
    "deepseek_v4": f"{_PKG}.dsml:DeepSeekV4ToolParser",
    "seed_oss": f"{_PKG}.seed_oss:SeedOssToolParser",
    "longcat": f"{_PKG}.longcat:LongcatToolParser",
    "step3": f"{_PKG}.step3:Step3ToolParser",
    "hunyuan_a13b": f"{_PKG}.hunyuan:HunyuanToolParser",
    "cohere_command3": f"{_PKG}.cohere:CohereToolParser",
    "cohere_command4": f"{_PKG}.cohere:CohereToolParser",
    "olmo3": f"{_PKG}.olmo3:Olmo3ToolParser",
    "gemma4": f"{_PKG}.gemma4:Gemma4ToolParser",
    "functiongemma": f"{_PKG}.gemma4:FunctionGemmaToolParser",
}


class UnknownParser(KeyError):
    """No parser of that kind has that name; the message lists the known names."""

    def __init__(self, kind: str, name: str, known: Sequence[str]) -> None:
        super().__init__(name)
        self.kind = kind
        self.name = name
        self.known = tuple(known)

    def __str__(self) -> str:
        return f"unknown {self.kind} parser {self.name!r}; known: {', '.join(self.known)}"


_loaded: dict[str, type[Any]] = {}
_lock = threading.Lock()


def _load(kind: str, table: Mapping[str, str], name: str) -> type[Any]:
    target = table.get(name)
    if target is None:
        raise UnknownParser(kind, name, sorted(table))
    cls = _loaded.get(target)
    if cls is None:
        module_name, _, attr = target.partition(":")
        with _lock:
            cls = getattr(importlib.import_module(module_name), attr)
            if not isinstance(cls, type):
                raise TypeError(f"{target} is not a class")
            _loaded[target] = cls
    return cls


def reasoning_parser(name: str) -> type[ReasoningParser]:
    """The reasoning parser class registered as ``name`` (``UnknownParser`` if none)."""
    cls = _load("reasoning", REASONING_PARSERS, name)
    if not issubclass(cls, ReasoningParser):
        raise TypeError(f"{REASONING_PARSERS[name]} is not a ReasoningParser")
    return cls


def tool_parser(name: str) -> type[ToolParser]:
    """The tool parser class registered as ``name`` (``UnknownParser`` if none)."""
    cls = _load("tool", TOOL_PARSERS, name)
    if not issubclass(cls, ToolParser):
        raise TypeError(f"{TOOL_PARSERS[name]} is not a ToolParser")
    return cls


def reasoning_parser_names() -> list[str]:
    return sorted(REASONING_PARSERS)


def tool_parser_names() -> list[str]:
    return sorted(TOOL_PARSERS)


def parse_reasoning(parser_name: str, text: str, **kwargs: Any) -> Delta:
    """Non-streamed reasoning split of a whole output (``kwargs`` go to the parser)."""
    parser = reasoning_parser(parser_name)(**kwargs)
    first = parser.feed(text)
    last = parser.finish()
    return Delta(content=first.content + last.content, reasoning=first.reasoning + last.reasoning)


def parse_tools(
    parser_name: str,
    text: str,
    tools: Sequence[Mapping[str, object]] | None,
    *,
    id_prefix: CallIds = "call_",
) -> tuple[str, list[ToolCall]]:
    """Non-streamed tool-call parse of a whole content text: ``(content, calls)``."""
    parser = tool_parser(parser_name)(tools=tools, id_prefix=id_prefix)
    first = parser.feed(text)
    last = parser.finish()
    return first.content + last.content, parser.calls
