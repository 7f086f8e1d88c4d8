from __future__ import annotations

import itertools

import pytest

from neutrino.pipeline.state import TERMINAL, TRANSITIONS, IllegalTransition, Lifecycle, State

HAPPY = [State.QUEUED, State.PROCESSING, State.GENERATING, State.COMPLETE]


def test_happy_path_is_timestamped_in_order() -> None:
    lc = Lifecycle()
    for s in HAPPY:
        lc.advance(s)
    assert lc.state is State.COMPLETE and lc.terminal
    names = [name for name, _ in lc.transitions()]
    assert names == ["start", "queued", "processing", "generating", "complete"]
    times = [t for _, t in lc.transitions()]
    assert times == sorted(times)
    timings = lc.timings()
    assert set(timings) == {"queue_time", "prompt_time", "completion_time", "total_time"}
    assert timings["total_time"] >= timings["queue_time"] + timings["completion_time"] - 1e-9


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(State, State)))
def test_every_pair_follows_the_table(src: State, dst: State) -> None:
    lc = Lifecycle()
    # Walk to src along the happy path (or jump to a terminal state from START).
    path = {
        State.START: [],
        State.QUEUED: HAPPY[:1],
        State.PROCESSING: HAPPY[:2],
        State.GENERATING: HAPPY[:3],
        State.COMPLETE: HAPPY,
        State.FAILED: [State.FAILED],
        State.CANCELLED: [State.CANCELLED],
    }[src]
    for s in path:
        lc.advance(s)
    if dst in TRANSITIONS[src]:
        lc.advance(dst)
        assert lc.state is dst
    else:
        with pytest.raises(IllegalTransition):
            lc.advance(dst)
        assert lc.state is src


def test_terminal_states_have_no_exit_and_are_reachable_from_every_live_state() -> None:
    assert {State.COMPLETE, State.FAILED, State.CANCELLED} == TERMINAL
    for s, nexts in TRANSITIONS.items():
        if s not in TERMINAL:
            assert {State.FAILED, State.CANCELLED} <= nexts
