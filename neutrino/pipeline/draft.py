"""A generation request being translated from a protocol, before it is frozen.

A front end creates a :class:`Draft`, sets each field it finds through the validator of
that field's type (with the field's location in the client's request), then calls
:meth:`Draft.freeze` for the typed :class:`~neutrino.pipeline.request.GenerateRequest`.
"""

from __future__ import annotations

from typing import Literal

from neutrino.config import LimitsConfig
from neutrino.engine.messages import Guided, Image
from neutrino.errors import bad_request
from neutrino.pipeline.chat import AUTO_TOOLS, Message, Tool, ToolChoice
from neutrino.pipeline.fields import Loc
from neutrino.pipeline.request import (
    ChatPrompt,
    GenerateRequest,
    OutputRules,
    ReasoningFormat,
    TextPrompt,
    ToolUse,
    Validator,
)
from neutrino.pipeline.sampling import SAMPLING, SamplingParams, StopRules


class Draft:
    __slots__ = (
        "add_generation_prompt",
        "echo",
        "guided",
        "images",
        "include_stop",
        "include_usage",
        "kind",
        "messages",
        "model",
        "n",
        "parallel_tool_calls",
        "prompt_ids",
        "prompt_text",
        "reasoning_format",
        "request_id",
        "sampling",
        "stop",
        "stop_token_ids",
        "stream",
        "template_kwargs",
        "tool_choice",
        "tools",
        "user",
        "validator",
    )

    def __init__(self, request_id: str, kind: Literal["chat", "completion"]) -> None:
        self.request_id = request_id
        self.kind = kind
        self.model = ""
        self.messages: tuple[Message, ...] | None = None
        self.prompt_text: str | None = None
        self.prompt_ids: tuple[int, ...] | None = None
        self.sampling: dict[str, object] = {}  # SamplingParams field -> checked value
        self.stop: tuple[str, ...] = ()
        self.stop_token_ids: tuple[int, ...] = ()
        self.include_stop = False
        self.guided: Guided | None = None
        self.validator: Validator | None = None
        self.reasoning_format: ReasoningFormat = "parsed"
        self.tools: tuple[Tool, ...] = ()
        self.tool_choice: ToolChoice = AUTO_TOOLS
        self.parallel_tool_calls = True
        self.images: list[Image] = []
        self.n = 1
        self.stream = False
        self.include_usage = False
        self.user: str | None = None
        self.echo = False
        self.add_generation_prompt = True
        self.template_kwargs: dict[str, object] = {}

    def sample(self, name: str, value: object, at: Loc, limits: LimitsConfig) -> None:
        """Check and keep the sampling field ``name`` (a :class:`SamplingParams` field)."""
        self.sampling[name] = SAMPLING[name](value, at, limits)

    def sampled(self, name: str) -> object:
        """A sampling field's value as set, or its default."""
        return self.sampling.get(name, getattr(_DEFAULT_SAMPLING, name))

    def constrain(self, guided: Guided | None, validator: Validator | None, param: str) -> None:
        """Set the output constraint; a second one is refused, never merged."""
        if guided is None:
            return
        if self.guided is not None:
            raise bad_request(
                "give one output constraint: response_format, structured_outputs or a "
                "guided_ field",
                param,
            )
        self.guided, self.validator = guided, validator

    def freeze(self) -> GenerateRequest:
        prompt: ChatPrompt | TextPrompt
        if self.kind == "chat":
            assert self.messages is not None
            prompt = ChatPrompt(self.messages, self.add_generation_prompt, self.template_kwargs)
        else:
            prompt = TextPrompt(self.prompt_text, self.prompt_ids, self.echo)
        tools = ToolUse(self.tools, self.tool_choice, self.parallel_tool_calls)
        return GenerateRequest(
            request_id=self.request_id,
            model=self.model,
            prompt=prompt,
            sampling=SamplingParams(**self.sampling) if self.sampling else _DEFAULT_SAMPLING,  # type: ignore[arg-type]
            stops=StopRules(self.stop, self.stop_token_ids, self.include_stop),
            output=OutputRules(self.guided, self.validator, self.reasoning_format),
            tools=tools,
            images=tuple(self.images),
            n=self.n,
            stream=self.stream,
            include_usage=self.include_usage,
            user=self.user,
        )


_DEFAULT_SAMPLING = SamplingParams()
