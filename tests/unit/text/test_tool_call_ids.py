"""Tool-call ids for Mistral's families (``tool_call_ids: alnum9``): the ids Neutrino gives
its calls, and the ids of a client's conversation mapped so that the templates accept them."""

from __future__ import annotations

import copy
import json
import re
import string
from pathlib import Path
from typing import Any, cast

import pytest

from neutrino.pipeline.output import OutputParser
from neutrino.text.families import FamilyConfigError, load_families
from neutrino.text.templates import ChatTemplate, normalize_messages
from neutrino.text.tool_call_ids import alnum9_ids, fit_alnum9, fits_alnum9
from tests.unit.parsers.support import Case, run
from tests.unit.text.test_templates import FROZEN, RefError, _reference_env

FAMILIES = load_families()
MISTRAL = ("mistral-v3", "mistral-nemo", "mistral-v7")
ALNUM9 = re.compile(r"[A-Za-z0-9]{9}")
OPENAI_ID = "call_" + "Zq3kA9xYb2LmN8pQr4sT7uVw"  # OpenAI's form: call_ and 24 letters/digits
NEUTRINO_OLD_ID = "call_9f86d081884c7d659a2feaa0_0"  # Neutrino's ids before this change
REQUEST_ID = "chatcmpl-9f86d081884c7d65000000a1"


def _call(call_id: Any, name: str = "get_weather") -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": '{"city": "Oslo"}'},
    }


def _round(*ids: Any) -> list[dict[str, Any]]:
    """A user turn, an assistant turn calling a tool per id, and a tool turn answering each."""
    return [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": None, "tool_calls": [_call(i) for i in ids]},
        *({"role": "tool", "tool_call_id": i, "content": f"r{k}"} for k, i in enumerate(ids)),
    ]


def _ids(messages: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """(the calls' ids, the tool turns' ids)."""
    calls = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    answers = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    return calls, answers


# ------------------------------------------------------------------ family setting


def test_mistral_families_say_alnum9_and_others_do_not() -> None:
    for name, family in FAMILIES.items():
        assert family.tool_call_ids == ("alnum9" if name in MISTRAL else "as_is"), name
        if "Tool call IDs should be alphanumeric" in family.template:
            assert name in MISTRAL


def test_bad_tool_call_ids_value_is_refused(tmp_path: Path) -> None:
    entry = {"template": "x", "tokenizer": "qwen2", "source": "s", "license": "l"}
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps({"families": {"x": {**entry, "tool_call_ids": "alnum8"}}}))
    with pytest.raises(FamilyConfigError, match="tool_call_ids"):
        load_families(bad)
    bad.write_text(json.dumps({"families": {"x": entry}}))
    assert load_families(bad)["x"].tool_call_ids == "as_is"


# ------------------------------------------------------------------ output ids


def test_output_ids_are_9_alphanumerics_unique_and_deterministic() -> None:
    ids = alnum9_ids(REQUEST_ID)
    first = [ids(i) for i in range(5000)]
    assert all(ALNUM9.fullmatch(i) for i in first)
    assert len(set(first)) == len(first)
    assert first == [alnum9_ids(REQUEST_ID)(i) for i in range(5000)]
    # other requests (ids as the HTTP front end makes them): other ids
    starts = {alnum9_ids(f"chatcmpl-9f86d081884c7d65{n:08x}")(0) for n in range(20000)}
    assert len(starts) == 20000
    assert set(string.ascii_letters + string.digits) == {c for i in starts for c in i}


def test_mistral_output_ids_stream_as_they_parse_whole() -> None:
    """Every split of a two-call output gives the same calls and ids as the whole text."""
    text = (
        'Let me check.[TOOL_CALLS]get_weather[ARGS]{"city": "Zürich"}'
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Bern"}'
    )
    case = Case("alnum9", "tool", "mistral", text, "", kwargs={"id_prefix": alnum9_ids("r-1")})
    whole = run(case, [text])
    assert [c[0] for c in whole.final_calls] == [alnum9_ids("r-1")(0), alnum9_ids("r-1")(1)]
    assert all(ALNUM9.fullmatch(c[0]) for c in whole.final_calls)
    assert whole.calls == whole.final_calls
    for i in range(len(text) + 1):
        parts = run(case, [text[:i], text[i:]])
        assert (parts.calls, parts.final_calls) == (whole.calls, whole.final_calls)
    assert run(case, list(text)).calls == whole.calls


def test_output_parser_ids_streamed_and_whole() -> None:
    """The pipeline's parser (reasoning + tools) with an id function, chunk by chunk."""
    text = '[TOOL_CALLS][{"name": "lookup", "arguments": {"q": "z"}}, {"name": "lookup"}]'

    def parser() -> OutputParser:
        return OutputParser(
            reasoning=None,
            tools="mistral",
            offered_tools=None,
            reasoning_format="parsed",
            starts_in_reasoning=False,
            id_prefix=alnum9_ids(REQUEST_ID),
            token_count=len,
        )

    whole = parser()
    whole.feed(text)
    whole.finish()
    want = [alnum9_ids(REQUEST_ID)(0), alnum9_ids(REQUEST_ID)(1)]
    assert [c.id for c in whole.calls] == want
    streamed = parser()
    deltas = [streamed.feed(ch) for ch in text] + [streamed.finish()]
    assert [d.id for delta in deltas for d in delta.tool_calls if d.id] == want
    # a prefix string still gives the ids other families have always had
    plain = OutputParser(
        reasoning=None,
        tools="mistral",
        offered_tools=None,
        reasoning_format="parsed",
        starts_in_reasoning=False,
        id_prefix="call_abc_",
        token_count=len,
    )
    plain.feed(text)
    plain.finish()
    assert [c.id for c in plain.calls] == ["call_abc_0", "call_abc_1"]


# ------------------------------------------------------------------ input mapping


def test_fitting_ids_stay_and_nothing_is_copied() -> None:
    messages = _round("abcDEF123", "XYZ000999")
    out = fit_alnum9(messages)
    assert out is messages
    normalized = normalize_messages(messages, "object", tool_call_ids="alnum9")
    assert _ids(normalized) == (["abcDEF123", "XYZ000999"], ["abcDEF123", "XYZ000999"])


def test_openai_ids_keep_their_last_9_characters() -> None:
    messages = _round(OPENAI_ID)
    before = copy.deepcopy(messages)
    out = fit_alnum9(messages)
    assert _ids(out) == ([OPENAI_ID[-9:]], [OPENAI_ID[-9:]])
    assert messages == before  # the caller's messages, calls and ids are untouched
    out_calls = cast(list[Any], out[1]["tool_calls"])
    assert out[1] is not messages[1] and out_calls[0] is not messages[1]["tool_calls"][0]
    assert out[0] is messages[0]  # unchanged messages are not copied


@pytest.mark.parametrize(
    "old",
    [
        NEUTRINO_OLD_ID,  # its last 9 hold an underscore
        "call_1",  # too short
        "1",
        "",
        "toolu_01-2_3.4:5/6\"'7",  # punctuation, a quote
        "\uff43\uff41\uff4c\uff4c\uff11\uff12\uff13\uff14\uff15",  # fullwidth: not ASCII
        "abcdéf123",
        "a\ud800b",  # a lone surrogate, as JSON allows
    ],
)
def test_other_ids_get_a_fitting_value_consistently(old: str) -> None:
    messages = _round(old)
    before = copy.deepcopy(messages)
    calls, answers = _ids(fit_alnum9(messages))
    assert calls == answers and ALNUM9.fullmatch(calls[0]) and calls[0] != old
    assert messages == before
    assert _ids(fit_alnum9(_round(old))) == (calls, answers)  # the same in every request


def test_different_ids_stay_different() -> None:
    same_tail = ["x_call_123456789", "y_call_123456789", "123456789"]  # the last 9 collide
    ids = ["call_1", "call_2", "call_10", *same_tail, "abcDEF123"]
    calls, answers = _ids(fit_alnum9(_round(*ids)))
    assert calls == answers
    assert len(set(calls)) == len(ids)
    assert all(ALNUM9.fullmatch(i) for i in calls)
    mapped = dict(zip(ids, calls, strict=True))
    assert mapped["123456789"] == "123456789" and mapped["abcDEF123"] == "abcDEF123"
    # the fitting "123456789" keeps its value even where it comes after the others
    assert mapped["x_call_123456789"] != "123456789" != mapped["y_call_123456789"]


def test_first_come_keeps_the_tail() -> None:
    calls, _ = _ids(fit_alnum9(_round("a_" + OPENAI_ID, "b_" + OPENAI_ID)))
    assert calls[0] == OPENAI_ID[-9:] and calls[1] != calls[0] and ALNUM9.fullmatch(calls[1])


def test_mapping_is_stable_as_the_conversation_grows() -> None:
    """A later turn does not change the ids of earlier ones (so a prompt's prefix stays)."""
    first = _round(NEUTRINO_OLD_ID, "call_1")
    later = [
        *first,
        {"role": "assistant", "content": "ok"},
        *_round("call_2", OPENAI_ID),
    ]
    assert fit_alnum9(later)[: len(first)] == fit_alnum9(first)


def test_a_tool_turn_answering_an_unknown_call_and_odd_shapes() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [_call(7), {"no": "id"}, "junk"]},
        {"role": "tool", "tool_call_id": "call_99", "content": "r"},
        {"role": "tool", "content": "no id"},
    ]
    out = fit_alnum9(messages)
    assert out[1] is messages[1]  # ids that are not strings are left to the template
    assert ALNUM9.fullmatch(cast(str, out[2]["tool_call_id"])) and "tool_call_id" not in out[3]


def test_default_normalization_keeps_ids() -> None:
    messages = _round(OPENAI_ID)
    assert _ids(normalize_messages(messages, "object")) == ([OPENAI_ID], [OPENAI_ID])
    assert fits_alnum9("abcDEF123") and not fits_alnum9("abcDEF12") and not fits_alnum9(None)


# ------------------------------------------------------------------ the templates


def _published(name: str, messages: list[dict[str, Any]]) -> str:
    """The published template rendered by jinja2 as transformers sets it up, on messages
    normalised without the id mapping."""
    family = FAMILIES[name]
    template = _reference_env(lambda: FROZEN).from_string(family.template)
    return template.render(
        messages=normalize_messages(messages, family.tool_call_arguments),
        tools=None,
        add_generation_prompt=True,
        bos_token=family.bos_token,
        eos_token=family.eos_token,
    )


@pytest.mark.parametrize("name", MISTRAL)
@pytest.mark.parametrize("old", [NEUTRINO_OLD_ID, "call_1", OPENAI_ID])
def test_mistral_templates_refuse_ids_the_server_maps(name: str, old: str) -> None:
    """The published templates refuse these ids (v7 takes those of 9 or more and shows
    their last 9); the server renders the conversation with mapped ids, and each pair shows
    one id."""
    messages = _round(old)
    if name == "mistral-v7" and len(old) >= 9:
        published: str | None = _published(name, messages)
    else:
        published = None
        with pytest.raises(RefError, match="Tool call IDs"):
            _published(name, messages)
    text = ChatTemplate(FAMILIES[name], clock=lambda: FROZEN).render(messages)
    (mapped,), _ = _ids(fit_alnum9(messages))
    assert text.count(f'"id": "{mapped}"') == 1 and text.count(f'"call_id": "{mapped}"') == 1
    assert old not in text
    if published is not None and ALNUM9.fullmatch(old[-9:]):
        assert text == published  # v7 with OpenAI ids: exactly what the template shows itself
    # the mapped conversation is one the published template renders, to the same text
    assert text == _published(name, fit_alnum9(messages))
