"""How a request's answer is made from its engine's tokens: the Generation of an admitted
request, with its assembler: its text stream (detokenizer and stops), logprobs, the
answer's parser (reasoning and tool calls, by the model's family) and the strict
format's check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from neutrino.pipeline.assembler import Assembler
from neutrino.pipeline.chat import ToolViews
from neutrino.pipeline.generation import Generation
from neutrino.pipeline.logprobs import LogprobRecorder
from neutrino.pipeline.models import ModelText
from neutrino.pipeline.output import OutputParser
from neutrino.pipeline.request import GenerateRequest, TextPrompt
from neutrino.pipeline.state import Lifecycle
from neutrino.pipeline.text_stream import TextStream
from neutrino.text.parsers import CallIds, reasoning_parser
from neutrino.text.parsers.forced import ForcedToolParser
from neutrino.text.tool_call_ids import alnum9_ids


def opens_think(text: ModelText, prompt: list[int], opening: str = "<think>") -> bool:
    """Whether the rendered chat prompt ends inside a reasoning block (``opening``: the
    format's own, ``<think>``, ``<seed:think>``, ``<|START_THINKING|>`` …), so that the
    model's output starts with reasoning. Templates decide it per request: DeepSeek-R1's
    ends its generation prompt with ``<think>\\n`` but not after a tool result,
    DeepSeek-V3.1's writes ``<think>`` only in thinking mode (``thinking`` true)."""
    tail = text.tokenizer.decode(prompt[-16:], skip_special=False)
    return tail.rstrip().endswith(opening)


def _opened(text: ModelText, prompt: list[int], name: str | None) -> bool:
    """Whether the template opened the reasoning block of the parser named ``name``."""
    if name is None:
        return False
    opening = reasoning_parser(name).opening()
    return opening is not None and opens_think(text, prompt, opening)


def parser_for(
    req: GenerateRequest, text: ModelText, prompt: list[int], offered: ToolViews
) -> OutputParser | None:
    """Reasoning/tool-call splitting for a chat response, if the family has parsers
    (``offered``: the tools as the template read them)."""
    if req.prompt.kind != "chat":
        return None
    family = text.family
    choice = req.tools.choice
    if family.reasoning_parser is None and not req.tools.tools and not choice.forced:
        return None  # the common case: nothing to split
    tools = family.tool_parser if offered and choice.mode != "none" else None
    forced: ForcedToolParser | None = None
    id_prefix: CallIds = f"call_{req.request_id.rpartition('-')[2]}_"
    if family.tool_call_ids == "alnum9":  # the template accepts only such ids
        id_prefix = alnum9_ids(req.request_id)
    if choice.forced:
        forced = ForcedToolParser(tools=offered, id_prefix=id_prefix, name=choice.name)
    if family.reasoning_parser is None and tools is None and forced is None:
        return None
    tokenizer = text.tokenizer
    return OutputParser(
        reasoning=family.reasoning_parser,
        tools=tools,
        offered_tools=offered,
        reasoning_format=req.output.reasoning_format,
        starts_in_reasoning=_opened(text, prompt, family.reasoning_parser),
        id_prefix=id_prefix,
        token_count=lambda s: len(tokenizer.encode(s)),
        parallel_tool_calls=req.tools.parallel,
        forced=forced,
    )


def _on_a_thread(work: Callable[[], str | None], done: Callable[[str | None], None]) -> None:
    """A Generation's Defer: ``work`` on a worker thread, ``done`` back on the loop."""

    def finished(fut: asyncio.Future[str | None]) -> None:
        if fut.cancelled():
            return
        exc = fut.exception()
        done(fut.result() if exc is None else f"the output could not be checked: {exc!r}"[:300])

    asyncio.get_running_loop().run_in_executor(None, work).add_done_callback(finished)


def generation(
    req: GenerateRequest,
    text: ModelText,
    prompt: list[int],
    lifecycle: Lifecycle,
    on_done: Callable[[Generation], None],
    tools: ToolViews,
) -> Generation:
    """The live generation of an admitted request: its text stream, logprobs, parser."""
    parser = parser_for(req, text, prompt, tools)
    sampling = req.sampling
    logprobs = LogprobRecorder(text.tokenizer, sampling.top_logprobs) if sampling.logprobs else None
    assembler = Assembler(
        TextStream(
            text.tokenizer,
            list(req.stops.strings),
            text.stop_token_ids,
            req.stops.include_in_output,
            skip_special=parser is None,
            reported_ids=frozenset(req.stops.token_ids),
        ),
        len(prompt),
        logprobs=logprobs,
        keep_logprobs=not req.stream,
        validator=req.output.validator,
        parser=parser,
    )
    gen = Generation(
        request_id=req.request_id,
        model=req.model,
        assembler=assembler,
        lifecycle=lifecycle,
        on_done=on_done,
        defer=_on_a_thread,
    )
    if isinstance(req.prompt, TextPrompt) and req.prompt.echo:
        echo = req.prompt.text
        gen.echo = echo if echo is not None else text.tokenizer.decode(prompt)
    return gen
