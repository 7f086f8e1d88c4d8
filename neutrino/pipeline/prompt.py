"""Prompt building: a generation request's template and tokens, within its model's context.

A chat is rendered by the model's chat template and tokenized; a completion's text is
tokenized (with the model's BOS), its token ids checked against the vocabulary. A prompt
far over the context is refused from a lower bound of its tokens, counted on a worker
thread, before the template or the tokenizer builds it whole.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from neutrino.engine.messages import Capability, ModelInfo
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.pipeline.chat import (
    Message,
    Part,
    TextPart,
    ToolViews,
    template_messages,
    verbatim_texts,
)
from neutrino.pipeline.models import ModelText, ModelTexts
from neutrino.pipeline.observe import Observed
from neutrino.pipeline.request import GenerateRequest
from neutrino.text.bounded import tokens_at_least
from neutrino.text.families import ModelFamily
from neutrino.text.templates import TemplateError

# A text longer than this many characters per token of the context is counted piece by
# piece first (tokens_at_least): it is almost surely over, and then is refused without
# its whole token list being built.
_COUNT_FIRST_CHARS_PER_TOKEN = 8


def context_error(ctx: int, tokens: str, param: str) -> NeutrinoError:
    return NeutrinoError(
        ErrorKind.CONTEXT_LENGTH,
        f"this model's maximum context length is {ctx} tokens; the prompt has {tokens} tokens",
        param=param,
    )


def _encode_within(text: ModelText, s: str, ctx: int) -> list[int] | int:
    """The prompt's ids, or, for a text far over the context, a lower bound of its token
    count past the context, found without building its whole token list."""
    if ctx and len(s) > _COUNT_FIRST_CHARS_PER_TOKEN * ctx:
        over = tokens_at_least(text.tokenizer.encode, s, ctx - 1)
        if over is not None:
            return over
    return text.tokenizer.encode_prompt(s)


def _far_over(messages: Sequence[Message], ctx: int) -> tuple[str, int] | None:
    """For a chat whose texts are far over the context (as ``_encode_within`` judges a
    text): those texts joined, and the token count past which it is over. None: it may
    fit, render it (the common case, decided here without a worker thread)."""
    if not ctx:
        return None
    limit = _COUNT_FIRST_CHARS_PER_TOKEN * ctx
    size = 0  # every turn's text: at least the verbatim texts' (the common case ends here)
    for m in messages:
        content = m.content
        size += len(content) if isinstance(content, str) else _parts_chars(content)
    if size <= limit:
        return None
    texts = verbatim_texts(messages)
    if sum(map(len, texts)) <= limit:
        return None
    # Joined, the texts may merge a token or so at each seam where the template puts a
    # role marker instead: a few tokens of slack each.
    return "\n".join(texts), ctx - 1 + 4 * len(texts)


def _parts_chars(content: tuple[Part, ...] | None) -> int:
    """The characters of a turn's text parts (none: 0)."""
    return sum(len(p.text) for p in content if isinstance(p, TextPart)) if content else 0


async def model_text(texts: ModelTexts, req: GenerateRequest, info: ModelInfo) -> ModelText:
    """The served model's text layer (its template and tokenizer) for ``req``: at once
    when it is loaded, else loaded on a worker thread."""
    if req.images and not info.can(Capability.VISION):
        raise NeutrinoError(
            ErrorKind.BAD_REQUEST,
            f"the model {req.model!r} does not accept images",
            param="messages",
        )
    text = texts.cached(req.model)
    return text if text is not None else await asyncio.to_thread(texts.get, req.model)


def family_image(family: ModelFamily) -> dict[str, object]:
    """An image part as the family's template takes it: an image part where the template
    renders images itself, else a text part holding the family's image placeholder (the
    engine gets the images themselves)."""
    if family.renders_images:
        return {"type": "image"}
    return {"type": "text", "text": family.image_placeholder}


class PromptBuilder:
    """Token ids of a request's prompt; texts longer than ``offload_chars`` are tokenized
    on a worker thread."""

    __slots__ = ("offload_chars",)

    def __init__(self, offload_chars: int) -> None:
        self.offload_chars = offload_chars

    async def ids(
        self,
        req: GenerateRequest,
        text: ModelText,
        ctx: int,
        obs: Observed,
        tools: ToolViews,
    ) -> list[int]:
        """``tools``: the offered tools as templates read them (``template_tools``)."""
        obs.mark("parsed")
        if req.prompt.kind == "chat":
            return await self._chat(req, text, ctx, obs, tools)
        prompt = req.text_prompt
        if prompt.ids is not None:
            vocab = text.tokenizer.vocab_size
            if any(t >= vocab for t in prompt.ids):
                raise NeutrinoError(
                    ErrorKind.BAD_REQUEST,
                    f"prompt token ids must be below the vocabulary size {vocab}",
                    param="prompt",
                )
            return list(prompt.ids)
        assert prompt.text is not None
        obs.mark("templated")
        ids = await self.encode(prompt.text, text, ctx, "prompt")
        obs.mark("tokenized")
        if text.bos_token_id is not None and (not ids or ids[0] != text.bos_token_id):
            ids.insert(0, text.bos_token_id)
        return ids

    async def _chat(
        self, req: GenerateRequest, text: ModelText, ctx: int, obs: Observed, tools: ToolViews
    ) -> list[int]:
        chat = req.chat
        far = _far_over(chat.messages, ctx)
        if far is not None:
            # Counted on a worker thread before the template renders it all (which holds
            # the event loop: some 3 ms a MB); a lower bound of its tokens past the context.
            encode = text.tokenizer.encode
            over = await asyncio.to_thread(tokens_at_least, encode, *far)
            if over is not None:
                raise context_error(ctx, f"at least {over}", "messages")
        try:
            rendered = text.template.render(
                template_messages(chat.messages, family_image(text.family) if req.images else {}),
                add_generation_prompt=chat.add_generation_prompt,
                tools=tools,
                **chat.template_kwargs,
            )
        except TemplateError as exc:
            param = exc.param or "messages"
            raise NeutrinoError(ErrorKind.BAD_REQUEST, str(exc), param=param) from None
        obs.mark("templated")
        if len(rendered) > self.offload_chars:
            ids = await self.encode(rendered, text, ctx, "messages")
        else:  # the common case: no coroutine of its own
            ids = self.encode_here(rendered, text, ctx, "messages")
        obs.mark("tokenized")
        return ids

    async def encode(self, s: str, text: ModelText, ctx: int, param: str) -> list[int]:
        if len(s) <= self.offload_chars:
            return self.encode_here(s, text, ctx, param)
        # The thread returns the refusal rather than raising it: an exception that
        # crosses a future is held in a reference cycle (future, traceback, frames) with
        # every local of those frames, the rendered prompt among them, until the garbage
        # collector's next full pass.
        ids = await asyncio.to_thread(_encode_within, text, s, ctx)
        if isinstance(ids, int):
            raise context_error(ctx, f"at least {ids}", param)
        return ids

    @staticmethod
    def encode_here(s: str, text: ModelText, ctx: int, param: str) -> list[int]:
        """``s``'s ids, encoded on the event loop (a text of at most ``offload_chars``)."""
        ids = _encode_within(text, s, ctx)
        if isinstance(ids, int):
            raise context_error(ctx, f"at least {ids}", param)
        return ids
