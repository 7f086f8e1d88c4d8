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


# Issue 18, item 5: an answer cut by max_tokens inside a multi-byte character. vLLM's
# incremental detokenizer holds back an incomplete UTF-8 tail until the next token completes
# it; at the token limit no token comes, so nothing broken may be shown: no U+FFFD.
MELT = TOK.encode("ok 🫠")  # "ok", " \xf0\x9f", "\xab", "\xa0": 🫠 spans three tokens


@pytest.mark.parametrize("cut", [1, 2])  # tokens of the emoji generated before the limit
def test_a_length_stop_inside_a_character_shows_no_broken_character(cut: int) -> None:
    emoji_at = len(MELT) - 3
    ids = MELT[: emoji_at + cut]
    lps = [-0.5] * len(ids)
    stream = TextStream(TOK, [], frozenset())
    text = stream.feed(TextResult(ids, FinishReason.LENGTH, logprobs=lps))
    assert text == "ok " and "\ufffd" not in text
    assert stream.finish_reason == "length"
    assert stream.completion_tokens == len(ids)  # every generated token counts
    # Tokens that held only the cut character's bytes report no logprobs; the first of
    # the emoji's tokens also carries the space, which is shown.
    assert stream.shown == emoji_at + 1


def test_a_length_stop_on_a_whole_character_shows_it() -> None:
    stream = TextStream(TOK, [], frozenset())
    assert stream.feed(TextResult(MELT, FinishReason.LENGTH)) == "ok 🫠"
    assert stream.shown == len(MELT)


def test_an_end_token_after_a_broken_character_still_shows_the_replacement() -> None:
    """Only the token limit cuts: a model that ends its own text on a broken character
    wrote it (as bytes.decode with "replace" reads it)."""
    stream = TextStream(TOK, [], frozenset({151645}))
    text = stream.feed(TextResult([*MELT[:-1], 151645], FinishReason.STOP, stop_token_id=151645))
    assert text == "ok \ufffd"


def test_a_length_cut_hides_the_logprobs_of_earlier_frames_too() -> None:
    """One token a frame (as engines send logprobs): the cut character's tokens of the
    earlier frames are counted in ``hidden_before``, so a whole answer drops their
    logprobs as it does when they come in one frame."""
    ids = MELT[: len(MELT) - 1]  # "ok", " \xf0\x9f", "\xab": cut before "\xa0"
    stream = TextStream(TOK, [], frozenset())
    text = "".join(stream.feed(TextResult([i], logprobs=[-0.5])) for i in ids[:-1])
    text += stream.feed(TextResult(ids[-1:], FinishReason.LENGTH, logprobs=[-0.5]))
    assert text == "ok " and stream.completion_tokens == len(ids)
    assert (stream.shown, stream.hidden_before) == (0, 0)  # " \xf0\x9f" also carries " "
    ids = TOK.encode("x𪚥")  # "x", "\xf0\xaa", "\x9a", "\xa5"
    assert [len(TOK.token_bytes(i)) for i in ids] == [1, 2, 1, 1]
    stream = TextStream(TOK, [], frozenset())
    for i in ids[:2]:
        stream.feed(TextResult([i], logprobs=[-0.5]))
    assert stream.feed(TextResult([ids[2]], FinishReason.LENGTH, logprobs=[-0.5])) == ""
    # "\x9a" in this frame, "\xf0\xaa" in the one before: neither reports logprobs.
    assert (stream.shown, stream.hidden_before, stream.completion_tokens) == (0, 1, 3)
