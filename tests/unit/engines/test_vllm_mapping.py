"""The vLLM engine's rules without vLLM: a query as sampling and structured-output keywords,
and delta outputs (shaped as vLLM's ``RequestOutput``) as results."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from neutrino.engine.messages import FinishReason, Guided, GuidedMode, Sampling, TextQuery
from neutrino.engines.vllm.mapping import (
    prompt_ids,
    result_of,
    sampling_kwargs,
    structured_kwargs,
)


@dataclass
class Lp:
    logprob: float
    rank: int | None = None


@dataclass
class Completion:
    token_ids: list[int]
    logprobs: list[dict[int, Lp]] | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


@dataclass
class Output:
    outputs: list[Completion]
    finished: bool = False
    prompt_token_ids: list[int] | None = field(default_factory=lambda: [1, 2, 3])
    num_cached_tokens: int | None = 0


def query(**sampling: object) -> TextQuery:
    return TextQuery("m", [1, 2, 3], Sampling(max_tokens=8, **sampling))  # type: ignore[arg-type]


def test_sampling_asks_for_ids_only_and_maps_each_field() -> None:
    kw = sampling_kwargs(query(top_k=-1, seed=3, stop_token_ids=[7], min_tokens=2))
    assert kw["detokenize"] is False and kw["skip_special_tokens"] is False
    assert (kw["top_k"], kw["seed"], kw["stop_token_ids"], kw["min_tokens"]) == (0, 3, [7], 2)
    assert "logprobs" not in kw
    assert sampling_kwargs(query(logprobs=True, top_logprobs=4))["logprobs"] == 4
    assert sampling_kwargs(query(logprobs=True))["logprobs"] == 0  # the sampled token's only


@pytest.mark.parametrize(
    ("guided", "want"),
    [
        (None, None),
        (Guided(GuidedMode.JSON_OBJECT), {"json_object": True}),
        (Guided(GuidedMode.JSON_SCHEMA, json_schema="{}"), {"json": "{}"}),
        (Guided(GuidedMode.CHOICE, choices=["a", "b"]), {"choice": ["a", "b"]}),
        (Guided(GuidedMode.REGEX, pattern="[0-9]+"), {"regex": "[0-9]+"}),
        (Guided(GuidedMode.GRAMMAR, pattern='root ::= "x"'), {"grammar": 'root ::= "x"'}),
    ],
)  # fmt: skip
def test_each_guided_mode_is_a_structured_output(guided: Guided | None, want: object) -> None:
    q = query()
    q.guided = guided
    assert structured_kwargs(q) == want


def test_deltas_become_results_and_the_last_carries_the_counts() -> None:
    mid = result_of(Output([Completion([5, 6])]), 0, 0)
    assert mid.tokens == [5, 6] and mid.plain
    last = result_of(
        Output([Completion([7], finish_reason="stop", stop_reason=7)], True, [1, 2, 3, 4], 2),
        0,
        2,
    )
    assert last.finish_reason is FinishReason.STOP and last.stop_token_id == 7
    assert (last.prompt_tokens, last.cached_tokens, last.completion_tokens) == (4, 2, 3)
    cut = result_of(Output([Completion([], finish_reason="length")], True), 0, 8)
    assert cut.finish_reason is FinishReason.LENGTH and cut.completion_tokens == 8


def test_logprobs_are_the_tokens_own_and_alternatives_by_rank() -> None:
    per_token = [{9: Lp(-0.1, 1), 4: Lp(-2.0, 2), 3: Lp(-3.0, 3)}, {5: Lp(-1.5, 2), 8: Lp(-0.5, 1)}]
    out = result_of(Output([Completion([9, 5], per_token)]), 2, 0)
    assert list(out.logprobs) == [-0.1, -1.5]
    assert out.top_logprobs == 2
    assert list(out.top_token_ids) == [9, 4, 8, 5]
    assert list(out.top_token_logprobs) == [-0.1, -2.0, -0.5, -1.5]
    alone = result_of(Output([Completion([1], [{}])]), 0, 0)
    (own,) = alone.logprobs
    assert math.isinf(own)


def test_a_moved_answers_tokens_follow_the_prompt_and_count_as_its_own() -> None:
    moved = TextQuery("m", [1, 2, 3], Sampling(max_tokens=8, min_tokens=5), forced_tokens=[9, 9])
    assert prompt_ids(moved) == [1, 2, 3, 9, 9]
    kw = sampling_kwargs(moved)
    assert (kw["max_tokens"], kw["min_tokens"]) == (6, 3)  # two of each already made
    assert sampling_kwargs(TextQuery("m", [1], Sampling(max_tokens=8, min_tokens=1),
                                     forced_tokens=[4, 4]))["min_tokens"] == 0  # fmt: skip
    first = result_of(Output([Completion([5])], prompt_token_ids=[1, 2, 3, 9, 9]), 0, 0, 2)
    assert first.tokens == [5] and first.completion_tokens == 0  # counts only at the end
    last = Output([Completion([6], finish_reason="stop")], finished=True,
                  prompt_token_ids=[1, 2, 3, 9, 9], num_cached_tokens=5)  # fmt: skip
    done = result_of(last, 0, 1, 2)
    assert (done.prompt_tokens, done.completion_tokens, done.cached_tokens) == (3, 4, 3)
