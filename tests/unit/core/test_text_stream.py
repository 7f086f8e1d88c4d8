"""TextStream: ids handed over in groups (several engine frames read at once) give the same
text, finish and usage count as the same ids one frame at a time."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neutrino.engine.messages import FinishReason, TextResult
from neutrino.errors import ErrorKind, NeutrinoError
from neutrino.pipeline.text_stream import TextStream
from neutrino.text.registry import load_tokenizer

TOK = load_tokenizer("qwen2")
TEXT = "Grüße, 你好 😀! The answer is 42.\nSTOP here; then more text after it ends."
IDS = TOK.encode(TEXT)


def _run(groups: list[list[int]], stops: list[str]) -> tuple[str, str | None, object, int]:
    stream = TextStream(TOK, stops, frozenset())
    out = []
    for group in groups:
        out.append(stream.feed_tokens(group))
        if stream.finish_reason is not None:
            break  # the generation ends the request here
    return "".join(out), stream.finish_reason, stream.stop_reason, stream.completion_tokens


@settings(max_examples=200, deadline=None)
@given(
    cuts=st.lists(st.integers(1, len(IDS) - 1), max_size=12, unique=True),
    stops=st.sampled_from([[], ["STOP"], ["42.\nS", "never"], ["😀"], ["ends."]]),
)
def test_grouped_ids_equal_ids_one_by_one(cuts: list[int], stops: list[str]) -> None:
    points = [0, *sorted(cuts), len(IDS)]
    groups = [IDS[a:b] for a, b in pairwise(points)]
    assert _run(groups, stops) == _run([[i] for i in IDS], stops)


def test_the_count_ends_at_the_id_that_completes_a_stop_string() -> None:
    text, finish, stop, count = _run([IDS], ["STOP"])
    assert (text, finish, stop) == (TEXT[: TEXT.index("STOP")], "stop", "STOP")
    assert count == next(k for k in range(1, len(IDS) + 1) if "STOP" in TOK.decode(IDS[:k]))


@pytest.mark.parametrize("stops", [[], ["STOP"]])
def test_an_id_outside_the_vocabulary_is_an_engine_error(stops: list[str]) -> None:
    stream = TextStream(TOK, stops, frozenset())
    with pytest.raises(NeutrinoError) as info:
        stream.feed_tokens([IDS[0], 3_000_000_000])
    assert info.value.kind is ErrorKind.ENGINE_ERROR
    assert "3000000000" in info.value.message


def test_a_frame_with_logprobs_counts_like_one_without() -> None:
    """Frames read by the full decoder (those that carry logprobs) follow the same rule."""
    plain = TextStream(TOK, ["STOP"], frozenset())
    full = TextStream(TOK, ["STOP"], frozenset())
    assert full.feed(TextResult(IDS)) == plain.feed_tokens(IDS)
    assert full.completion_tokens == plain.completion_tokens < len(IDS)
    assert full.shown == full.completion_tokens
    assert (full.finish_reason, full.stop_reason) == ("stop", "STOP")


# vLLM's stop_reason (its OpenAI server's CompletionOutput.stop_reason, documented as "the stop
# string or token id that caused the completion to stop, None if the completion finished for
# some other reason including encountering the EOS token"): the model's own end token gives
# None, a request's stop_token_ids entry its id, a stop string the string.
END = 151645  # Qwen's <|im_end|>


@pytest.mark.parametrize(
    ("end_id", "reported", "expected"),
    [
        (END, frozenset(), None),  # the model's end of sequence
        (151643, frozenset(), None),  # <|endoftext|>, another end token of the model's
        (IDS[3], frozenset({IDS[3]}), IDS[3]),  # a stop token id the request asked for
    ],
)
def test_stop_reason_follows_vllm(end_id: int, reported: frozenset[int], expected: object) -> None:
    stream = TextStream(TOK, [], frozenset({END, 151643}), reported_ids=reported)
    text = stream.feed(TextResult([*IDS[:3], end_id], FinishReason.STOP, stop_token_id=end_id))
    assert text == TOK.decode(IDS[:3])  # the end token is counted, never shown
    assert (stream.finish_reason, stream.stop_reason) == ("stop", expected)
    assert stream.completion_tokens == 4
