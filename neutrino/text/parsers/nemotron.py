"""``llama_nemotron_json``: ``<TOOLCALL>[…]</TOOLCALL>`` (NVIDIA Llama-Nemotron Super v1.5).

Format. The published chat template of Llama-3.3-Nemotron-Super-49B-v1.5 tells the model, when
tools are offered, to call them as::

    <TOOLCALL>[{"name": "tool_name1", "arguments": "tool_args1"}, {"name": …}]</TOOLCALL>

and writes past calls back into the prompt the same way (one block per assistant turn, the
calls comma-separated in one JSON array, ``arguments`` as a JSON object). The model card's
example output has the reasoning block first, then the block. NVIDIA's vLLM plugin for this
model (``llama_nemotron_json``, shipped with the weights) reads the JSON between the markers
as a list of ``{"name", "arguments"}`` objects; this parser reads the same format.

Rules:

* text before the first call is content (a whitespace-only run just before a block is
  dropped); text after a call is dropped (the README's rule); a block may appear more than
  once;
* a block holds one JSON array of ``{"name": …, "arguments": {…}}`` objects (``parameters``
  is accepted for ``arguments``, missing arguments mean ``{}``, arguments given as a string
  holding a JSON object are decoded) or a single such object; an empty array gives no call;
* a block that is not that (invalid JSON, an element that is not such an object) is content
  verbatim, markers included (after a call: dropped); a block still open at the end of the
  stream is parsed as if closed, and if it does not parse it is no call and its text is
  content (after a call: dropped).

``<TOOLCALL>`` and ``</TOOLCALL>`` are plain text in this model's tokenizer (Llama 3.x's), so
the markers arrive as ordinary detokenized text and may be split across chunks.
"""

from __future__ import annotations

from typing import Final

from neutrino.text.parsers.base import Call, load_call_list
from neutrino.text.parsers.blocks import BlockToolParser

__all__ = ["CLOSE", "OPEN", "NemotronToolParser", "parse_block"]

OPEN: Final = "<TOOLCALL>"
CLOSE: Final = "</TOOLCALL>"


def parse_block(body: str) -> list[Call] | None:
    """The calls in the text between the markers, or ``None`` if it is not a call list."""
    return load_call_list(body)


class NemotronToolParser(BlockToolParser):
    """``<TOOLCALL>`` JSON-array blocks (see the module docstring)."""

    block_open = OPEN
    block_close = CLOSE
    quoting = "json"

    __slots__ = ()

    def _parse_block(self, body: str) -> list[Call] | None:
        return parse_block(body)
