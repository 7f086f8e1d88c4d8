"""Loading and unloading models over the engine protocol, sans-IO on both sides: the
client's link (``EngineLink.control``) and the engine's session (``EngineHandler.control``)
exchanging frames as bytes; and the lifecycle's choice of what to evict."""

from __future__ import annotations

import asyncio

import pytest

from neutrino.engine.fleet.lifecycle import LifecycleStats, ModelKeeper
from neutrino.engine.link import EngineLink, Handshaken, ModelsUpdated
from neutrino.engine.messages import (
    EngineError,
    ErrorCode,
    Hello,
    HelloAck,
    LoadModel,
    Message,
    ModelInfo,
    ModelsChanged,
    ModelState,
    UnloadModel,
)
from neutrino.engine.wire.codec import decode, encode
from neutrino.engine.wire.framing import FrameDecoder
from neutrino.engine.wire.schema import PROTOCOL_VERSION
from neutrino.engines.session import EngineHandler, EngineSession
from neutrino.errors import ErrorKind, NeutrinoError

U, L = ModelState.UNLOADED, ModelState.LOADED


def table(**states: ModelState) -> list[ModelInfo]:
    return [ModelInfo(name, 1024, state=state, size_bytes=10) for name, state in states.items()]


class Loader(EngineHandler):
    """Answers loads at once; refuses unloads of "busy"."""

    def __init__(self) -> None:
        self.models = table(a=U, b=U)
        self.session: EngineSession | None = None

    def hello_ack(self, hello: Hello) -> HelloAck:
        return HelloAck("loader", PROTOCOL_VERSION, self.models, 4, memory_budget=20)

    def control(self, rid: int, msg: LoadModel | UnloadModel) -> EngineError | None:
        if msg.name == "busy":
            return EngineError(ErrorCode.OVERLOADED, "busy")
        state = L if isinstance(msg, LoadModel) else U
        self.models = [
            ModelInfo(m.name, 1024, state=state, size_bytes=10) if m.name == msg.name else m
            for m in self.models
        ]
        assert self.session is not None
        self.session.send(rid, ModelsChanged(self.models))
        return None


def pair() -> tuple[EngineLink, EngineSession, Loader]:
    handler = Loader()
    session = EngineSession(handler)
    handler.session = session
    link = EngineLink("e")
    pump(link, session)
    return link, session, handler


def pump(link: EngineLink, session: EngineSession) -> list[object]:
    """Carry frames both ways until both are quiet; the link's events."""
    events: list[object] = []
    frames = FrameDecoder(1 << 20)
    while link.wants_to_send or session.wants_to_send:
        if link.wants_to_send:
            session.receive_data(link.data_to_send())
        if session.wants_to_send:
            data = session.data_to_send()
            assert all(decode(f) for f in frames.feed(data))
            event = link.receive_data(data)
            if event is not None:
                events.append(event)
    return events


def test_a_load_is_answered_with_the_new_table_under_its_id() -> None:
    link, session, _ = pair()
    assert link.hello is not None and link.hello.memory_budget == 20
    told: list[NeutrinoError | None] = []
    rid = link.control(LoadModel("a"), told.append)
    events = pump(link, session)
    assert told == [None]
    assert events == [ModelsUpdated(table(a=L, b=U))]
    assert link.hello.models == table(a=L, b=U)
    assert rid not in session.active and not link.controls


def test_a_refused_control_is_the_engines_error() -> None:
    link, session, _ = pair()
    told: list[NeutrinoError | None] = []
    link.control(UnloadModel("busy"), told.append)
    pump(link, session)
    (err,) = told
    assert err is not None and err.kind is ErrorKind.ENGINE_OVERLOADED


def test_an_engine_that_loads_nothing_says_so() -> None:
    session = EngineSession(EngineHandler())
    session.greeted = True
    session.receive_data(encode(5, LoadModel("a")))
    ((rid, msg),) = [decode(f) for f in FrameDecoder(1 << 20).feed(session.data_to_send())]
    assert rid == 5 and isinstance(msg, EngineError) and msg.code is ErrorCode.UNSUPPORTED


def test_a_lost_connection_fails_the_controls_waiting() -> None:
    link, _, _ = pair()
    told: list[NeutrinoError | None] = []
    link.control(LoadModel("a"), told.append)
    link.connection_lost()
    (err,) = told
    assert err is not None and err.kind is ErrorKind.ENGINE_DISCONNECTED


def test_old_frames_decode_with_every_model_loaded() -> None:
    """An engine that never sets the new fields: its models are loaded, no budget."""
    ack = HelloAck("old", PROTOCOL_VERSION, [ModelInfo("m", 10)], 1)
    _, got = decode(encode(0, ack))
    assert isinstance(got, HelloAck) and got.memory_budget == 0
    assert got.models[0].state is ModelState.LOADED


# ---------------------------------------------------------------- what the keeper evicts


class Engine:
    """A fake engine table for the keeper (the pool's hello and control)."""

    def __init__(self, budget: int, **states: ModelState) -> None:
        self.hello = HelloAck("e", PROTOCOL_VERSION, table(**states), 4, memory_budget=budget)
        self.calls: list[Message] = []

    async def control(self, msg: LoadModel | UnloadModel) -> None:
        self.calls.append(msg)
        state = L if isinstance(msg, LoadModel) else U
        self.hello.models = [
            ModelInfo(m.name, 1024, state=state, size_bytes=10) if m.name == msg.name else m
            for m in self.hello.models
        ]


def keeper(engine: Engine, pinned: frozenset[str] = frozenset()) -> ModelKeeper:
    return ModelKeeper("e", lambda: engine.hello, engine.control, pinned, LifecycleStats())


def test_the_least_recently_used_idle_model_is_evicted_and_pins_are_kept() -> None:
    async def run() -> None:
        engine = Engine(20, a=L, b=L, c=U, p=U)
        k = keeper(engine, frozenset({"p"}))
        k.last_used = {"a": 2.0, "b": 1.0}
        await k.ensure_loaded("c", asyncio.get_running_loop().time() + 5)
        assert engine.calls == [UnloadModel("b"), LoadModel("c")]
        assert k.stats.of("b").evictions == 1 and k.stats.of("c").loads == 1
        engine.calls.clear()
        k.used("a")  # a is answering a request: c (idle) goes, not a
        await k.ensure_loaded("p", asyncio.get_running_loop().time() + 5)
        assert engine.calls == [UnloadModel("c"), LoadModel("p")]
        engine.calls.clear()
        waiting = asyncio.ensure_future(k.ensure_loaded("b", asyncio.get_running_loop().time() + 5))
        await asyncio.sleep(0.01)
        assert engine.calls == []  # only a could go (p is pinned), and it is busy
        assert not k.ready("a")  # a load waits: new requests of a wait their turn
        k.released("a")
        await waiting
        assert engine.calls == [UnloadModel("a"), LoadModel("b")]

    asyncio.run(run())


def test_a_model_that_cannot_fit_beside_the_pins_is_refused() -> None:
    async def run() -> None:
        k = keeper(Engine(10, p=L, a=U), frozenset({"p"}))
        with pytest.raises(NeutrinoError, match="pinned"):
            await k.ensure_loaded("a", asyncio.get_running_loop().time() + 5)

    asyncio.run(run())


def test_handshaken_is_still_the_first_event() -> None:
    link = EngineLink("e")
    session = EngineSession(Loader())
    events = pump(link, session)
    assert isinstance(events[0], Handshaken)
