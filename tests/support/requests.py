"""Views of the pipeline's typed request for tests: its messages and tools as chat
templates read them (the OpenAI shape clients send)."""

from __future__ import annotations

from neutrino.pipeline.chat import template_messages, template_tools
from neutrino.pipeline.request import GenerateRequest


def messages(req: GenerateRequest) -> list[dict[str, object]]:
    return template_messages(req.chat.messages, {"type": "image"})


def tools(req: GenerateRequest) -> list[dict[str, object]] | None:
    return template_tools(req.tools.tools)
