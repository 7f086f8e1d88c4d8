"""``seed_oss``: ByteDance Seed-OSS's tool calls and its ``<seed:think>`` reasoning.

Format (Seed-OSS-36B's chat template, which asks for calls this way; vLLM's ``seed_oss``
parsers read the same)::

    <seed:think>The user wants the weather.</seed:think>Checking.
    <seed:tool_call>
    <function=get_weather>
    <parameter=city>Paris</parameter>
    </function>
    </seed:tool_call>

A call block's body is Qwen3-Coder's (``qwen3_coder``: ``<function=NAME>`` with typed
``<parameter=NAME>`` values, one leading and one trailing newline of a value dropped), in a
``<seed:tool_call>`` block; every rule of that parser holds (text after a call dropped, a
block open at the end read as if closed). The reasoning is ``think``'s rules with
``<seed:think>`` and ``</seed:think>``.
"""

from __future__ import annotations

from typing import Final

from neutrino.text.parsers.qwen3_coder import Qwen3CoderToolParser
from neutrino.text.parsers.think import ThinkReasoningParser

__all__ = ["BLOCK_CLOSE", "BLOCK_OPEN", "SeedOssReasoningParser", "SeedOssToolParser"]

BLOCK_OPEN: Final = "<seed:tool_call>"
BLOCK_CLOSE: Final = "</seed:tool_call>"


class SeedOssToolParser(Qwen3CoderToolParser):
    """``<seed:tool_call>`` blocks of Qwen3-Coder functions."""

    block_open = BLOCK_OPEN
    block_close = BLOCK_CLOSE
    bare = None  # vLLM's seed_oss parser needs the block

    __slots__ = ()


class SeedOssReasoningParser(ThinkReasoningParser):
    """``<seed:think>…</seed:think>``."""

    open_marker = "<seed:think>"
    close_marker = "</seed:think>"

    __slots__ = ()
