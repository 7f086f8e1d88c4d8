"""Chat templates: minijinja rendering vs a jinja2 reference set up like HF transformers."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
import pytest
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from neutrino.text.templates import (
    DEFAULT_TEMPLATES_PATH,
    ChatTemplate,
    FamilyConfigError,
    ModelFamily,
    TemplateError,
    UnknownFamily,
    family_for_model,
    load_families,
    normalize_messages,
)

FAMILIES = load_families()
FROZEN = datetime(2024, 9, 5, 13, 30)


class RefError(Exception):
    pass


def _reference_env(clock: Callable[[], datetime]) -> ImmutableSandboxedEnvironment:
    """The jinja2 environment transformers builds for chat templates."""

    def raise_exception(message: str) -> None:
        raise RefError(message)

    def tojson(
        x: Any,
        ensure_ascii: bool = False,
        indent: Any = None,
        separators: Any = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    def strftime_now(fmt: str) -> str:
        return clock().strftime(fmt)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


_FROZEN_ENV = _reference_env(lambda: FROZEN)


@functools.cache
def _compiled_reference(source: str) -> jinja2.Template:
    return _FROZEN_ENV.from_string(source)


@functools.cache
def _our_template(name: str) -> ChatTemplate:
    return ChatTemplate(FAMILIES[name], clock=lambda: FROZEN)


def reference_render(
    family: ModelFamily,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool,
    tools: Sequence[Mapping[str, Any]] | None,
    clock: Callable[[], datetime] | None = None,
    **extra: Any,
) -> str:
    """What transformers' apply_chat_template(tokenize=False) renders (its jinja2 setup),
    given the messages as the server shapes them (``normalize_messages``; for Mistral's
    families that includes tool-call ids mapped to 9 letters and digits, which the published
    templates require: test_mistral_templates_refuse_ids_the_server_maps)."""
    if clock is None:
        template = _compiled_reference(family.template)
    else:
        template = _reference_env(clock).from_string(family.template)
    specials = {
        k: v
        for k, v in (("bos_token", family.bos_token), ("eos_token", family.eos_token))
        if v is not None
    }
    return template.render(
        messages=normalize_messages(
            messages,
            family.tool_call_arguments,
            image_parts=family.renders_images,
            tool_call_ids=family.tool_call_ids,
        ),
        tools=tools,
        add_generation_prompt=add_generation_prompt,
        **{**specials, **extra},
    )


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather — in °C, for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich"},
                "unit": {"type": "string", "enum": ["c", "f"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "scale": {"type": "number", "default": 1.5},
                "strict": {"type": "boolean", "default": False},
                "extra": {"type": ["string", "null"], "default": None},
            },
            "required": ["city"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {"name": "now", "description": "Time now", "parameters": {"type": "object"}},
}


def _call(name: str, args: Any, call_id: str = "call_1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


SYSTEM_USER: list[dict[str, Any]] = [
    {"role": "system", "content": "  You are terse.\n"},
    {"role": "user", "content": "Hello! 你好 👋 «quotes» \"double\" 'single'\n  indented"},
]
USER_ONLY: list[dict[str, Any]] = [{"role": "user", "content": "What is 2+2?"}]
MULTI_TURN: list[dict[str, Any]] = [
    {"role": "system", "content": "Answer in French."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Bonjour !"},
    {
        "role": "user",
        "content": [{"type": "text", "text": "How "}, {"type": "text", "text": "are you?"}],
    },
    {"role": "assistant", "content": "Très bien."},
    {"role": "user", "content": "Bye"},
]
TOOL_ROUND: list[dict[str, Any]] = [
    {"role": "system", "content": "Use tools."},
    {"role": "user", "content": "Weather in Zürich?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [_call("get_weather", '{"city": "Zürich", "unit": "c"}')],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21.5, "sky": "☀"}'},
    {"role": "assistant", "content": "It is 21.5 °C and sunny."},
    {"role": "user", "content": "Thanks"},
]
TOOL_PENDING: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": "", "tool_calls": [_call("get_weather", {"city": "Oslo"})]},
    {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
]
PARALLEL_TOOLS: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather and time?"},
    {
        "role": "assistant",
        "content": "Checking both.",
        "tool_calls": [_call("get_weather", '{"city": "Rome"}'), _call("now", "{}", "call_2")],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
]
NULL_TOOL_CALLS: list[dict[str, Any]] = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello", "tool_calls": None},
    {"role": "user", "content": "again"},
]

THINK_HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "Is 7 prime?"},
    {"role": "assistant", "content": "<think>\nDivisors: 1 and 7.\n</think>\n\nYes."},
    {"role": "user", "content": "And 9?"},
]


def _image_conversation(placeholder: str | None) -> list[dict[str, Any]]:
    """A user turn whose image part the server has replaced by the family's placeholder, or
    (``None``: the template renders images itself) by an image part."""
    image = {"type": "image"} if placeholder is None else {"type": "text", "text": placeholder}
    return [
        {"role": "user", "content": [image, {"type": "text", "text": "What is in this picture?"}]}
    ]


# Several images over several turns, for templates that render (and number) images themselves.
IMAGE_TURNS: list[dict[str, Any]] = [
    {"role": "system", "content": "Compare pictures."},
    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "A cat?"}]},
    {"role": "assistant", "content": "Yes, a cat."},
    {
        "role": "user",
        "content": [{"type": "text", "text": "And "}, {"type": "image"}, {"type": "image"}],
    },
]


CONVERSATIONS: dict[str, list[dict[str, Any]]] = {
    "system_user": SYSTEM_USER,
    "user_only": USER_ONLY,
    "multi_turn": MULTI_TURN,
    "tool_round": TOOL_ROUND,
    "tool_pending": TOOL_PENDING,
    "parallel_tools": PARALLEL_TOOLS,
    "null_tool_calls": NULL_TOOL_CALLS,
    "think_history": THINK_HISTORY,
}
TOOLSETS: dict[str, list[dict[str, Any]] | None] = {
    "no_tools": None,
    "tools": [WEATHER_TOOL, TIME_TOOL],
}
# Extra template variables; each is tried only with the templates that read it.
EXTRAS: dict[str, dict[str, Any]] = {
    "plain": {},
    "date": {"date_string": "05 Sep 2024"},
    "tools_in_system": {"tools_in_user_message": False},
    "no_think": {"enable_thinking": False},
    "think": {"enable_thinking": True},
    "keep_thinking": {"clear_thinking": False},  # GLM-4.7: past reasoning kept
    "granite_thinking": {"thinking": True},
    "harmony": {"reasoning_effort": "high", "model_identity": "You are a test model."},
    "vision_id": {"add_vision_id": True},
}
_RAW_FAMILIES: dict[str, dict[str, Any]] = json.loads(
    DEFAULT_TEMPLATES_PATH.read_text(encoding="utf-8")
)["families"]


def _extras_for(family: ModelFamily) -> list[str]:
    return [
        name for name, values in EXTRAS.items() if all(key in family.template for key in values)
    ]


def _conversations_for(name: str) -> dict[str, list[dict[str, Any]]]:
    conversations = dict(CONVERSATIONS)
    placeholder = _RAW_FAMILIES[name].get("image_placeholder")
    if FAMILIES[name].renders_images:
        conversations["image"] = _image_conversation(None)
        conversations["image_turns"] = IMAGE_TURNS
    elif placeholder:
        conversations["image"] = _image_conversation(placeholder)
    return conversations


def _comparison_cases() -> list[Any]:
    cases = []
    for name in sorted(FAMILIES):
        for conversation in _conversations_for(name):
            for extra in _extras_for(FAMILIES[name]):
                cases.append(
                    pytest.param(name, conversation, extra, id=f"{name}-{conversation}-{extra}")
                )
    return cases


def _render_both(
    family: ModelFamily, messages: list[dict[str, Any]], **kwargs: Any
) -> tuple[str | Exception, str | Exception]:
    before = copy.deepcopy(messages)
    try:
        ours: str | Exception = _our_template(family.name).render(messages, **kwargs)
    except TemplateError as e:
        ours = e
    assert messages == before, "render must not modify its input"
    nulls = [m.get("role") == "assistant" and m.get("content") is None for m in messages]
    # A tool-calling turn's null content reaches the template as an empty string (as vLLM
    # passes it) for a family that says so, and where the template cannot render null.
    emptied = [{**m, "content": ""} if n else m for m, n in zip(messages, nulls, strict=True)]
    first = emptied if family.null_content == "empty" else messages
    try:
        ref: str | Exception = reference_render(family, first, **kwargs)
    except (RefError, TypeError, RecursionError, jinja2.TemplateError) as e:
        ref = e
    if isinstance(ref, Exception) and any(nulls) and first is messages:
        try:
            ref = reference_render(family, emptied, **kwargs)
        except (RefError, TypeError, RecursionError, jinja2.TemplateError) as e:
            ref = e
    return ours, ref


@pytest.mark.parametrize(("family_name", "conversation", "extra"), _comparison_cases())
def test_matches_hf_reference(family_name: str, conversation: str, extra: str) -> None:
    """Byte-for-byte the reference's output, or a TemplateError where the reference fails
    (with the same message when the template calls raise_exception); a null assistant
    content is compared as an empty string where the family or the template needs it."""
    family = FAMILIES[family_name]
    messages = _conversations_for(family_name)[conversation]
    mismatches: list[str] = []
    for toolset in sorted(TOOLSETS):
        for add_generation_prompt in (True, False):
            ours, ref = _render_both(
                family,
                messages,
                add_generation_prompt=add_generation_prompt,
                tools=TOOLSETS[toolset],
                **EXTRAS[extra],
            )
            case = f"{toolset}, add_generation_prompt={add_generation_prompt}"
            if isinstance(ref, Exception):
                ok = isinstance(ours, TemplateError) and (
                    not isinstance(ref, RefError) or str(ours) == str(ref)
                )
            else:
                ok = ours == ref
            if not ok:
                mismatches.append(f"{case}:\n  ours: {ours!r}\n  ref:  {ref!r}")
    assert not mismatches, "\n".join(mismatches)


def test_known_families_present() -> None:
    assert {"llama3", "qwen2.5", "chatml", "deepseek-v3"} <= set(FAMILIES)
    llama = FAMILIES["llama3"]
    assert llama.tokenizer == "llama3"
    assert llama.bos_token == "<|begin_of_text|>"
    assert "strftime_now" in llama.template
    assert {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"} <= set(llama.stop_tokens)
    assert FAMILIES["qwen2.5"].tokenizer == "qwen2"
    assert FAMILIES["chatml"].tokenizer == "qwen2"
    assert FAMILIES["deepseek-v3"].tokenizer == "deepseek-v3"
    for family in FAMILIES.values():
        assert family.source and family.license
        assert all(m == m.lower() for m in family.match)


def test_expected_prompt_llama3() -> None:
    text = ChatTemplate(FAMILIES["llama3"]).render(
        SYSTEM_USER[:1] + USER_ONLY, date_string="01 Jan 2025"
    )
    assert text == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        "Cutting Knowledge Date: December 2023\nToday Date: 01 Jan 2025\n\n"
        "You are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
        "What is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def test_strftime_now_uses_clock() -> None:
    text = ChatTemplate(FAMILIES["llama3"], clock=lambda: datetime(2031, 12, 24)).render(USER_ONLY)
    assert "Today Date: 24 Dec 2031\n" in text


def test_expected_prompt_qwen25_default_system() -> None:
    text = ChatTemplate(FAMILIES["qwen2.5"]).render(USER_ONLY)
    assert text == (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
        "<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_chatml_without_generation_prompt() -> None:
    text = ChatTemplate(FAMILIES["chatml"]).render(USER_ONLY, add_generation_prompt=False)
    assert text == "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"


def test_raise_exception_becomes_template_error() -> None:
    two_calls: list[dict[str, Any]] = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [_call("a", "{}"), _call("b", "{}")]},
    ]
    with pytest.raises(TemplateError, match="only supports single tool-calls"):
        ChatTemplate(FAMILIES["llama3"]).render(two_calls)


def test_template_errors_are_client_safe() -> None:
    with pytest.raises(TemplateError) as info:
        ChatTemplate(FAMILIES["chatml"]).render([{"role": "user", "content": None}])
    message = str(info.value)
    assert "Traceback" not in message and "/" not in message and "\n" not in message


def test_invalid_template_source() -> None:
    family = FAMILIES["chatml"]
    bad = ModelFamily(
        **{**{f: getattr(family, f) for f in family.__slots__}, "template": "{% if %}"}
    )
    with pytest.raises(TemplateError, match="invalid"):
        ChatTemplate(bad)


def test_tojson_filter_like_hf() -> None:
    family = ModelFamily(
        name="t",
        template="{{ x|tojson }}|{{ x|tojson(indent=2) }}|{{ x|tojson(sort_keys=true) }}",
        tokenizer="qwen2",
        bos_token=None,
        eos_token=None,
        stop_tokens=(),
        match=(),
        source="test",
        license="Apache-2.0",
    )
    x = {"b": "ü<&>", "a": [1, 2.5, None, True]}
    assert ChatTemplate(family).render([], x=x) == (
        f"{json.dumps(x, ensure_ascii=False)}|{json.dumps(x, ensure_ascii=False, indent=2)}"
        f"|{json.dumps(x, ensure_ascii=False, sort_keys=True)}"
    )


def test_python_methods_and_loop_controls() -> None:
    family = ModelFamily(
        name="t",
        template=(
            "{% for m in messages %}{% if loop.index0 == 1 %}{% continue %}{% endif %}"
            "{{ m.content.strip().upper() }}|{{ m.content.split(',')|length }}"
            "|{{ m.content.startswith('  a') }}{% if loop.index0 == 2 %}{% break %}{% endif %};"
            "{% endfor %}{% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}"
        ),
        tokenizer="qwen2",
        bos_token=None,
        eos_token=None,
        stop_tokens=(),
        match=(),
        source="test",
        license="Apache-2.0",
    )
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": c} for c in ["  a,b ", "x", " c ", "d"]
    ]
    out = ChatTemplate(family).render(msgs, d={"p": 1, "q": None})
    assert out == "A,B|2|True;C|1|Falsep=1 q=None "
    assert out == reference_render(
        family, msgs, add_generation_prompt=True, tools=None, d={"p": 1, "q": None}
    )


def test_normalize_messages() -> None:
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": None, "tool_calls": [_call("f", '{"k": [1]}')]},
        {"role": "assistant", "content": "x", "tool_calls": []},
    ]
    out = normalize_messages(msgs, "object")
    assert out[0]["content"] == "ab"
    assert out[1]["content"] is None
    assert out[1]["tool_calls"][0]["function"]["arguments"] == {"k": [1]}  # type: ignore[index]
    assert "tool_calls" not in out[2]
    assert msgs[1]["tool_calls"][0]["function"]["arguments"] == '{"k": [1]}'  # not modified
    back = normalize_messages(out, "string")
    assert back[1]["tool_calls"][0]["function"]["arguments"] == '{"k": [1]}'  # type: ignore[index]
    assert normalize_messages(msgs)[1]["tool_calls"] == msgs[1]["tool_calls"]
    with pytest.raises(TemplateError, match="image_url"):
        normalize_messages([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}])


def test_family_for_model() -> None:
    assert family_for_model("meta-llama/Llama-3.1-8B-Instruct", FAMILIES).name == "llama3"
    assert family_for_model("meta-llama/Llama-3.2-1B-Instruct", FAMILIES).name == "llama3"
    assert family_for_model("Qwen/Qwen2.5-0.5B-Instruct", FAMILIES).name == "qwen2.5"
    assert family_for_model("deepseek-ai/DeepSeek-V3-0324", FAMILIES).name == "deepseek-v3"
    assert family_for_model("my-model", FAMILIES, default="chatml").name == "chatml"
    with pytest.raises(UnknownFamily):
        family_for_model("my-model", FAMILIES)
    with pytest.raises(UnknownFamily):
        family_for_model("my-model", FAMILIES, default="nope")


def test_family_for_model_prefers_longest_match() -> None:
    base = FAMILIES["chatml"]
    fields = {f: getattr(base, f) for f in base.__slots__}
    short = ModelFamily(**{**fields, "name": "short", "match": ("qwen",)})
    long = ModelFamily(**{**fields, "name": "long", "match": ("qwen2.5-coder",)})
    fams = {"short": short, "long": long}
    assert family_for_model("Qwen2.5-Coder-7B", fams).name == "long"
    assert family_for_model("Qwen2-7B", fams).name == "short"


def test_default_path_and_bad_files(tmp_path: Path) -> None:
    assert DEFAULT_TEMPLATES_PATH.is_file()
    assert load_families(DEFAULT_TEMPLATES_PATH) == FAMILIES
    bad = tmp_path / "t.json"
    bad.write_text('{"families": {"x": {"template": 1}}}', encoding="utf-8")
    with pytest.raises(FamilyConfigError):
        load_families(bad)
    bad.write_text("not json", encoding="utf-8")
    with pytest.raises(FamilyConfigError):
        load_families(bad)


@pytest.mark.parametrize(
    ("source", "context", "expected"),
    [
        ("{% for x in xs %}{{ x }}{% endfor %}", {"xs": [1, 2]}, "12"),
        ("{% for x in xs %}{{ x }}{% endfor %}", {}, ""),  # undefined: empty, as in jinja2
        ("{% for x in xs if x > 1 %}{{ x }}{% endfor %}", {"xs": [1, 2, 3]}, "23"),
        ("{%- for k, v in d.items() -%}{{ k }}={{ v }};{%- endfor %}", {"d": {"a": 1}}, "a=1;"),
        ("{% for x in ['a in b', 'c'] %}{{ x }}|{% endfor %}", {}, "a in b|c|"),
        (
            "{{ xs is iterable }} {{ none is iterable }} {{ 'ab' is iterable }}",
            {"xs": []},
            "True False True",
        ),
    ],
)
def test_loops_and_iterable_follow_jinja2(
    source: str, context: dict[str, Any], expected: str
) -> None:
    family = dataclasses.replace(FAMILIES["chatml"], template=source)
    assert ChatTemplate(family).render([], **context) == expected


def test_loop_over_none_raises_like_jinja2() -> None:
    family = dataclasses.replace(
        FAMILIES["chatml"], template="{% for x in xs %}{{ x }}{% endfor %}"
    )
    with pytest.raises(TemplateError, match="iterates over it") as info:
        ChatTemplate(family).render([], xs=None)
    assert info.value.param == "chat_template_kwargs.xs"
