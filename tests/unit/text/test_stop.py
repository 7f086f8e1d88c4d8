"""Stop strings: output is text[:earliest match] for every chunking."""

from __future__ import annotations

import tracemalloc
from collections.abc import Sequence
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from neutrino.text.stop import StopMatcher


def reference(text: str, stops: Sequence[str]) -> tuple[str, str | None]:
    hits = [(text.find(s), len(s), s) for s in stops if s and s in text]
    if not hits:
        return text, None
    at, _, stop = min(hits)
    return text[:at], stop


def run(stops: Sequence[str], chunks: Sequence[str]) -> tuple[str, StopMatcher]:
    matcher = StopMatcher(stops)
    out: list[str] = []
    for chunk in chunks:
        emitted = matcher.feed(chunk)
        out.append(emitted)
    out.append(matcher.finish())
    return "".join(out), matcher


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in pairwise(points)]


ALPHABET = st.sampled_from("abc<|>é😀\n")
stops_strategy = st.lists(st.text(ALPHABET, min_size=1, max_size=5), min_size=1, max_size=4)


@settings(max_examples=400, deadline=None)
@given(
    stops=stops_strategy,
    before=st.text(ALPHABET, max_size=20),
    after=st.text(ALPHABET, max_size=20),
    pick=st.integers(0, 3),
    cuts=st.lists(st.integers(0, 100), max_size=12),
)
def test_text_with_a_stop(
    stops: list[str], before: str, after: str, pick: int, cuts: list[int]
) -> None:
    text = before + stops[pick % len(stops)] + after
    expected, expected_stop = reference(text, stops)
    out, matcher = run(stops, split(text, cuts))
    assert out == expected
    assert matcher.stopped
    assert matcher.matched == expected_stop


@settings(max_examples=300, deadline=None)
@given(
    stops=stops_strategy,
    text=st.text(ALPHABET, max_size=40),
    cuts=st.lists(st.integers(0, 100), max_size=12),
)
def test_any_text(stops: list[str], text: str, cuts: list[int]) -> None:
    expected, expected_stop = reference(text, stops)
    out, matcher = run(stops, split(text, cuts))
    assert out == expected
    assert matcher.stopped is (expected_stop is not None)
    assert matcher.matched == expected_stop


@settings(max_examples=200, deadline=None)
@given(
    stops=stops_strategy,
    text=st.text(ALPHABET, max_size=40),
    cuts=st.lists(st.integers(0, 100), max_size=12),
)
def test_never_emits_stop_prefix_or_later_text(
    stops: list[str], text: str, cuts: list[int]
) -> None:
    matcher = StopMatcher(stops)
    emitted = ""
    for chunk in split(text, cuts):
        emitted += matcher.feed(chunk)
        expected, _ = reference(text, stops)
        assert expected.startswith(emitted)
        # what is held back is only a suffix that could still begin a stop (or a pending match)
        held = matcher.held
        assert len(held) <= sum(len(s) for s in stops) + len(chunk)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=50), cuts=st.lists(st.integers(0, 100), max_size=10))
def test_no_stops_is_identity(text: str, cuts: list[int]) -> None:
    matcher = StopMatcher([])
    chunks = split(text, cuts)
    assert [matcher.feed(c) for c in chunks] == chunks
    assert matcher.finish() == ""
    assert not matcher.stopped


def test_holds_only_longest_proper_prefix_suffix() -> None:
    m = StopMatcher(["<|im_end|>", "###"])
    assert m.feed("Hello <|im") == "Hello "
    assert m.held == "<|im"
    assert m.feed("_start") == "<|im_start"
    assert m.feed(" x #") == " x "
    assert m.feed("#") == ""
    assert m.feed("#") == ""
    assert m.stopped and m.matched == "###"
    assert m.feed("more") == ""
    assert m.finish() == ""


def test_finish_releases_held_text() -> None:
    m = StopMatcher(["STOP"])
    assert m.feed("abc ST") == "abc "
    assert m.finish() == "ST"
    assert not m.stopped


def test_earliest_start_wins_even_if_later_stop_completes_first() -> None:
    m = StopMatcher(["abcd", "c"])
    assert m.feed("xab") == "x"
    assert m.feed("c") == ""  # "c" matched, but "abcd" (starting earlier) may still complete
    assert not m.stopped
    assert m.feed("d") == ""
    assert m.stopped and m.matched == "abcd"
    m2 = StopMatcher(["abcd", "c"])
    assert m2.feed("xab") + m2.feed("c") + m2.feed("e") == "xab"
    assert m2.matched == "c"
    m3 = StopMatcher(["abcd", "c"])
    assert m3.feed("xabc") + m3.finish() == "xab"
    assert m3.matched == "c"


def test_overlapping_and_duplicate_stops() -> None:
    m = StopMatcher(["aa", "aa", "", "a|"])
    assert m.stops == ("aa", "a|")
    assert m.feed("xa") == "x"
    assert m.feed("|y") == ""
    assert m.matched == "a|"


def test_stop_at_start() -> None:
    m = StopMatcher(["</s>"])
    assert m.feed("</s>rest") == ""
    assert m.stopped and m.matched == "</s>"


def test_long_stop_strings_cost_memory_in_proportion_to_their_length() -> None:
    """A matcher keeps its stops, not every prefix of them (that grew with the square of a
    stop's length: a 10,000-character stop took 36 MB), and still holds a long one back."""
    stop = "ab" * 5_000
    tracemalloc.start()
    try:
        m = StopMatcher([stop, "x" * 10_000])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 200_000
    assert m.feed("zz" + stop[:7_001]) == "zz"
    assert m.held == stop[:7_001]
    assert m.feed(stop[7_001:] + "tail") == ""
    assert m.matched == stop
