"""The request lifecycle: one transition table, timestamped transitions.

Start -> Queued -> Processing -> Generating -> Complete, with Failed and
Cancelled reachable from every non-terminal state. Any other transition raises
:class:`IllegalTransition`; a request reaches exactly one terminal state.
"""

from __future__ import annotations

import enum
import time


class State(enum.StrEnum):
    START = "start"
    QUEUED = "queued"
    PROCESSING = "processing"
    GENERATING = "generating"
    COMPLETE = "complete"
    FAILED = "failed"
    CANCELLED = "cancelled"


_ENDS = frozenset({State.FAILED, State.CANCELLED})

TRANSITIONS: dict[State, frozenset[State]] = {
    State.START: frozenset({State.QUEUED}) | _ENDS,
    State.QUEUED: frozenset({State.PROCESSING}) | _ENDS,
    # PROCESSING -> COMPLETE: the engine finished without producing a token.
    State.PROCESSING: frozenset({State.GENERATING, State.COMPLETE}) | _ENDS,
    State.GENERATING: frozenset({State.COMPLETE}) | _ENDS,
    State.COMPLETE: frozenset(),
    State.FAILED: frozenset(),
    State.CANCELLED: frozenset(),
}

TERMINAL = frozenset(s for s, nexts in TRANSITIONS.items() if not nexts)
_PHASES = (State.QUEUED, State.PROCESSING, State.GENERATING)  # timed in ``usage``


class IllegalTransition(RuntimeError):
    def __init__(self, current: State, target: State) -> None:
        super().__init__(f"illegal request transition {current} -> {target}")
        self.current = current
        self.target = target


class Lifecycle:
    """The state of one request, with the monotonic time of each state entered."""

    __slots__ = ("created_wall", "state", "times")

    def __init__(self) -> None:
        now = time.monotonic_ns()
        self.state = State.START
        # State -> when it was entered; keyed by str (a State is one) for readers outside
        # the pipeline (metrics), which name states by their values.
        self.times: dict[str, int] = {State.START: now}
        self.created_wall = time.time()

    def advance(self, target: State) -> None:
        if target not in TRANSITIONS[self.state]:
            raise IllegalTransition(self.state, target)
        self.state = target
        self.times[target] = time.monotonic_ns()

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    def timings(self) -> dict[str, float]:
        """Seconds spent per phase, as Groq's API reports them in ``usage``.

        States are entered in order, so a phase lasts until the next state entered;
        a phase not (yet) finished counts as zero.
        """
        spent: dict[str, int] = dict.fromkeys(_PHASES, 0)
        items = iter(self.times.items())
        prev_state, first = next(items)
        prev_t = first
        for state, t in items:
            if prev_state in spent:
                spent[prev_state] = t - prev_t
            prev_state, prev_t = state, t
        return {
            "queue_time": spent[State.QUEUED] / 1e9,
            "prompt_time": spent[State.PROCESSING] / 1e9,
            "completion_time": spent[State.GENERATING] / 1e9,
            "total_time": (prev_t - first) / 1e9 if self.state in TERMINAL else 0.0,
        }

    def transitions(self) -> list[tuple[str, float]]:
        """(state, seconds since start) in order entered."""
        t0 = self.times[State.START]
        return [(str(s), (t - t0) / 1e9) for s, t in self.times.items()]
