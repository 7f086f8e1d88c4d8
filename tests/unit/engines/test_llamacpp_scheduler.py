"""The llama.cpp engine's scheduler over the real model (SmolLM2-135M), stepped by hand:
chunked prefill and arrivals between chunks, prefix reuse by slot, stop tokens and
min_tokens, the context's end, cancels freeing KV cells, seeds."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from neutrino.engine.messages import (
    EngineError,
    FinishReason,
    Message,
    Sampling,
    TextQuery,
    TextResult,
)

pytest.importorskip("llama_cpp", reason="the llamacpp extra is not installed")
from neutrino.engines.llamacpp.backend import Backend, BackendConfig
from neutrino.engines.llamacpp.scheduler import Scheduler

GGUF = Path(sys.prefix) / "share" / "neutrino" / "gguf" / "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = "m"
CHUNK = 32
CTX = 256


@pytest.fixture(scope="module")
def backend() -> Iterator[Backend]:
    if not GGUF.is_file():
        pytest.skip(f"{GGUF} is missing (make install)")
    b = Backend(BackendConfig(str(GGUF), slots=3, threads=1, ctx=CTX, chunk=CHUNK))
    yield b
    b.close()


class Stepper:
    """A scheduler driven step by step in the test's thread (no decode thread)."""

    def __init__(self, backend: Backend) -> None:
        self.frames: list[tuple[int, Message]] = []
        self.s = Scheduler(backend, self.frames.extend)
        for slot in self.s.slots:  # a clean context for each test
            backend.forget(slot.index, 0)

    def step(self) -> None:
        self.s._drain()
        out: list[tuple[int, Message]] = []
        self.s._admit(out)
        if self.s.running:
            self.s._step(out)
        self.frames.extend(out)

    def of(self, key: int) -> list[Message]:
        return [m for k, m in self.frames if k == key]

    def final(self, key: int) -> TextResult | EngineError | None:
        for m in self.of(key):
            if isinstance(m, EngineError) or (
                isinstance(m, TextResult) and m.finish_reason is not FinishReason.NONE
            ):
                return m
        return None

    def run(self, key: int, limit: int = 400) -> TextResult:
        for _ in range(limit):
            if self.final(key) is not None:
                break
            self.step()
        final = self.final(key)
        assert isinstance(final, TextResult), final
        return final

    def tokens(self, key: int) -> list[int]:
        return [t for m in self.of(key) if isinstance(m, TextResult) for t in m.tokens]


def query(prompt: list[int], **sampling: object) -> TextQuery:
    s = Sampling(max_tokens=8, temperature=0.0)
    for k, v in sampling.items():
        setattr(s, k, v)
    return TextQuery(MODEL, prompt, s)


PROMPT = [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 2, 198, 1, 4093, 198]


def test_a_long_prompt_is_prefilled_in_chunks_and_an_arrival_joins_between(
    backend: Backend,
) -> None:
    st = Stepper(backend)
    long_prompt = (PROMPT * 12)[: CHUNK * 5]
    st.s.start(1, query(long_prompt))
    st.step()
    assert st.s.running[0].n_past == CHUNK  # one chunk per step
    st.s.start(2, query(PROMPT, max_tokens=2))  # arrives during the long prefill
    steps = 0
    while st.final(2) is None:
        st.step()
        steps += 1
    # The newcomer shared the steps' budget: it finished while the long prompt prefills.
    assert steps <= 4
    assert st.final(1) is None and st.s.running[0].n_past < len(long_prompt)
    final = st.run(1)
    assert final.prompt_tokens == len(long_prompt) and final.completion_tokens == 8


def test_prefix_reuse_picks_the_slot_that_holds_the_prefix(backend: Backend) -> None:
    st = Stepper(backend)
    other = [1, 4093, 198, 2683, 359, 253, 1345, 2, 198]
    st.s.start(1, query(other, max_tokens=2))
    st.run(1)
    st.s.start(2, query(PROMPT, max_tokens=2))
    st.run(2)
    used = [s for s in st.s.slots if s.tokens]
    assert len(used) == 2
    st.s.start(3, query([*PROMPT, 6191, 30], max_tokens=2))
    final = st.run(3)
    assert final.cached_tokens == len(PROMPT)  # only the two new tokens were prefilled
    st.s.start(4, query(PROMPT, max_tokens=2))  # a prompt held whole: its last token again
    assert st.run(4).cached_tokens == len(PROMPT) - 1


def test_greedy_is_repeatable_and_a_stop_token_ends_it(backend: Backend) -> None:
    st = Stepper(backend)
    st.s.start(1, query(PROMPT))
    st.run(1)
    greedy = st.tokens(1)
    st.s.start(2, query(PROMPT, stop_token_ids=[greedy[2]]))
    final = st.run(2)
    assert st.tokens(2) == greedy[:3]
    assert final.finish_reason is FinishReason.STOP and final.stop_token_id == greedy[2]


def test_min_tokens_holds_the_stop_tokens_back(backend: Backend) -> None:
    st = Stepper(backend)
    st.s.start(1, query(PROMPT, max_tokens=1))
    first = st.tokens(1) if st.run(1) else []
    st.s.start(2, query(PROMPT, max_tokens=4, stop_token_ids=[first[0]], min_tokens=1))
    final = st.run(2)
    assert st.tokens(2)[0] != first[0]  # masked at the first step
    assert final.completion_tokens >= 1


def test_the_context_end_is_a_length_finish(backend: Backend) -> None:
    st = Stepper(backend)
    prompt = (PROMPT * 20)[: CTX - 5]
    st.s.start(1, query(prompt, max_tokens=100, ignore_eos=True))
    final = st.run(1)
    assert final.finish_reason is FinishReason.LENGTH
    assert len(prompt) + final.completion_tokens == CTX + 1  # the last one never fed


def test_a_cancel_frees_the_slot_and_its_cells(backend: Backend) -> None:
    st = Stepper(backend)
    st.s.start(1, query(PROMPT * 4, max_tokens=50))
    for _ in range(4):
        st.step()
    (slot,) = [s for s in st.s.slots if s.seq is not None]
    assert slot.tokens
    st.s.cancel(1)
    st.step()
    assert slot.seq is None and slot.tokens == [] and not st.s.running
    assert st.s.stats.cancels == 1 and st.final(1) is None  # no frame after the cancel


def test_seeds_choose_the_draws(backend: Backend) -> None:
    st = Stepper(backend)
    for key, seed in ((1, 5), (2, 5), (3, 6)):
        st.s.start(key, query(PROMPT, max_tokens=12, temperature=1.5, seed=seed))
    for key in (1, 2, 3):
        st.run(key)
    assert st.tokens(1) == st.tokens(2) != st.tokens(3)
    assert st.s.stats.max_batch == 3  # decoded together


def test_logprobs_are_the_models_and_ordered(backend: Backend) -> None:
    st = Stepper(backend)
    st.s.start(1, query(PROMPT, max_tokens=3, logprobs=True, top_logprobs=4))
    st.run(1)
    for m in st.of(1):
        assert isinstance(m, TextResult)
        (lp,) = m.logprobs
        assert m.top_logprobs == 4 and len(m.top_token_ids) == 4
        assert list(m.top_token_logprobs) == sorted(m.top_token_logprobs, reverse=True)
        assert m.top_token_ids[0] == m.tokens[0] and abs(m.top_token_logprobs[0] - lp) < 1e-6


def test_a_bad_grammar_fails_its_request_only(backend: Backend) -> None:
    from neutrino.engine.messages import Guided, GuidedMode

    st = Stepper(backend)
    bad = query(PROMPT)
    bad.guided = Guided(GuidedMode.GRAMMAR, pattern="root ::= [unclosed")
    st.s.start(1, bad)
    st.s.start(2, query(PROMPT, max_tokens=2))
    st.run(2)
    err = st.final(1)
    assert isinstance(err, EngineError) and "grammar" in err.message


def test_penalties_change_what_greedy_repeats(backend: Backend) -> None:
    """Repetition, presence and frequency penalties each move greedy decoding off its
    free path on a prompt that invites repeating itself."""
    st = Stepper(backend)
    prompt = [*PROMPT, 253, 253, 253, 253, 253, 253]
    st.s.start(1, query(prompt, max_tokens=24, ignore_eos=True))
    st.run(1)
    free = st.tokens(1)
    for key, penalty in enumerate(
        ({"repetition_penalty": 1.8}, {"presence_penalty": 1.8}, {"frequency_penalty": 1.8}),
        start=2,
    ):
        st.s.start(key, query(prompt, max_tokens=24, ignore_eos=True, **penalty))
        st.run(key)
        assert st.tokens(key) != free, penalty
    assert len(set(free)) < len(free) and free[0] == 253  # the free path repeats the prompt
    # As in vLLM, the repetition penalty counts the prompt's tokens, so its first token is
    # already another; presence and frequency count generated tokens only.
    assert st.tokens(2)[0] != 253
    assert st.tokens(3)[0] == st.tokens(4)[0] == 253


@pytest.mark.parametrize("cut", [{"top_k": 1}, {"top_p": 1e-6}, {"min_p": 1.0}])
def test_top_k_top_p_and_min_p_each_cut_to_the_best_token(
    backend: Backend, cut: dict[str, float]
) -> None:
    """At a high temperature a seeded draw wanders; cut to the most likely token by any of
    the three, it is greedy decoding again."""
    st = Stepper(backend)
    st.s.start(1, query(PROMPT, max_tokens=12, ignore_eos=True))
    st.s.start(2, query(PROMPT, max_tokens=12, ignore_eos=True, temperature=2.0, seed=3))
    st.s.start(3, query(PROMPT, max_tokens=12, ignore_eos=True, temperature=2.0, seed=3, **cut))
    for key in (1, 2, 3):
        st.run(key)
    assert st.tokens(2) != st.tokens(1)
    assert st.tokens(3) == st.tokens(1)
