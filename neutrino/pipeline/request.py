"""Protocol-neutral description of a generation request."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from neutrino.config import LimitsConfig
from neutrino.engine.messages import Guided, GuidedMode, Image
from neutrino.errors import bad_request
from neutrino.pipeline.auth import Principal
from neutrino.text.parsers.forced import forced_schema


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """``tool_choice``: the model may call tools (auto), must not (none), must call one
    (required), or must call the one ``name``d (named)."""

    mode: Literal["auto", "none", "required", "named"] = "auto"
    name: str | None = None

    @property
    def forced(self) -> bool:
        """Whether the engine decodes under a schema of the call(s) it must make."""
        return self.mode in ("required", "named")


AUTO_TOOLS = ToolChoice()


@dataclass(slots=True)
class GenerateRequest:
    request_id: str
    model: str
    kind: Literal["chat", "completion"]
    messages: list[dict[str, Any]] | None = None
    prompt: str | list[int] | None = None
    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    include_stop_str_in_output: bool = False
    stop_token_ids: list[int] = field(default_factory=list)
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    ignore_eos: bool = False
    logprobs: bool = False
    top_logprobs: int = 0
    min_tokens: int = 0
    # Token id -> bias, -100 to 100 (checked against the vocabulary once it is known).
    # Engines do not apply it yet: the engine protocol has no field for it.
    logit_bias: dict[int, float] | None = None
    stream: bool = False
    n: int = 1  # choices; the front end fans them out as separate engine requests
    echo: bool = False  # completions: the prompt's text comes first in the output
    include_usage: bool = False
    user: str | None = None
    add_generation_prompt: bool = True
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] | None = None
    tool_choice: ToolChoice = AUTO_TOOLS
    parallel_tool_calls: bool = True
    reasoning_format: Literal["parsed", "raw", "hidden"] = "parsed"
    traceparent: str = ""
    timeout_s: float | None = None
    images: list[Image] = field(default_factory=list)  # in the order they appear
    guided: Guided | None = None  # the client's output constraint (response_format ...)
    validator: Callable[[str], str | None] | None = None  # strict check of the final text
    principal: Principal | None = None  # the caller's API key (None: keys are off)
    protocol: str = "http"  # the front end's, a label of its metrics (PROTOCOLS)
    route: str = ""  # the API's route label of its metrics (ROUTES; "": the kind's)
    received_ns: int = 0  # monotonic ns when the front end received it (0: not known)


def choices(req: GenerateRequest) -> list[GenerateRequest]:
    """One engine request per choice (``n``), whatever protocol asked: a seed moves on by
    one per choice so that seeded choices differ (and each is reproducible)."""
    if req.n == 1:
        return [req]
    return [
        replace(req, seed=None if req.seed is None else (req.seed + i) % (1 << 64))
        for i in range(req.n)
    ]


def check_stops(stops: list[str], limits: LimitsConfig) -> None:
    """Stop strings as every front end accepts them: a bounded number of bounded,
    non-empty strings (raises BAD_REQUEST with ``param="stop"``)."""
    if len(stops) > limits.max_stop_sequences:
        raise bad_request(f"stop accepts at most {limits.max_stop_sequences} sequences", "stop")
    for s in stops:
        if not s:
            raise bad_request("stop sequences must not be empty", "stop")
        if len(s) > limits.max_stop_chars:
            raise bad_request(
                f"each stop sequence must be at most {limits.max_stop_chars} characters", "stop"
            )


def tool_guided(req: GenerateRequest) -> Guided | None:
    """The constraint the engine decodes under: the client's own, or for a forced
    ``tool_choice`` the JSON schema of the call(s) it must make (never both)."""
    if not req.tool_choice.forced:
        return req.guided
    if req.guided is not None:
        raise bad_request(
            "a forced tool_choice cannot be combined with an output constraint "
            "(response_format, structured_outputs or a guided_ field)",
            "tool_choice",
        )
    schema = forced_schema(req.tools or [], req.tool_choice.name)
    return Guided(GuidedMode.JSON_SCHEMA, json.dumps(schema, ensure_ascii=False))
