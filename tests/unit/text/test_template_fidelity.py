"""Where minijinja and jinja2 differ, Neutrino's templates follow jinja2 (transformers' renderer).

The reference is ``reference_render`` (tests/unit/text/test_templates.py): jinja2 set up as
transformers' ``apply_chat_template`` sets it up. Two differences are closed at template load
(neutrino/text/template_source.py): string literals are decoded as jinja2 decodes them, and a
loop over none fails, as in jinja2. Where the reference fails on a none, Neutrino's error names
the request field that was none (the pipeline turns it into a 400 with that ``param``).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import jinja2
import pytest

from neutrino.text.template_fields import attribute_path, none_fields
from neutrino.text.template_source import decode_literal, prepare
from neutrino.text.templates import ChatTemplate, ModelFamily, TemplateError
from tests.unit.text.test_templates import FAMILIES, WEATHER_TOOL, reference_render


def _family(source: str) -> ModelFamily:
    return dataclasses.replace(FAMILIES["chatml"], template=source)


def _reference(family: ModelFamily, messages: list[dict[str, Any]], **kw: Any) -> str:
    tools = kw.pop("tools", None)
    return reference_render(family, messages, add_generation_prompt=True, tools=tools, **kw)


# ---------------------------------------------------------------- string literals

LITERALS = [
    '{{ "one \\\n two" }}',  # backslash-newline: a line continuation (Mistral Small 3.1)
    "{{ 'octal \\101\\0end' }}",
    '{{ "named \\N{BULLET} \\U0001F600 \\u00e9 \\x41" }}',
    '{{ "unknown escapes stay: \\d+ \\w \\q" }}',
    '{{ "quotes \\" and \\\' and tab\\t and bell\\a\\v\\f" }}',
    '{{ "escaped backslash then newline \\\\\n end" }}',
    "{{ '%}' ~ \"}}\" ~ '\\\n' }}",
    "{% set d = {'a': {'b': 'c\\\nd'}} %}{{ d.a.b }}",
    '{% raw %}{{ "kept \\\n as written" }}{% endraw %}',
    '{# a comment "\\\n" #}after',
    '{% if "x\\\ny" == "xy" %}joined{% else %}kept{% endif %}',
    "{{ messages[0]['content'] ~ '\\\\n' ~ \"\\n\" }}",
]


@pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning")
@pytest.mark.parametrize("source", LITERALS)
def test_string_literals_decode_as_in_jinja2(source: str) -> None:
    """jinja2's lexer decodes literals with Python's unicode-escape codec (jinja2/lexer.py,
    TOKEN_STRING); minijinja alone knows fewer escapes."""
    family = _family(source)
    messages = [{"role": "user", "content": "hi"}]
    assert ChatTemplate(family).render(messages) == _reference(family, messages)


def test_bad_escape_is_refused_at_load_as_in_jinja2() -> None:
    family = _family('{{ "\\x4" }}')
    with pytest.raises(jinja2.TemplateSyntaxError):
        _reference(family, [])
    with pytest.raises(TemplateError, match="invalid"):
        ChatTemplate(family)


def test_decode_literal() -> None:
    assert decode_literal("a\\\nb") == "ab"
    assert decode_literal("\\101\\d") == "A\\d"
    assert decode_literal("no escapes") == "no escapes"


def test_prepared_source_keeps_only_shared_escapes() -> None:
    prepared = prepare('{{ "a\\\nb\\101" }}{% for x in y.z %}{% endfor %}')
    assert prepared.source.startswith('{{ "abA" }}')
    assert prepared.loops == ("y.z",)


@pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning")
def test_a_lone_surrogate_literal_loads_and_renders_where_it_is_not_evaluated() -> None:
    """jinja2 loads such a template; minijinja alone refuses it at load (bad string escape)."""
    family = _family("{% if messages[0].content == 'x' %}{{ 'bad \\ud83d' }}{% endif %}ok")
    messages = [_user("hi")]
    assert ChatTemplate(family).render(messages) == _reference(family, messages) == "ok"


@pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning")
def test_a_lone_surrogate_literal_evaluated_is_a_render_error() -> None:
    """Where jinja2 evaluates it, its prompt holds a surrogate, which has no UTF-8 form (no
    tokenizer can take it); Neutrino's template raises, naming the literal."""
    family = _family("{{ 'bad \\ud83d' ~ messages[0].content }}")
    messages = [_user("hi")]
    with pytest.raises(UnicodeEncodeError):
        _reference(family, messages).encode()
    message = "string literal 'bad \\ud83d' holds a lone surrogate (U+D83D)"
    with pytest.raises(TemplateError, match=re.escape(message)):
        ChatTemplate(family).render(messages)


@pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning")
def test_a_surrogate_pair_literal_is_the_character_it_encodes() -> None:
    family = _family("{{ '\\ud83d\\ude00 \\\n' ~ messages[0].content }}")
    messages = [_user("hi")]
    reference = _reference(family, messages)  # the pair as two surrogates
    assert ChatTemplate(family).render(messages) == "\U0001f600 hi"
    assert reference.encode("utf-16", "surrogatepass").decode("utf-16") == "\U0001f600 hi"


# ---------------------------------------------------------------- loops over none


def _user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


TOOL_WITHOUT_PROPERTIES = {
    "type": "function",
    "function": {
        "name": "f",
        "description": "F.",
        "parameters": {"type": "object", "properties": None},
    },
}
KIMI_CALL = {
    "id": "functions.get_weather:0",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
}

# (family, messages, render arguments, the field named), each a published template that
# iterates what the reference then fails on.
NONE_FIELDS = [
    # Llama 4 (meta-llama/Llama-4-Scout-17B-16E-Instruct): a content that is not a string
    # is iterated as parts.
    ("llama4", [_user("hi"), {"role": "assistant", "content": "yes"}, _user(None)], {}, "2"),
    # Kimi K2 (moonshotai/Kimi-K2-Instruct): the same, for a tool result.
    (
        "kimi-k2",
        [
            _user("weather?"),
            {"role": "assistant", "content": "", "tool_calls": [KIMI_CALL]},
            {"role": "tool", "tool_call_id": KIMI_CALL["id"], "content": None},
        ],
        {},
        "2",
    ),
    # Hermes 3's tool_use template (NousResearch/Hermes-3-Llama-3.1-8B) loops over tools.
    ("hermes3", [_user("hi")], {}, "tools"),
    ("hermes3", [_user("hi")], {"tools": [TOOL_WITHOUT_PROPERTIES]}, "properties"),
]


@pytest.mark.parametrize(("name", "messages", "kwargs", "field"), NONE_FIELDS)
def test_a_none_the_template_iterates_is_a_named_error(
    name: str, messages: list[dict[str, Any]], kwargs: dict[str, Any], field: str
) -> None:
    family = FAMILIES[name]
    with pytest.raises(TypeError):  # 'NoneType' object is not iterable, or None|items
        _reference(family, messages, **kwargs)
    with pytest.raises(TemplateError, match="its chat template iterates over it") as info:
        ChatTemplate(family).render(messages, **kwargs)
    expected = {
        "2": "messages[2].content",
        "tools": "tools",
        "properties": "tools[0].function.parameters.properties",
    }[field]
    assert info.value.param == expected
    assert str(info.value).startswith(expected)


def test_the_none_the_template_reaches_is_named_not_the_first_one() -> None:
    """Two none contents; the template iterates only the user's: that one is named."""
    family = _family(
        "{% for m in messages %}{% if m.role == 'user' %}"
        "{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}{% endfor %}"
    )
    messages = [{"role": "system", "content": None}, _user("a"), _user(None), _user(None)]
    with pytest.raises(TypeError):
        _reference(family, messages)
    with pytest.raises(TemplateError) as info:
        ChatTemplate(family).render(messages)
    assert info.value.param == "messages[2].content"


def test_a_template_variable_is_named_as_a_chat_template_kwarg() -> None:
    family = _family("{% for d in documents %}{{ d.text }}{% endfor %}")
    with pytest.raises(TypeError):
        _reference(family, [], documents=None)
    with pytest.raises(TemplateError) as info:
        ChatTemplate(family).render([], documents=None)
    assert info.value.param == "chat_template_kwargs.documents"
    assert ChatTemplate(family).render([]) == _reference(family, [])  # undefined: no loop


def test_a_template_own_variable_is_not_named() -> None:
    family = _family("{% set parts = none %}{% for p in parts %}{{ p }}{% endfor %}")
    with pytest.raises(TypeError):
        _reference(family, [])
    with pytest.raises(TemplateError, match="cannot iterate over parts") as info:
        ChatTemplate(family).render([])
    assert info.value.param is None


def test_weather_tool_is_rendered_where_the_reference_renders_it() -> None:
    """The guards change nothing where nothing is none (Llama 4 with a tool round)."""
    family = FAMILIES["llama4"]
    messages = [_user("weather?")]
    ours = ChatTemplate(family).render(messages, tools=[WEATHER_TOOL])
    assert ours == _reference(family, messages, tools=[WEATHER_TOOL])


@pytest.mark.parametrize(
    ("expression", "parsed"),
    [
        ("message['content']", ("message", ("content",))),
        ('m.tool_calls[0]["function"]', ("m", ("tool_calls", 0, "function"))),
        ("tools", ("tools", ())),
        ("messages[::-1]", None),
        ("x|reverse", None),
    ],
)
def test_attribute_path(expression: str, parsed: Any) -> None:
    assert attribute_path(expression) == parsed


def test_none_fields_in_order() -> None:
    context = {
        "messages": [{"content": None}, {"content": "x"}, {"content": None}],
        "tools": None,
    }
    assert none_fields("message.content", context) == [
        ("messages", 0, "content"),
        ("messages", 2, "content"),
    ]
    assert none_fields("tools", context) == [("tools",)]
    assert none_fields("message.missing", context) == []


# ---------------------------------------------------------------- loops as jinja2 reads them

# A loop's text where jinja2 sees no loop: raw blocks, comments, string literals (also once
# decoded). Rendered with ``xs`` none: a guard here would change the output or fail.
NOT_LOOPS = [
    "{% raw %}{% for x in xs %}{{ x }}{% endfor %}{% endraw %}",
    "{%- raw -%} {%+ for x in xs -%} {%- endraw %}",
    "{{ '{% for a in b %}' }}",
    "{{ \"{%- for a in xs -%}\" ~ '}}' }}",
    "{{ '\\x7b% for a in b %\\x7d' }}",
    "{# {% for x in xs %} #}after",
    "{% set s = '{% for x in xs %}' %}{{ s }}",
]


@pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning")
@pytest.mark.parametrize("source", NOT_LOOPS)
def test_a_loop_in_raw_text_comments_or_literals_is_left_as_written(source: str) -> None:
    family = _family(source)
    assert prepare(source).loops == ()
    assert ChatTemplate(family).render([], xs=None) == _reference(family, [], xs=None)


def test_a_loop_over_a_literal_holding_a_tag_end() -> None:
    family = _family("{% for x in ['%}', '}}', \"{%\"] %}{{ x }}|{% endfor %}")
    assert prepare(family.template).loops == ("['%}', '}}', \"{%\"]",)
    assert ChatTemplate(family).render([]) == _reference(family, []) == "%}|}}|{%|"


# Loops jinja2 reads: any whitespace control, any whitespace around ``in``, no whitespace
# where a bracket ends a name, with the loop's filter and ``recursive``.
GUARDED = [
    "{%+ for x in xs %}{{ x }}{% endfor %}",
    "{%- for x in xs +%}{{ x }}{% endfor %}",
    "{%+ for x in xs -%}\n{{ x }}{% endfor %}",
    "{% for x\nin xs %}{{ x }}{% endfor %}",
    "{% for x in\n\txs\n%}{{ x }}{% endfor %}",
    "{%for(x)in\txs%}{{ x }}{%endfor%}",
    "{% for x in xs if x > 1 recursive %}{{ x }}{% endfor %}",
    "{% for x in xs if x != '%}' %}{{ x }}{% endfor %}",
]


@pytest.mark.parametrize("source", GUARDED)
def test_every_loop_jinja2_reads_is_guarded(source: str) -> None:
    family = _family(source)
    assert len(prepare(source).loops) == 1
    assert ChatTemplate(family).render([], xs=[1, 2]) == _reference(family, [], xs=[1, 2])
    with pytest.raises(TypeError):
        _reference(family, [], xs=None)
    with pytest.raises(TemplateError) as info:
        ChatTemplate(family).render([], xs=None)
    assert info.value.param == "chat_template_kwargs.xs"
