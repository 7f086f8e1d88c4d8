"""The Inference servicer against the in-process engine, with a stand-in call context."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest

from mocks.mock_ie.core import MockEngine, MockModel
from mocks.mock_ie.server import MockServer
from neutrino.config import Config, LimitsConfig
from neutrino.engine.messages import TextQuery
from neutrino.engines.inprocess import InProcessEngineClient
from neutrino.frontends.grpc.service import InferenceService
from neutrino.pipeline.history import History
from neutrino.pipeline.models import ModelTexts
from neutrino.pipeline.orchestrator import Orchestrator
from neutrino.v1 import common_pb2, inference_pb2

MODEL = "qwen2.5-mock"
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class Ended:
    """The status a handler ended a call with."""

    def __init__(self, code: grpc.StatusCode, details: str, metadata: Any) -> None:
        self.code = code
        self.details = details
        self.metadata = dict(metadata)


class FakeContext:
    """What the servicer uses of grpc.aio.ServicerContext."""

    def __init__(self, remaining: float | None = None, hold_after: int | None = None) -> None:
        self.remaining = remaining
        self.written: list[Any] = []
        self.hold_after = hold_after
        self.held = asyncio.Event()
        self.metadata: tuple[tuple[str, str], ...] = (("traceparent", TRACEPARENT),)

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    def time_remaining(self) -> float | None:
        return self.remaining

    async def write(self, msg: Any) -> None:
        self.written.append(msg)
        if self.hold_after is not None and len(self.written) >= self.hold_after:
            self.held.set()
            await asyncio.Event().wait()  # a client that stopped reading

    # A handler that fails sets the call's status and returns.
    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details

    def set_trailing_metadata(self, metadata: Any) -> None:
        self.trailing = metadata

    def ended(self) -> Ended:
        """The status the handler ended the call with (fails the test if it set none)."""
        code = getattr(self, "code", None)
        assert code is not None, "the handler set no status"
        return Ended(code, getattr(self, "details", ""), getattr(self, "trailing", ()))


async def failed(call: Callable[[FakeContext], Awaitable[Any]]) -> Ended:
    """Run a handler on a fresh context; the error status it ended the call with."""
    ctx = FakeContext()
    assert await call(ctx) is None  # no message: the status says why
    return ctx.ended()


def make(**kw: Any) -> tuple[InferenceService, InProcessEngineClient, Orchestrator]:
    core = MockEngine([MockModel(MODEL, "qwen2", 4096)], capacity=4, **kw)
    engine = MockServer(core).in_process()
    cfg = Config(limits=LimitsConfig(request_timeout_s=30.0))
    orch = Orchestrator(cfg, engine, ModelTexts(cfg.model), History(100))
    return InferenceService(orch, started=1000.0), engine, orch


def chat(**kw: Any) -> inference_pb2.GenerateRequest:
    msgs = [inference_pb2.ChatMessage(role="user", content="Tell me a story")]
    return inference_pb2.GenerateRequest(model=MODEL, chat=inference_pb2.Chat(messages=msgs), **kw)


async def test_unary_and_stream_give_the_same_text() -> None:
    svc, engine, _ = make()
    ctx: Any = FakeContext()
    resp = await svc.Generate(chat(max_tokens=12, seed=3), ctx)
    assert isinstance(resp, inference_pb2.GenerateResponse)
    assert resp.text and resp.usage.completion_tokens == 12
    assert resp.finish_reason == inference_pb2.FINISH_REASON_LENGTH
    await svc.GenerateStream(chat(max_tokens=12, seed=3), ctx)
    assert "".join(m.delta for m in ctx.written) == resp.text
    assert ctx.written[-1].usage.completion_tokens == 12
    assert not engine.cancels
    assert [q.traceparent for q in engine.queries] == [TRACEPARENT, TRACEPARENT]


async def test_deadline_becomes_the_request_timeout() -> None:
    svc, engine, _ = make()
    await svc.Generate(chat(max_tokens=2), FakeContext(remaining=2.5))  # type: ignore[arg-type]
    await svc.Generate(chat(max_tokens=2), FakeContext(remaining=1e6))  # type: ignore[arg-type]
    await svc.Generate(chat(max_tokens=2), FakeContext(remaining=None))  # type: ignore[arg-type]
    deadlines = []
    for q in engine.queries:
        assert isinstance(q, TextQuery)
        deadlines.append(q.deadline_ms)
    assert 2000 < deadlines[0] <= 2500
    assert deadlines[1] == deadlines[2] == 30_000  # capped by [limits] request_timeout_s


@pytest.mark.parametrize(("remaining", "reason"), [(5.0, "client disconnected"), (0.0, "timeout")])
async def test_cancelled_call_cancels_the_engine_once(remaining: float, reason: str) -> None:
    svc, engine, orch = make(reply_tokens=500)
    ctx = FakeContext(remaining=5.0, hold_after=2)
    task = asyncio.ensure_future(svc.GenerateStream(chat(max_tokens=500), ctx))  # type: ignore[arg-type]
    await asyncio.wait_for(ctx.held.wait(), 5)
    ctx.remaining = remaining  # 0: the deadline has passed
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [r for _, r in engine.cancels] == [reason]
    assert orch.inflight == 0
    assert orch.history.latest(1)[0]["state"] == "cancelled"


async def test_errors_map_to_statuses() -> None:
    svc, engine, orch = make()
    got = await failed(lambda ctx: svc.Generate(chat(max_tokens=-1), ctx))  # type: ignore[arg-type]
    assert got.code is grpc.StatusCode.INVALID_ARGUMENT
    assert got.metadata == {"neutrino-error-param": "max_tokens"}
    bad = inference_pb2.GenerateRequest(model="nope", chat=chat().chat)
    got = await failed(lambda ctx: svc.GenerateStream(bad, ctx))  # type: ignore[arg-type]
    assert got.code is grpc.StatusCode.NOT_FOUND
    assert got.metadata["neutrino-error-code"] == "model_not_found"
    orch.draining = True
    got = await failed(lambda ctx: svc.Generate(chat(), ctx))  # type: ignore[arg-type]
    assert got.code is grpc.StatusCode.UNAVAILABLE
    orch.draining = False
    engine.disconnect()
    got = await failed(lambda ctx: svc.Generate(chat(), ctx))  # type: ignore[arg-type]
    assert got.code is grpc.StatusCode.UNAVAILABLE
    assert not engine.queries


async def test_internal_errors_say_nothing_more(monkeypatch: pytest.MonkeyPatch) -> None:
    svc, _, orch = make()

    async def boom(*a: Any, **kw: Any) -> None:
        raise RuntimeError("/secret/path exploded")

    monkeypatch.setattr(orch, "start", boom)
    got = await failed(lambda ctx: svc.Generate(chat(), ctx))  # type: ignore[arg-type]
    assert got.code is grpc.StatusCode.INTERNAL
    assert got.details == "internal error"


async def test_list_models() -> None:
    svc, _, _ = make()
    resp = await svc.ListModels(common_pb2.ListModelsRequest(), FakeContext())  # type: ignore[arg-type]
    assert resp is not None
    assert [(m.id, m.context_length, m.created) for m in resp.models] == [(MODEL, 4096, 1000)]


@pytest.mark.parametrize(("remaining", "reason"), [(5.0, "client disconnected"), (0.0, "timeout")])
async def test_a_cancelled_n2_stream_cancels_each_choice_once(
    remaining: float, reason: str
) -> None:
    svc, engine, orch = make(reply_tokens=500)
    ctx = FakeContext(remaining=5.0, hold_after=3)
    task = asyncio.ensure_future(svc.GenerateStream(chat(max_tokens=500, n=2), ctx))  # type: ignore[arg-type]
    await asyncio.wait_for(ctx.held.wait(), 5)
    ctx.remaining = remaining
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(engine.queries) == 2
    assert [r for _, r in engine.cancels] == [reason, reason]
    assert orch.inflight == 0
    assert [h["state"] for h in orch.history.latest(2)] == ["cancelled", "cancelled"]


async def test_n2_unary_and_stream_agree_per_choice() -> None:
    svc, engine, _ = make()
    ctx: Any = FakeContext()
    resp = await svc.Generate(chat(max_tokens=8, seed=3, n=2), ctx)
    assert isinstance(resp, inference_pb2.GenerateResponse)
    assert [c.index for c in resp.choices] == [0, 1]
    assert resp.text == resp.choices[0].text != resp.choices[1].text
    assert resp.usage.completion_tokens == 16
    await svc.GenerateStream(chat(max_tokens=8, seed=3, n=2), ctx)
    for i in (0, 1):
        assert "".join(m.delta for m in ctx.written if m.index == i) == resp.choices[i].text
    finals = [m for m in ctx.written if m.finish_reason]
    assert sorted(m.index for m in finals) == [0, 1]
    assert [m.HasField("usage") for m in ctx.written].count(True) == 1
    assert ctx.written[-1].usage.completion_tokens == 16
    seeds = [q.sampling.seed for q in engine.queries if isinstance(q, TextQuery)]
    assert seeds == [3, 4, 3, 4]
    assert not engine.cancels
