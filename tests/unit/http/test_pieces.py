"""A large non-streamed answer rendered in pieces has the bytes of the answer rendered
whole (pieces.py), for chat and completions, with odd token texts and short alternatives;
and the logprobs kept as arrays give back the entries they were given."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from neutrino.engine.messages import TextResult
from neutrino.frontends.http.openai.render import (
    chat_answer,
    chat_response,
    completion_answer,
    completion_response,
)
from neutrino.pipeline.assembler import Outcome
from neutrino.pipeline.logprobs import WHOLE_FIGURES, LogprobColumns, LogprobRecorder

TEXTS = ["a", "é", '"', "\\", "\n", "𪚥", " the", "<|x|>", "\u2028"]


class _Bytes:
    """A vocabulary of odd texts (quotes, escapes, four-byte characters, broken UTF-8)."""

    def token_bytes(self, token_id: int) -> bytes:
        if token_id % 13 == 12:
            return b"\xe2\x82"  # half a character
        return TEXTS[token_id % len(TEXTS)].encode()


def _columns(rng: random.Random, tokens: int, k: int) -> tuple[LogprobColumns, LogprobRecorder]:
    rec = LogprobRecorder(_Bytes(), k)  # type: ignore[arg-type]
    cols = LogprobColumns(rec)
    done = 0
    while done < tokens:
        n = min(tokens - done, rng.randint(1, 9))
        ids = [rng.randrange(1000) for _ in range(n)]
        got = k if rng.random() < 0.9 else max(0, k - 1)  # now and then fewer alternatives
        result = TextResult(
            ids,
            logprobs=[rng.uniform(-30, 0) for _ in ids],
            top_logprobs=got,
            top_token_ids=[rng.randrange(1000) for _ in range(n * got)],
            top_token_logprobs=[
                rng.choice([-1e-9, -0.5, -123.456789, 0.0]) for _ in range(n * got)
            ],
        )
        cols.add(result, n)
        done += n
    return cols, rec


def _answer(columns: list[LogprobColumns]) -> tuple[Any, list[tuple[str, Outcome]]]:
    gens = [
        SimpleNamespace(request_id="chatcmpl-1", created=7, model="m", echo="") for _ in columns
    ]
    results = [
        ("some text", Outcome("length", 5, len(c), logprobs=c, timings={"queue": 0.5}))
        for c in columns
    ]
    return gens, results


@pytest.mark.parametrize(("choices", "tokens", "k"), [(1, 500, 20), (3, 1000, 5), (2, 3000, 0)])
def test_pieces_are_the_whole_answers_bytes(choices: int, tokens: int, k: int) -> None:
    rng = random.Random(choices * tokens + k)
    columns = [_columns(rng, tokens, k)[0] for _ in range(choices)]
    assert sum(len(c) * (1 + k) for c in columns) > WHOLE_FIGURES
    gens, results = _answer(columns)
    for answer, whole in (
        (chat_answer, chat_response),
        (completion_answer, completion_response),
    ):
        got = answer(gens, results, "reasoning_content")
        assert not isinstance(got, bytes)  # large: in pieces
        pieces = list(got)
        assert len(pieces) > tokens // 64
        assert b"".join(pieces) == orjson.dumps(whole(gens, results))


def test_a_small_answer_is_rendered_whole() -> None:
    columns = [_columns(random.Random(1), 10, 2)[0]]
    gens, results = _answer(columns)
    assert chat_answer(gens, results, "reasoning_content") == orjson.dumps(
        chat_response(gens, results)
    )


def test_columns_give_back_the_entries_the_recorder_makes() -> None:
    rng = random.Random(5)
    rec = LogprobRecorder(_Bytes(), 3)  # type: ignore[arg-type]
    cols = LogprobColumns(rec)
    expected = []
    for _ in range(50):
        n = rng.randint(1, 4)
        got = rng.choice([3, 3, 2, 5])
        result = TextResult(
            [rng.randrange(99) for _ in range(n)],
            logprobs=[rng.random() for _ in range(n)],
            top_logprobs=got,
            top_token_ids=[rng.randrange(99) for _ in range(n * got)],
            top_token_logprobs=[rng.random() for _ in range(n * got)],
        )
        shown = rng.randint(0, n)
        cols.add(result, shown)
        expected += rec.entries(result, shown)
    assert cols.entries() == expected
    cols.drop(3)
    assert cols.entries() == expected[:-3] and cols.entries(5, 9) == expected[5:9]
