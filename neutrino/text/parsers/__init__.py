"""Sans-IO parsers that split raw model output into reasoning, content and tool calls.

Two kinds, one instance per response, each fed the detokenized output chunk by chunk
(special-token strings such as ``<think>`` present as text):

* a :class:`ReasoningParser` splits the raw output into ``reasoning`` and ``content``;
* a :class:`ToolParser` then splits that content into plain ``content`` and tool calls.

Both return a :class:`Delta` per ``feed`` and per ``finish``; merged, the deltas of any chunking
equal the non-streamed result (:func:`parse_reasoning`, :func:`parse_tools`). Parsers are
looked up by name; their modules are imported on first use.

=====================  ======================================================================
reasoning parser       format
=====================  ======================================================================
``think``              ``<think>…</think>`` (aliases ``deepseek_r1``, ``qwen3``, ``deepseek_v3``)
``harmony``            gpt-oss channels (alias ``gpt_oss``)
``mistral``            ``[THINK]…[/THINK]``
``granite``            ``<think>…</think><response>…</response>`` (Granite 3.3)
``minimax_m2``         ``think``'s (MiniMax M2's interleaved thinking)
``seed_oss``           ``<seed:think>…</seed:think>`` (Seed-OSS)
``kimi_k2``            ``think``'s, also ended by the tool-call section (K2 Thinking, K2.5)
``glm45``              ``think``'s (GLM-4.5/4.6 write ``<think>`` themselves)
``longcat``            ``<longcat_think>…</longcat_think>`` (LongCat Flash Thinking)
``step3``              ``think``'s (Step 3's template opens ``<think>``)
``hunyuan_a13b``       ``<think>…</think><answer>…</answer>`` (Hunyuan-A13B)
``cohere_command3``    ``<|START_THINKING|>…`` then ``<|START_RESPONSE|>`` (``…4``: ``TEXT``)
``olmo3``              ``think``'s (OLMo 3 Think's template opens ``<think>``)
``gemma4``             ``<|channel>thought…<channel|>`` (Gemma 4)
=====================  ======================================================================

=====================  ======================================================================
tool parser            format
=====================  ======================================================================
``hermes``             ``<tool_call>{json}</tool_call>`` (alias ``qwen``)
``llama3_json``        ``{"name", "parameters"}`` objects, ``<|python_tag|>``, ``;``
``pythonic``           ``[f(a=1), g()]`` (alias ``llama4_pythonic``)
``mistral``            ``[TOOL_CALLS][…]`` and ``[TOOL_CALLS]name[ARGS]{…}``
``deepseek_v3``        DeepSeek V3/R1 and V3.1 (alias ``deepseek_v31``)
``kimi_k2``            ``<|tool_calls_section_begin|>…``
``harmony``            gpt-oss ``to=functions.NAME`` messages (aliases ``gpt_oss``, ``openai``)
``granite``            ``<|tool_call|>[{…}, …]`` (Granite 3.x)
``glm45``              ``<tool_call>f<arg_key>a</arg_key><arg_value>…`` (alias ``glm4_moe``)
``qwen3_coder``        ``<tool_call><function=f><parameter=a>…`` (alias ``qwen3_xml``)
``minimax_m2``         ``<minimax:tool_call><invoke name="f"><parameter name="a">…``
``deepseek_v32``       DeepSeek V3.2's DSML ``function_calls`` (``deepseek_v4``: ``tool_calls``)
``seed_oss``           ``<seed:tool_call><function=f><parameter=a>…`` (Seed-OSS)
``longcat``            ``<longcat_tool_call>`` JSON or key/value pairs (LongCat Flash)
``step3``              ``<|tool_calls_begin|>…<steptml:invoke name="f">…`` (Step 3)
``hunyuan_a13b``       ``<tool_calls>[{"name", "arguments"}, …]</tool_calls>``
``cohere_command3``    ``<|START_ACTION|>[{"tool_name", "parameters"}]`` (alias ``…4``)
``olmo3``              ``<function_calls>f(a=1)\ng()</function_calls>`` (OLMo 3)
``gemma4``             ``<|tool_call>call:f{a:<|"|>x<|"|>}<tool_call|>`` (Gemma 4)
``functiongemma``      ``<start_function_call>call:f{a:<escape>x<escape>}…``
=====================  ======================================================================
"""

from __future__ import annotations

from neutrino.text.parsers import registry
from neutrino.text.parsers.base import (
    CallIds,
    Delta,
    ReasoningParser,
    ToolCall,
    ToolCallDelta,
    ToolParser,
)
from neutrino.text.parsers.registry import *  # noqa: F403 (its __all__, re-exported)

__all__ = [
    "CallIds",
    "Delta",
    "ReasoningParser",
    "ToolCall",
    "ToolCallDelta",
    "ToolParser",
]
__all__ += registry.__all__
