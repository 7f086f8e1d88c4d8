"""The pipeline's generation request: typed, frozen and protocol-neutral.

A front end translates its protocol into a :class:`Draft` (plain fields, each checked
by the validator of its type as it is set, with the client's location of it) and
freezes it into a :class:`GenerateRequest`; from there on nothing changes it. What the
request means (its prompt, sampling, stops, output constraint, tools, choices) is decided
once, for every protocol.

The request's Structs are frozen and untracked by the garbage collector (``gc=False``):
they hold only values (strings, numbers, JSON the client sent, other such Structs), never
a reference back, so they can take no part in a cycle, and the collector's passes skip
the few dozen objects each request makes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import ClassVar, Literal

import msgspec

from neutrino.engine.messages import Guided, GuidedMode, Image
from neutrino.pipeline.auth import Principal
from neutrino.pipeline.chat import AUTO_TOOLS, Message, Tool, ToolChoice
from neutrino.pipeline.fields import Loc, invalid
from neutrino.pipeline.quota import Rates
from neutrino.pipeline.sampling import SamplingParams, StopRules
from neutrino.text.parsers.forced import forced_schema

ReasoningFormat = Literal["parsed", "raw", "hidden"]
Validator = Callable[[str], str | None]


class ChatPrompt(msgspec.Struct, frozen=True, gc=False):
    kind: ClassVar[Literal["chat"]] = "chat"  # the request's kind (an attribute, not a call)
    messages: tuple[Message, ...]
    add_generation_prompt: bool = True
    template_kwargs: Mapping[str, object] = {}  # chat_template_kwargs: template variables


class TextPrompt(msgspec.Struct, frozen=True, gc=False):
    """A completion's prompt: text (tokenized with the model's BOS) or token ids."""

    kind: ClassVar[Literal["completion"]] = "completion"
    text: str | None = None
    ids: tuple[int, ...] | None = None
    echo: bool = False  # the prompt's text comes first in the output


class OutputRules(msgspec.Struct, frozen=True, gc=False):
    guided: Guided | None = None  # the client's output constraint (response_format ...)
    validator: Validator | None = None  # strict check of the final text
    reasoning_format: ReasoningFormat = "parsed"


class ToolUse(msgspec.Struct, frozen=True, gc=False):
    tools: tuple[Tool, ...] = ()
    choice: ToolChoice = AUTO_TOOLS
    parallel: bool = True  # parallel_tool_calls


NO_TOOLS = ToolUse()


class Origin(msgspec.Struct, frozen=True, gc=False):
    """Who sent a request, how, and when (set by the front end, read by metrics, traces,
    keys and deadlines)."""

    principal: Principal | None = None  # the caller's API key (None: keys are off)
    protocol: str = "http"  # the front end's, a label of its metrics (PROTOCOLS)
    route: str = ""  # the API's route label of its metrics (ROUTES; "": the kind's)
    received_ns: int = 0  # monotonic ns when the front end received it (0: not known)
    traceparent: str = ""
    timeout_s: float | None = None
    priority: int = -1  # the priority it asked for (-1: none; the key caps it)
    rates: Rates | None = None  # where its key's rate limits are told (its answer's headers)


class GenerateRequest(msgspec.Struct, frozen=True, gc=False):
    request_id: str
    model: str
    prompt: ChatPrompt | TextPrompt
    sampling: SamplingParams = SamplingParams()
    stops: StopRules = StopRules()
    output: OutputRules = OutputRules()
    tools: ToolUse = NO_TOOLS
    images: tuple[Image, ...] = ()  # in the order they appear
    n: int = 1  # choices; the front end fans them out as separate engine requests
    stream: bool = False
    include_usage: bool = False
    user: str | None = None
    origin: Origin = Origin()

    @property
    def kind(self) -> Literal["chat", "completion"]:
        return self.prompt.kind  # the hot path reads req.prompt.kind itself

    @property
    def chat(self) -> ChatPrompt:
        assert isinstance(self.prompt, ChatPrompt)
        return self.prompt

    @property
    def text_prompt(self) -> TextPrompt:
        assert isinstance(self.prompt, TextPrompt)
        return self.prompt

    def replace(self, **changes: object) -> GenerateRequest:
        return msgspec.structs.replace(self, **changes)


def choices(req: GenerateRequest) -> list[GenerateRequest]:
    """One engine request per choice (``n``), whatever protocol asked: a seed moves on by
    one per choice so that seeded choices differ (and each is reproducible)."""
    if req.n == 1:
        return [req]
    seed = req.sampling.seed
    return [
        req.replace(
            sampling=msgspec.structs.replace(
                req.sampling, seed=None if seed is None else (seed + i) % (1 << 64)
            )
        )
        for i in range(req.n)
    ]


def tool_guided(
    req: GenerateRequest,
    at: Loc = ("tool_choice",),
    constraints: str = "response_format, structured_outputs or a guided_ field",
) -> Guided | None:
    """The constraint the engine decodes under: the client's own, or for a forced
    ``tool_choice`` the JSON schema of the call(s) it must make (never both; ``at`` and
    ``constraints``: how the client's protocol names the tool choice and the fields of
    an output constraint)."""
    guided = req.output.guided
    if not req.tools.choice.forced:
        return guided
    if guided is not None:
        raise invalid(
            at, f"a forced {{at}} cannot be combined with an output constraint ({constraints})"
        )
    offered = [(t.name, t.parameters) for t in req.tools.tools]
    schema = forced_schema(offered, req.tools.choice.name)
    return Guided(GuidedMode.JSON_SCHEMA, json.dumps(schema, ensure_ascii=False))
