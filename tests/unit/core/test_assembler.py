"""The answer assembler, driven by feeding it engine results: no event loop, no engine,
no clock; what it gives back is compared with the text the results encode."""

from __future__ import annotations

import json

import pytest

from neutrino.engine.messages import FinishReason, TextResult
from neutrino.pipeline.assembler import COMPLETE, NOTHING, PENDING, Assembler, Outcome
from neutrino.pipeline.logprobs import LogprobRecorder
from neutrino.pipeline.output import OutputParser
from neutrino.pipeline.text_stream import TextStream
from neutrino.text.parsers import ToolCallDelta
from neutrino.text.registry import load_tokenizer
from neutrino.text.tokenizer import Tokenizer

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return load_tokenizer("qwen2")


def _stream(tok: Tokenizer, stops: list[str] | None = None, raw: bool = False) -> TextStream:
    return TextStream(tok, stops or [], frozenset(), skip_special=not raw)


def _hermes(tok: Tokenizer) -> OutputParser:
    return OutputParser(
        reasoning="deepseek_r1",
        tools="hermes",
        offered_tools=[WEATHER],
        reasoning_format="parsed",
        starts_in_reasoning=False,
        id_prefix="call_t_",
        token_count=lambda s: len(tok.encode(s)),
    )


def _drain(asm: Assembler) -> tuple[str, int, str, list[ToolCallDelta]]:
    """Everything it has to give: text, its tokens, reasoning, tool-call deltas."""
    text, tokens, reasoning = "", 0, ""
    calls: list[ToolCallDelta] = []
    parts = asm.take_parts()
    if parts is not None:
        reasoning += parts[0]
        calls += parts[1]
    got = asm.take_text()
    if got is not None:
        text += got[0]
        tokens += got[1]
    return text, tokens, reasoning, calls


def _run(asm: Assembler, ids: list[int]) -> tuple[str, int, str, list[ToolCallDelta], Outcome]:
    """Feed ``ids`` one per result, the last one final, taking after each."""
    text, tokens, reasoning = "", 0, ""
    calls: list[ToolCallDelta] = []
    result: TextResult | None = None
    for i, token in enumerate(ids):
        if i < len(ids) - 1:
            asm.tokens([token])
        else:
            result = TextResult([token], FinishReason.STOP, completion_tokens=len(ids))
            asm.result(result)
        t, n, r, c = _drain(asm)
        text, tokens, reasoning, calls = text + t, tokens + n, reasoning + r, calls + c
        if asm.complete:
            break
    assert asm.complete
    finish, check = asm.finish(result)
    t, n, r, c = _drain(asm)
    assert check is None
    return (
        text + t,
        tokens + n,
        reasoning + r,
        calls + c,
        asm.outcome(result, finish, {"total": 1.0}),
    )


def test_plain_text_token_by_token(tok: Tokenizer) -> None:
    ids = tok.encode("Hello there, world.")
    text, tokens, reasoning, calls, out = _run(Assembler(_stream(tok), 7), ids)
    assert text == "Hello there, world."
    assert tokens == len(ids) and not reasoning and not calls
    assert out.finish_reason == "stop" and out.stop_reason is None
    assert (out.prompt_tokens, out.completion_tokens) == (7, len(ids))
    assert out.timings == {"total": 1.0}


def test_nothing_to_take_until_text_comes(tok: Tokenizer) -> None:
    asm = Assembler(_stream(tok), 1)
    assert asm.take_text() is None and asm.take_parts() is None
    assert asm.tokens([]) == NOTHING
    assert asm.tokens(tok.encode("a")) == PENDING
    assert asm.take_text() == ("a", 1, None)
    assert asm.take_text() is None


def test_a_stop_string_completes_the_text_mid_stream(tok: Tokenizer) -> None:
    asm = Assembler(_stream(tok, ["STOP"]), 3)
    steps = []
    for token in tok.encode("one two STOP three"):
        steps.append(asm.tokens([token]))
        if asm.complete:
            break
    assert asm.complete and steps[-1] == COMPLETE and COMPLETE not in steps[:-1]
    finish, check = asm.finish(None)
    assert (finish, check) == ("stop", None)
    got = asm.take_text()
    assert got is not None and got[0] == "one two "
    out = asm.outcome(None, finish, {})
    assert out.stop_reason == "STOP"
    assert out.engine_timings == {"queue": 0.0, "prefill": 0.0, "decode": 0.0}


def test_the_engine_final_result_sets_the_counts(tok: Tokenizer) -> None:
    asm = Assembler(_stream(tok), 4)
    ids = tok.encode("ok")
    final = TextResult(ids, FinishReason.LENGTH, prompt_tokens=9, cached_tokens=5)
    final.completion_tokens, final.prefill_ns = 12, 2_000_000_000
    asm.result(final)
    finish, _ = asm.finish(final)
    out = asm.outcome(final, finish, {})
    assert finish == "length"
    assert (out.prompt_tokens, out.cached_tokens, out.completion_tokens) == (9, 5, 12)
    assert asm.prompt_tokens == 9 and out.engine_timings["prefill"] == 2.0


def test_reasoning_and_a_tool_call_come_as_parts(tok: Tokenizer) -> None:
    call = json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})
    raw = f"<think>look it up</think><tool_call>\n{call}\n</tool_call>"
    ids = tok.encode(raw)
    text, _, reasoning, calls, out = _run(
        Assembler(_stream(tok, raw=True), 2, parser=_hermes(tok)), ids
    )
    assert text.strip() == ""
    assert reasoning == "look it up" == out.reasoning
    assert out.finish_reason == "tool_calls"
    assert [c.name for c in out.tool_calls] == ["get_weather"]
    assert json.loads(out.tool_calls[0].arguments) == {"city": "Paris"}
    args = "".join(d.arguments for d in calls)
    assert json.loads(args) == {"city": "Paris"}
    assert out.reasoning_tokens == len(tok.encode("look it up"))


@pytest.mark.parametrize("final", [FinishReason.STOP, FinishReason.LENGTH])
def test_a_strict_format_is_checked_only_when_the_model_finished(
    tok: Tokenizer, final: FinishReason
) -> None:
    seen: list[str] = []

    def validator(text: str) -> str | None:
        seen.append(text)
        return None if text.startswith("{") else "not JSON"

    asm = Assembler(_stream(tok), 1, validator=validator)
    result = TextResult(tok.encode("Sunny."), final)
    asm.result(result)
    finish, check = asm.finish(result)
    if final is FinishReason.LENGTH:
        assert (finish, check, seen) == ("length", None, [])
        return
    assert check is not None and check.text == "Sunny."
    assert check.run() == "not JSON" and seen == ["Sunny."]


def test_logprobs_kept_for_a_whole_answer_or_given_with_each_take(tok: Tokenizer) -> None:
    ids = tok.encode("a b")
    lps = [-0.5] * len(ids)
    for keep in (True, False):
        asm = Assembler(_stream(tok), 1, logprobs=LogprobRecorder(tok, 0), keep_logprobs=keep)
        result = TextResult(ids, FinishReason.STOP, logprobs=lps)
        asm.result(result)
        got = asm.take_text()
        assert got is not None and got[0] == "a b"
        out = asm.outcome(result, asm.finish(result)[0], {})
        if keep:
            assert got[2] == [] and out.logprobs is not None and len(out.logprobs) == len(ids)
        else:
            assert got[2] is not None and [e.logprob for e in got[2]] == lps
            assert out.logprobs is None


def test_drop_forgets_what_was_not_taken(tok: Tokenizer) -> None:
    asm = Assembler(_stream(tok), 1, parser=_hermes(tok))
    asm.tokens(tok.encode("<think>x</think>text"))
    asm.drop()
    assert asm.take_text() is None and asm.take_parts() is None
