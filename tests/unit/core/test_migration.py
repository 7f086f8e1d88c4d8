"""The rules of an answer's move (engine/fleet/migration.py) and what a Failover keeps for it."""

from __future__ import annotations

from dataclasses import dataclass, field

from neutrino.engine.fleet.failover import Failover
from neutrino.engine.fleet.migration import Migrations, reason_of
from neutrino.engine.messages import (
    Guided,
    GuidedMode,
    HelloAck,
    ModalResult,
    Sampling,
    TextQuery,
    TextResult,
)
from neutrino.engine.wire.codec import decode, encode
from neutrino.errors import ErrorKind, NeutrinoError


@dataclass
class Sink:
    tokens: list[int] = field(default_factory=list)
    moves: list[tuple[str, str]] = field(default_factory=list)
    errors: list[NeutrinoError] = field(default_factory=list)

    def on_result(self, result: TextResult) -> bool:
        self.tokens += result.tokens
        return False

    def on_tokens(self, tokens: list[int]) -> bool:
        self.tokens += tokens
        return False

    def on_error(self, error: NeutrinoError) -> None:
        self.errors.append(error)

    def on_modal(self, result: ModalResult) -> None:
        raise AssertionError

    def flush(self) -> None:
        pass

    def on_moved(self, engine: str, reason: str) -> None:
        self.moves.append((engine, reason))


@dataclass
class Replica:
    name: str
    continues: bool = True
    connected: bool = True
    load: float = 0.0
    hello: HelloAck | None = None
    guided: bool = True

    def __post_init__(self) -> None:
        self.hello = HelloAck("e", 1, [], 4, continues=self.continues,
                              continues_guided=self.continues and self.guided)  # fmt: skip


QUERY = TextQuery(model="m", prompt_tokens=[1, 2, 3], sampling=Sampling(max_tokens=10, seed=4))


def _live(record: bool = True) -> tuple[Failover, Sink]:
    sink = Sink()
    attempt = Failover(QUERY, sink, lambda a, e: False, lambda name: None, record)
    attempt.begin("a")
    attempt.on_tokens([7])
    attempt.on_result(TextResult([8, 9]))
    attempt.on_tokens([10])
    return attempt, sink


def test_a_failover_keeps_the_answers_ids_as_they_pass() -> None:
    attempt, sink = _live()
    assert sink.tokens == [7, 8, 9, 10] and list(attempt.generated) == [7, 8, 9, 10]
    unkept, _ = _live(record=False)
    assert not unkept.generated  # migration off: nothing kept on the token path


def test_a_move_continues_the_answer_on_the_least_loaded_able_replica() -> None:
    attempt, _ = _live()
    m = Migrations(2, lambda r: r.load)
    replicas = [Replica("a"), Replica("b", load=0.5), Replica("c", load=0.1),
                Replica("d", continues=False), Replica("e", connected=False)]  # fmt: skip
    query = m.allowed(attempt)
    assert query is not None and query.forced_tokens == [7, 8, 9, 10]
    assert query.prompt_tokens == QUERY.prompt_tokens and query.sampling == QUERY.sampling
    assert m.pick(attempt, replicas).name == "c"
    attempt.tried.append("c")  # been there: another one first
    assert m.pick(attempt, replicas).name == "b"
    assert m.pick(attempt, [Replica("a")]) is None  # not the one that failed
    assert m.pick(attempt, [Replica("a")], anew=True).name == "a"  # unless it came back


def test_no_move_past_the_limit_or_at_max_tokens() -> None:
    attempt, sink = _live()
    m = Migrations(1, lambda r: 0.0)
    attempt.on_moved("b", "lost")
    assert sink.moves == [("b", "lost")] and attempt.moves == 1
    assert m.allowed(attempt) is None
    assert m.refused == {"limit": 1, "no_replica": 0}
    full, _ = _live()
    full.generated.extend(range(6))  # ten ids: max_tokens reached
    assert Migrations(5, lambda r: 0.0).allowed(full) is None


def test_the_reason_of_a_move() -> None:
    lost = NeutrinoError(ErrorKind.ENGINE_DISCONNECTED, "gone")
    failed = NeutrinoError(ErrorKind.ENGINE_ERROR, "failed")
    assert reason_of(lost, drained=False) == "lost"
    assert reason_of(failed, drained=False) == "engine_error"
    assert reason_of(lost, drained=True) == "drained"
    assert reason_of(NeutrinoError(ErrorKind.CONTEXT_LENGTH, "too long"), drained=False) is None


def test_forced_tokens_and_continues_cross_the_wire() -> None:
    moved = TextQuery(model="m", prompt_tokens=[1, 2], sampling=Sampling(max_tokens=9),
                      forced_tokens=[5, 2**32 - 1])  # fmt: skip
    rid, back = decode(encode(7, moved))
    assert rid == 7 and isinstance(back, TextQuery) and list(back.forced_tokens) == [5, 2**32 - 1]
    _, ack = decode(encode(0, HelloAck("e", 1, [], 2, continues=True)))
    assert isinstance(ack, HelloAck) and ack.continues and not ack.continues_guided
    _, ack = decode(encode(0, HelloAck("e", 1, [], 2, continues=True, continues_guided=True)))
    assert isinstance(ack, HelloAck) and ack.continues_guided


def test_a_guided_answer_moves_only_where_its_constraint_goes_on() -> None:
    guided = TextQuery(model="m", prompt_tokens=[1, 2, 3], sampling=Sampling(max_tokens=10),
                       guided=Guided(GuidedMode.REGEX, pattern="[a-z]+"))  # fmt: skip
    attempt = Failover(guided, Sink(), lambda a, e: False, lambda name: None, True)
    attempt.begin("a")
    attempt.on_tokens([7])
    m = Migrations(2, lambda r: r.load)
    plain = [Replica("b", guided=False, load=0.0), Replica("c", load=0.5)]
    assert m.pick(attempt, plain).name == "c"  # b would restart the constraint
    assert m.pick(attempt, plain[:1]) is None
    unguided, _ = _live()
    assert m.pick(unguided, plain).name == "b"
