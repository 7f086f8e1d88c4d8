"""The engine side's protocol rules, sans-IO: bytes in, frames out, handler calls."""

from __future__ import annotations

from typing import Any

from neutrino.engine.messages import (
    Cancel,
    EmbedQuery,
    EngineError,
    ErrorCode,
    FinishReason,
    Hello,
    HelloAck,
    Message,
    ModelInfo,
    Ping,
    Pong,
    Query,
    Sampling,
    TextQuery,
    TextResult,
    TokenBatch,
)
from neutrino.engine.wire.codec import decode, encode
from neutrino.engine.wire.framing import FrameDecoder
from neutrino.engine.wire.schema import PROTOCOL_VERSION
from neutrino.engines.session import EngineHandler, EngineSession

ACK = HelloAck("test-engine", PROTOCOL_VERSION, [ModelInfo("m", 4096)], 8)
Q = TextQuery("m", [1, 2], Sampling(max_tokens=5))


class Recorder(EngineHandler):
    def __init__(self, refuse: EngineError | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.refuse = refuse

    def hello_ack(self, hello: Hello) -> HelloAck:
        self.calls.append(("hello", hello.token_batches))
        return ACK

    def start(self, rid: int, query: Query) -> EngineError | None:
        self.calls.append(("start", rid))
        return self.refuse

    def cancel(self, rid: int, reason: str) -> None:
        self.calls.append(("cancel", rid, reason))

    def lost(self) -> None:
        self.calls.append(("lost",))


def feed(session: EngineSession, *frames: tuple[int, Message]) -> list[tuple[int, Message]]:
    session.receive_data(b"".join(encode(r, m) for r, m in frames))
    return sent(session)


def sent(session: EngineSession) -> list[tuple[int, Message]]:
    if not session.wants_to_send:
        return []
    return [decode(f) for f in FrameDecoder().feed(session.data_to_send())]


def greeted(batches: bool = True) -> tuple[EngineSession, Recorder]:
    handler = Recorder()
    session = EngineSession(handler)
    assert feed(session, (0, Hello("c", PROTOCOL_VERSION, token_batches=batches))) == [(0, ACK)]
    return session, handler


def test_a_query_before_hello_is_a_protocol_error_and_closes() -> None:
    handler = Recorder()
    session = EngineSession(handler)
    out = feed(session, (1, Q))
    assert len(out) == 1 and isinstance(out[0][1], EngineError)
    assert out[0][1].code is ErrorCode.PROTOCOL and session.closing is not None
    assert handler.calls == []
    assert feed(session, (0, Hello("c", PROTOCOL_VERSION))) == []  # nothing after


def test_another_protocol_version_is_refused() -> None:
    session = EngineSession(Recorder())
    (rid, err), *_ = feed(session, (0, Hello("c", PROTOCOL_VERSION + 1)))
    assert rid == 0 and isinstance(err, EngineError) and err.code is ErrorCode.PROTOCOL


def test_garbage_is_a_protocol_error() -> None:
    session = EngineSession(Recorder())
    session.receive_data(b"\xff" * 64)
    (_, err), *_ = sent(session)
    assert isinstance(err, EngineError) and err.code is ErrorCode.PROTOCOL
    assert session.closing is not None


def test_ids_are_checked_and_ended_requests_send_nothing_more() -> None:
    session, handler = greeted()
    out = feed(session, (0, Q))
    assert out == [(0, EngineError(ErrorCode.INVALID_REQUEST, "request id 0 is reserved"))]
    assert feed(session, (7, Q)) == []
    out = feed(session, (7, Q))  # the id is active: both end
    assert out == [(7, EngineError(ErrorCode.INVALID_REQUEST, "request id 7 already active"))]
    assert ("cancel", 7, "request id reused") in handler.calls
    session.send(7, TextResult([1]))  # the handler's late frame is dropped
    assert sent(session) == []
    assert feed(session, (7, Cancel("late"))) == []  # a cancel of an ended id: ignored
    assert handler.calls.count(("cancel", 7, "late")) == 0


def test_a_final_frame_ends_a_request_and_a_cancel_reaches_the_handler_once() -> None:
    session, handler = greeted()
    feed(session, (1, Q), (2, Q))
    session.send(1, TextResult([5], FinishReason.STOP))
    session.send(1, TextResult([6]))  # after its end
    assert sent(session) == [(1, TextResult([5], FinishReason.STOP))]
    feed(session, (2, Cancel("client disconnected")), (2, Cancel("again")))
    assert [c for c in handler.calls if c[0] == "cancel"] == [("cancel", 2, "client disconnected")]
    assert session.active == set()


def test_a_refused_query_is_answered_with_its_error() -> None:
    handler = Recorder(refuse=EngineError(ErrorCode.OVERLOADED, "busy"))
    session = EngineSession(handler)
    feed(session, (0, Hello("c", PROTOCOL_VERSION)))
    assert feed(session, (3, EmbedQuery("m", [[1]]))) == [
        (3, EngineError(ErrorCode.OVERLOADED, "busy"))
    ]
    assert session.active == set()


def test_pings_are_answered() -> None:
    session, _ = greeted()
    assert feed(session, (0, Ping(42))) == [(0, Pong(42))]


def test_one_steps_plain_tokens_leave_as_one_batch_when_the_client_takes_them() -> None:
    for batches in (True, False):
        session, _ = greeted(batches)
        feed(session, (1, Q), (2, Q))
        session.send(1, TextResult([10]))
        session.send(2, TextResult([20, 21]))
        session.send(1, TextResult([11], FinishReason.STOP))
        out = sent(session)
        if batches:
            assert out == [
                (0, TokenBatch([1, 2], [1, 2], [10, 20, 21])),
                (1, TextResult([11], FinishReason.STOP)),
            ]
            assert session.batches == 1
        else:
            assert [r for r, _ in out] == [1, 2, 1] and session.batches == 0


def test_a_lost_connection_tells_the_handler_once_and_sends_nothing() -> None:
    session, handler = greeted()
    feed(session, (1, Q))
    session.connection_lost()
    session.send(1, TextResult([1]))
    assert handler.calls[-1] == ("lost",) and not session.wants_to_send


def test_an_engine_on_tcp_answers_only_the_hello_that_carries_its_token() -> None:
    for token in ("", "wrong", "secret-x"):  # none, another, a longer one with its prefix
        handler = Recorder()
        session = EngineSession(handler)
        session.token = "secret"
        out = feed(session, (0, Hello("c", PROTOCOL_VERSION, token=token)), (1, Q))
        assert len(out) == 1 and isinstance(out[0][1], EngineError), token
        assert out[0][1].code is ErrorCode.PROTOCOL and "unauthorized" in out[0][1].message
        assert session.closing is not None and handler.calls == []
    handler = Recorder()
    session = EngineSession(handler)
    session.token = "secret"
    assert feed(session, (0, Hello("c", PROTOCOL_VERSION, token="secret"))) == [(0, ACK)]


def test_the_token_travels_in_the_hello_frame_and_is_not_shown() -> None:
    _, msg = decode(encode(0, Hello("c", PROTOCOL_VERSION, token="s3cret")))
    assert isinstance(msg, Hello) and msg.token == "s3cret"
    assert "s3cret" not in repr(msg)
