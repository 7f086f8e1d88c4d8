"""Sans-IO: a response's visible text split into reasoning, content and tool calls.

Chains the model family's reasoning parser and, when the request offers tools, its tool
parser (both from :mod:`neutrino.text.parsers`). ``reasoning_format`` follows Groq's API:
``parsed`` splits the reasoning out, ``raw`` leaves it in the content untouched,
``hidden`` drops it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from neutrino.text.parsers import (
    CallIds,
    Delta,
    ReasoningParser,
    ToolCall,
    ToolParser,
    reasoning_parser,
    tool_parser,
)

ReasoningFormat = Literal["parsed", "raw", "hidden"]


class OutputParser:
    __slots__ = ("_calls_cap", "_count", "_hidden", "_reasoning", "_tools", "reasoning_text")

    def __init__(
        self,
        *,
        reasoning: str | None,
        tools: str | None,
        offered_tools: Sequence[Mapping[str, object]] | None,
        reasoning_format: ReasoningFormat,
        starts_in_reasoning: bool,
        id_prefix: CallIds,
        token_count: Callable[[str], int],
        parallel_tool_calls: bool = True,
        forced: ToolParser | None = None,
    ) -> None:
        self._count = token_count
        self._reasoning: ReasoningParser | None = None
        if reasoning is not None and reasoning_format != "raw":
            self._reasoning = reasoning_parser(reasoning)(starts_in_reasoning=starts_in_reasoning)
        self._tools: ToolParser | None = forced
        if forced is None and tools is not None:
            self._tools = tool_parser(tools)(tools=offered_tools, id_prefix=id_prefix)
        self._hidden = reasoning_format == "hidden"
        self._calls_cap = None if parallel_tool_calls else 1
        self.reasoning_text: list[str] = []

    def feed(self, text: str) -> Delta:
        return self._step(self._reasoning.feed(text) if self._reasoning else Delta(content=text))

    def finish(self) -> Delta:
        first = self._reasoning.finish() if self._reasoning else Delta()
        out = self._step(first)
        if self._tools is not None:
            tail = self._tools.finish()
            out.content += tail.content
            out.reasoning += tail.reasoning
            out.tool_calls += tail.tool_calls
        return self._cap(out)

    def _step(self, delta: Delta) -> Delta:
        if delta.reasoning:
            self.reasoning_text.append(delta.reasoning)
            if self._hidden:
                delta.reasoning = ""
        if self._tools is not None and delta.content:
            parsed = self._tools.feed(delta.content)
            delta.content = parsed.content
            delta.reasoning += parsed.reasoning
            delta.tool_calls = parsed.tool_calls
        return self._cap(delta)

    def _cap(self, delta: Delta) -> Delta:
        if self._calls_cap is not None:
            delta.tool_calls = [c for c in delta.tool_calls if c.index < self._calls_cap]
        return delta

    def reasoning(self) -> str | None:
        """The whole reasoning to report: None when not split out, or when hidden."""
        if self._reasoning is None or self._hidden:
            return None
        return "".join(self.reasoning_text)

    def reasoning_tokens(self) -> int | None:
        """Tokens of reasoning (by our tokenizer), None when reasoning is not split out."""
        if self._reasoning is None:
            return None
        return self._count("".join(self.reasoning_text)) if self.reasoning_text else 0

    @property
    def calls(self) -> list[ToolCall]:
        calls = self._tools.calls if self._tools is not None else []
        return calls if self._calls_cap is None else calls[: self._calls_cap]
