"""A generation request being translated from a protocol, before it is frozen.

A front end creates a :class:`Draft`, sets each field it finds through the validator of
that field's type (with the field's location in the client's request), then calls
:meth:`Draft.freeze` for the typed :class:`~neutrino.pipeline.request.GenerateRequest`.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from neutrino.config import LimitsConfig
from neutrino.engine.messages import Guided, Image
from neutrino.errors import ErrorKind, bad_request
from neutrino.pipeline import chat
from neutrino.pipeline.chat import AUTO_TOOLS, Message, Tool, ToolChoice
from neutrino.pipeline.fields import Loc, invalid
from neutrino.pipeline.request import (
    NO_TOOLS,
    ChatPrompt,
    GenerateRequest,
    OutputRules,
    ReasoningFormat,
    TextPrompt,
    ToolUse,
    Validator,
    tool_guided,
)
from neutrino.pipeline.sampling import SAMPLING, SamplingParams, StopRules


class Names(msgspec.Struct, frozen=True, gc=False):
    """Where a protocol keeps the fields whose rules join two fields (OpenAI's places by
    default), so that such an error names them as the client's request does."""

    messages: Loc = ("messages",)
    tools: Loc = ("tools",)
    tool_choice: Loc = ("tool_choice",)
    top_logprobs: Loc = ("top_logprobs",)
    prompt: Loc = ("prompt",)
    echo: Loc = ("echo",)
    # The fields that set an output constraint, in words.
    constraints: str = "response_format, structured_outputs or a guided_ field"


OPENAI = Names()


class Draft:
    """Plain fields with their defaults on the class: a draft pays only for the fields
    its request sets."""

    model = ""
    messages: tuple[Message, ...] | None = None
    prompt_text: str | None = None
    prompt_ids: tuple[int, ...] | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    include_stop = False
    guided: Guided | None = None
    validator: Validator | None = None
    reasoning_format: ReasoningFormat = "parsed"
    tools: tuple[Tool, ...] = ()
    tool_choice: ToolChoice = AUTO_TOOLS
    parallel_tool_calls = True
    images: tuple[Image, ...] = ()
    n = 1
    stream = False
    include_usage = False
    user: str | None = None
    echo = False
    add_generation_prompt = True
    template_kwargs: dict[str, object] = {}  # replaced, never changed in place
    reasoning_effort: str | None = None  # a template variable unless template_kwargs sets it

    def __init__(self, request_id: str, kind: Literal["chat", "completion"]) -> None:
        self.request_id = request_id
        self.kind = kind
        self.sampling: dict[str, object] = {}  # SamplingParams field -> checked value

    def add_image(self, image: Image) -> int:
        """Keep ``image``; its index among the request's images."""
        self.images = (*self.images, image)
        return len(self.images) - 1

    def sample(self, name: str, value: object, at: Loc, limits: LimitsConfig) -> None:
        """Check and keep the sampling field ``name`` (a :class:`SamplingParams` field)."""
        self.sampling[name] = SAMPLING[name](value, at, limits)

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

    def freeze(self, names: Names = OPENAI) -> GenerateRequest:
        """The typed request, once the rules that join fields hold (errors name the
        fields where ``names`` says the protocol keeps them)."""
        if not self.model:
            raise bad_request("model is required", "model")
        prompt = self._chat(names) if self.kind == "chat" else self._completion(names)
        stops = _NO_STOPS
        if self.stop or self.stop_token_ids or self.include_stop:
            stops = StopRules(self.stop, self.stop_token_ids, self.include_stop)
        output = _NO_RULES
        if self.guided is not None or self.reasoning_format != "parsed":
            output = OutputRules(self.guided, self.validator, self.reasoning_format)
        tools = NO_TOOLS
        if self.tools or self.tool_choice is not AUTO_TOOLS or not self.parallel_tool_calls:
            tools = ToolUse(self.tools, self.tool_choice, self.parallel_tool_calls)
        sampling = self.sampling
        params = _DEFAULT_SAMPLING
        if sampling:  # what the client gave, and that it gave it
            params = SamplingParams(**sampling, given=frozenset(sampling))  # type: ignore[arg-type]
        req = GenerateRequest(  # positional: the fields' order (GenerateRequest's)
            self.request_id,
            self.model,
            prompt,
            params,
            stops,
            output,
            tools,
            self.images,
            self.n,
            self.stream,
            self.include_usage,
            self.user,
        )
        if self.tool_choice is not AUTO_TOOLS and self.tool_choice.forced:
            tool_guided(req, names.tool_choice, names.constraints)  # refused beside another
        return req

    def _chat(self, names: Names) -> ChatPrompt:
        if self.messages is None:
            raise invalid(names.messages, "{at} must be a non-empty array")
        if not self.sampling.get("logprobs") and "top_logprobs" in self.sampling:
            raise invalid(names.top_logprobs, "{at} requires logprobs=true")
        if self.tool_choice is not AUTO_TOOLS:
            chat.tool_choice(self.tool_choice, self.tools, names.tool_choice, names.tools)
        kwargs = self.template_kwargs
        if self.reasoning_effort is not None and "reasoning_effort" not in kwargs:
            kwargs = {**kwargs, "reasoning_effort": self.reasoning_effort}
        return ChatPrompt(self.messages, self.add_generation_prompt, kwargs)

    def _completion(self, names: Names) -> TextPrompt:
        if self.prompt_text is None and self.prompt_ids is None:
            raise invalid(names.prompt, "{at} must be a string or an array of token ids")
        if self.echo and self.sampling.get("logprobs"):
            raise invalid(
                names.echo,
                "echo with logprobs needs prompt logprobs, which engines do not report yet",
                kind=ErrorKind.UNSUPPORTED,
            )
        self.sampling.setdefault("max_tokens", 16)  # OpenAI's default for completions
        return TextPrompt(self.prompt_text, self.prompt_ids, self.echo)


_DEFAULT_SAMPLING = SamplingParams(given=frozenset())
_NO_STOPS = StopRules()
_NO_RULES = OutputRules()
